"""Content search through the real server and its index ``search.db``: rebuilt at start when removed,
garbage or older than the files; repaired after a kill mid-update; ranked, paged, filtered, with marked
and escaped snippets; any query text answered cleanly."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from talaria_testing.server_proc import ServerProc
from talaria_testing.transcripts import conversation

pytestmark = pytest.mark.integration


def write_session(session_dir: Path, sid: str, *texts: str, **fields) -> Path:
    """A session file as hermes-webui (or a Talaria of before) leaves it."""
    session_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "session_id": sid,
        "title": fields.pop("title", sid),
        "created_at": 1000.0,
        "updated_at": fields.pop("updated_at", 1000.0),
        "messages": conversation(*texts, start=1000.0),
        **fields,
    }
    path = session_dir / f"{sid}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def wait_ready(srv: ServerProc, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = srv.get_json("/api/search/status")
        if status["state"] == "ready" or time.monotonic() > deadline:
            return status
        time.sleep(0.05)


def found(srv: ServerProc, q: str, **params: str) -> list[dict]:
    query = urllib.parse.urlencode({"q": q, "content": "1", **params})
    return srv.get_json(f"/api/sessions/search?{query}")["sessions"]


def every_page(srv: ServerProc, q: str) -> set[str]:
    out: set[str] = set()
    offset: int | None = 0
    while offset is not None:
        page = srv.get_json(f"/api/sessions/search?q={q}&content=1&limit=200&offset={offset}")
        out |= ids(page["sessions"])
        offset = page["next_offset"]
    return out


def ids(rows: list[dict]) -> set[str]:
    return {row["session_id"] for row in rows}


@pytest.fixture
def srv(tmp_path):
    server = ServerProc(tmp_path)
    yield server
    server.stop()


def test_an_index_removed_while_stopped_is_built_again_at_start(srv):
    write_session(srv.session_dir, "a1", "the quokka smiles", "indeed")
    srv.start()
    assert wait_ready(srv)["state"] == "ready"
    assert ids(found(srv, "quokka")) == {"a1"}
    srv.stop()
    db = srv.state_dir / "search.db"
    assert db.exists()
    db.unlink()
    write_session(srv.session_dir, "a2", "another quokka", "yes")
    srv.start()
    assert wait_ready(srv)["state"] == "ready"
    assert ids(found(srv, "quokka")) == {"a1", "a2"}


def test_an_index_of_garbage_bytes_is_replaced_at_start(srv):
    write_session(srv.session_dir, "b1", "a pangolin rolls", "ok")
    srv.start()
    wait_ready(srv)
    srv.stop()
    for name in ("search.db-wal", "search.db-shm"):
        (srv.state_dir / name).unlink(missing_ok=True)
    (srv.state_dir / "search.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 8192)
    srv.start()
    assert wait_ready(srv)["state"] == "ready"
    assert ids(found(srv, "pangolin")) == {"b1"}


def test_an_index_older_than_the_files_is_brought_up_to_date_at_start(srv):
    write_session(srv.session_dir, "c1", "the axolotl swims", "ok")
    write_session(srv.session_dir, "c2", "the axolotl again", "ok")
    srv.start()
    wait_ready(srv)
    assert ids(found(srv, "axolotl")) == {"c1", "c2"}
    srv.stop()
    # Another program (hermes-webui) writes while Talaria is stopped.
    write_session(srv.session_dir, "c1", "now a capybara", "ok")
    (srv.session_dir / "c2.json").unlink()
    write_session(srv.session_dir, "c3", "a capybara too", "ok")
    srv.start()
    assert wait_ready(srv)["state"] == "ready"
    assert ids(found(srv, "axolotl")) == set()
    assert ids(found(srv, "capybara")) == {"c1", "c3"}


def _scan(session_dir: Path, word: str) -> set[str]:
    out = set()
    for path in session_dir.glob("*.json"):
        if path.name.startswith("_"):
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if any(word in str(m.get("content", "")).split() for m in data.get("messages", [])):
            out.add(data["session_id"])
    return out


def test_a_kill_during_index_updates_leaves_an_index_repaired_at_the_next_start(srv):
    srv.start()
    wait_ready(srv)
    stop = threading.Event()

    def import_many() -> None:
        i = 0
        while not stop.is_set():
            try:
                srv.request(
                    "POST",
                    "/api/session/import",
                    {"title": f"t{i}", "messages": conversation(f"gecko {i}", "ok")},
                )
            except OSError:
                return  # the server is gone
            i += 1

    writers = [threading.Thread(target=import_many) for _ in range(3)]
    for writer in writers:
        writer.start()
    time.sleep(1.5)
    srv.kill()  # saves and index updates in flight
    stop.set()
    for writer in writers:
        writer.join(10)
    on_disk = _scan(srv.session_dir, "gecko")
    assert len(on_disk) > 5
    srv.start()
    assert wait_ready(srv)["state"] == "ready"
    assert every_page(srv, "gecko") == on_disk


def test_results_are_ranked_paged_filtered_and_snippets_marked_and_escaped(srv):
    write_session(
        srv.session_dir,
        "r1",
        "an ocelot seen by the river bank today",
        "fine",
        model="m-one",
        updated_at=1_700_000_000.0,
    )
    write_session(
        srv.session_dir,
        "r2",
        "ocelot ocelot ocelot <script>alert(1)</script>",
        "x",
        model="m-two",
        updated_at=1_800_000_000.0,
        project_id="p1",
    )
    for i in range(5):
        write_session(srv.session_dir, f"r{i + 3}", f"an ocelot once, among many other words number {i}", "y")
    srv.start()
    wait_ready(srv)
    rows = found(srv, "ocelot")
    assert rows[0]["session_id"] == "r2"  # bm25: the densest match first
    html = rows[0]["match"]["snippet_html"]
    assert "<mark>ocelot</mark>" in html and "&lt;script&gt;" in html and "<script>" not in html
    assert len(rows) == 7
    first = srv.get_json("/api/sessions/search?q=ocelot&content=1&limit=3")
    second = srv.get_json("/api/sessions/search?q=ocelot&content=1&limit=3&offset=3")
    last = srv.get_json("/api/sessions/search?q=ocelot&content=1&limit=3&offset=6")
    assert first["next_offset"] == 3 and second["next_offset"] == 6 and last["next_offset"] is None
    pages = [r["session_id"] for page in (first, second, last) for r in page["sessions"]]
    assert sorted(pages) == sorted(ids(rows)) and len(pages) == 7
    assert ids(found(srv, "ocelot", model="m-one")) == {"r1"}
    assert ids(found(srv, "ocelot", project_id="p1")) == {"r2"}
    assert ids(found(srv, "ocelot", after="2025-01-01")) == {"r2"}
    assert ids(found(srv, "ocelot", after="1600000000", before="1750000000", source="webui")) == {"r1"}
    assert ids(found(srv, "ocelot -script")) == ids(rows) - {"r2"}
    assert ids(found(srv, '"ocelot once"')) == {f"r{i + 3}" for i in range(5)}
    assert ids(found(srv, "ocel*")) == ids(rows)


def test_chinese_japanese_and_korean_text_is_found_inside_words(srv):
    write_session(srv.session_dir, "k1", "我们明天去北京大学参观", "好")
    write_session(srv.session_dir, "k2", "東京タワーに行きました", "はい")
    write_session(srv.session_dir, "k3", "서울특별시에 살아요", "네")
    srv.start()
    wait_ready(srv)
    assert ids(found(srv, "北京")) == {"k1"}
    assert ids(found(srv, "北京大学")) == {"k1"}
    assert ids(found(srv, "タワー")) == {"k2"}
    assert ids(found(srv, "서울특별시")) == {"k3"}
    assert "<mark>タワー</mark>" in found(srv, "タワー")[0]["match"]["snippet_html"]


HOSTILE = [
    '"',
    '""""',
    "NEAR(a b, 2)",
    "body:secret",
    "messages_fts MATCH x",
    "a OR b AND NOT c",
    "*",
    "-",
    "-only",
    "^start",
    "(((",
    "x'); DROP TABLE messages; --",
    "\x00\x01",
    "word " * 1200,  # 6 KB, cut to the first 500 characters
    "é" * 600,
]


