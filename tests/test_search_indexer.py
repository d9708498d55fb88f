"""The search index kept by its background thread: after any sequence of saves, edits, clears,
compressions, deletes and missed updates (a process that died before indexing), it answers exactly what
a scan of the session files answers; damaged, missing or stale indexes are made true again at start."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.rules import jsonio, search_query
from api.server.app import App
from api.services import search_indexer, session_catalogue, session_ops
from api.store import models
from api.store import session_store as store
from api.store.search_index import Filters
from api.store.session_edit import edit
from talaria_testing.transcripts import conversation

VOCAB = ("amber", "birch", "cedar", "delta", "ember", "東京タワー")
SIDS = ("s0", "s1", "s2", "s3")
_WORD = re.compile(r"[^\W_]+")


def scan(session_dir: Path, words: tuple[str, ...]) -> set[str]:
    """Sessions with a message a person reads holding every word: read from the files themselves."""
    found = set()
    for path in session_dir.glob("*.json"):
        if path.name.startswith("_"):
            continue
        data = jsonio.loads(path.read_bytes())
        for msg in data.get("messages") or []:
            if msg.get("role") not in ("user", "assistant"):
                continue
            text = str(msg.get("content") or "").lower()
            tokens = set(_WORD.findall(text))
            if all((w in text) if search_query.has_cjk(w) else (w in tokens) for w in words):
                found.add(path.name[:-5])
                break
    return found


def answered(indexer: search_indexer.Indexer, text: str) -> set[str]:
    assert indexer.index is not None
    return {hit.sid for hit in indexer.index.search(search_query.parse(text), Filters())}


class Folder:
    """An app on a session folder of its own with its own index thread, for one example."""

    def __init__(self, root: Path):
        self.session_dir = root / "sessions"
        self.session_dir.mkdir()
        self.db = root / "search.db"
        self.previous = store.in_use()
        self.app = App(store=store.Store(self.session_dir, models.Session))
        self.indexer = search_indexer.start(self.session_dir, self.db)

    def restart(self) -> None:
        search_indexer.stop()
        self.indexer = search_indexer.start(self.session_dir, self.db)

    def close(self) -> None:
        search_indexer.stop()
        self.app.close()
        store.use(self.previous)


@pytest.fixture
def folder(tmp_path):
    made = Folder(tmp_path)
    yield made
    made.close()


def _save(sid: str, words: list[str]) -> None:
    texts = [f"{w} and {words[(i + 1) % len(words)]}" for i, w in enumerate(words)] or ["plain"]
    if (models.store().session_dir / f"{sid}.json").exists():
        with edit(sid) as session:
            session.messages = session.messages + conversation(*texts, start=2000.0 + len(session.messages))
    else:
        session = models.Session(session_id=sid, title=sid, messages=conversation(*texts, start=1000.0))
        session.save()


def _apply(op: tuple, folder: Folder) -> None:
    kind, sid = op[0], op[1]
    exists = (folder.session_dir / f"{sid}.json").exists()
    if kind == "save":
        _save(sid, op[2])
    elif not exists:
        return
    elif kind == "edit":
        with edit(sid) as session:
            session_ops.truncate_session_at_keep(session, min(op[2], len(session.messages)))
    elif kind == "clear":
        session_ops.clear_session(sid)
    elif kind == "compress":
        # A compression rewrites the model's context only: the transcript (what is searched) stays.
        with edit(sid) as session:
            session.context_messages = [{"role": "user", "content": "summary of everything: zzz"}]
    elif kind == "delete":
        session_catalogue.delete_session(sid)


operation = st.one_of(
    st.tuples(
        st.just("save"), st.sampled_from(SIDS), st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4)
    ),
    st.tuples(st.just("edit"), st.sampled_from(SIDS), st.integers(0, 6)),
    st.tuples(st.sampled_from(("clear", "compress", "delete")), st.sampled_from(SIDS)),
    st.tuples(st.just("crash"), st.sampled_from(SIDS)),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operation, max_size=12))
def test_after_any_saves_edits_clears_compressions_deletes_and_crashes_the_index_answers_as_the_files(
    tmp_path, ops
):
    with tempfile.TemporaryDirectory(dir=tmp_path) as root:
        folder = Folder(Path(root))
        try:
            missed = False
            for op in ops:
                if op[0] == "crash":
                    # The process dies before it indexes what follows: the changes reach the files only.
                    folder.indexer.wait_idle()
                    search_indexer.stop()
                    missed = True
                    continue
                _apply(op, folder)
            if missed:
                folder.restart()
            assert folder.indexer.wait_idle(30)
            for word in VOCAB:
                assert answered(folder.indexer, word) == scan(folder.session_dir, (word,)), word
            assert answered(folder.indexer, "amber cedar") == scan(folder.session_dir, ("amber", "cedar"))
        finally:
            folder.close()


def _files(session_dir: Path, count: int) -> None:
    for i in range(count):
        session = models.Session(
            session_id=f"f{i}",
            title=f"f{i}",
            messages=conversation(f"walrus number{i}", "reply", start=1000.0),
        )
        session.save()


def test_an_index_removed_while_stopped_is_built_again_from_the_files(folder):
    _files(folder.session_dir, 5)
    assert folder.indexer.wait_idle()
    search_indexer.stop()
    folder.db.unlink()
    folder.restart()
    assert folder.indexer.wait_idle()
    assert answered(folder.indexer, "walrus") == {f"f{i}" for i in range(5)}
    assert folder.indexer.status()["state"] == "ready"


def test_an_index_of_garbage_bytes_is_replaced_and_built_again(folder):
    _files(folder.session_dir, 3)
    assert folder.indexer.wait_idle()
    search_indexer.stop()
    for suffix in ("-wal", "-shm"):
        Path(str(folder.db) + suffix).unlink(missing_ok=True)
    folder.db.write_bytes(b"\x00garbage" * 4096)
    folder.restart()
    assert folder.indexer.wait_idle()
    assert answered(folder.indexer, "walrus") == {"f0", "f1", "f2"}


def test_a_file_changed_while_the_index_was_stopped_is_indexed_again_at_start(folder):
    _files(folder.session_dir, 3)
    assert folder.indexer.wait_idle()
    search_indexer.stop()
    path = folder.session_dir / "f1.json"
    data = jsonio.loads(path.read_bytes())
    data["messages"][0]["content"] = "narwhal instead"
    path.write_bytes(jsonio.dumps(data))
    (folder.session_dir / "f2.json").unlink()
    folder.restart()
    assert folder.indexer.wait_idle()
    assert answered(folder.indexer, "walrus") == {"f0"}
    assert answered(folder.indexer, "narwhal") == {"f1"}


def test_a_save_is_indexed_after_it_returns_and_a_delete_drops_its_rows(folder):
    _files(folder.session_dir, 2)
    assert folder.indexer.wait_idle()
    assert answered(folder.indexer, "walrus") == {"f0", "f1"}
    session_catalogue.delete_session("f0")
    assert folder.indexer.wait_idle()
    assert answered(folder.indexer, "walrus") == {"f1"}
    assert folder.indexer.status()["update_ms"]["max"] >= 0


def test_an_index_that_cannot_be_written_never_fails_a_save(folder, monkeypatch):
    assert folder.indexer.wait_idle()
    assert folder.indexer.index is not None

    def broken(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(folder.indexer.index, "apply", broken)
    session = models.Session(session_id="g0", title="g", messages=conversation("otter", "ok", start=1.0))
    assert session.save() is True
    assert folder.indexer.wait_idle()
    assert (folder.session_dir / "g0.json").exists()