@pytest.mark.parametrize("q", HOSTILE)
def test_hostile_queries_answer_cleanly(shared_srv, q):
    status, body = shared_srv.json(
        "GET", "/api/sessions/search?" + urllib.parse.urlencode({"q": q, "content": "1"})
    )
    assert status == 200, body
    assert isinstance(body["sessions"], list)


def test_a_10_kb_query_is_refused_with_a_json_error_not_a_crash(shared_srv):
    status, body = shared_srv.json(
        "GET", "/api/sessions/search?" + urllib.parse.urlencode({"q": "w" * 10_240})
    )
    assert status in (200, 414) and isinstance(body, dict)
    assert shared_srv.get_json("/health")


@pytest.mark.parametrize(
    "params",
    ["offset=-1", "limit=0", "limit=abc", "offset=99999999999", "after=yesterday", "model=" + "m" * 2000],
)
def test_bad_search_parameters_get_a_clear_json_error(shared_srv, params):
    status, body = shared_srv.json("GET", f"/api/sessions/search?q=x&content=1&{params}")
    assert status == 400 and isinstance(body["error"], str)


@pytest.fixture(scope="module")
def shared_srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("search")
    server = ServerProc(root)
    write_session(server.session_dir, "h1", "a quiet word", "ok")
    server.start()
    wait_ready(server)
    yield server
    server.stop()
    assert "unexpected error" not in server.log_text(), server.log_text()[-4000:]
