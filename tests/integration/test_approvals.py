"""Approvals, clarify and the workspace per session: the real server and hermes-agent, a scripted LLM.

The fake LLM asks for the ``terminal`` tool (and ``clarify``, ``write_file``); the agent's own detection flags
``rm -rf <folder>``, and the question reaches the person through SSE and ``/api/approval/*``. The
terminal tool is enabled only on these servers, and every folder it touches is under ``tmp_path``.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import yaml

from talaria_testing.chat_client import SSE, named, names, new_session, on_disk, session, start, text_of
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server, write_hermes_config
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

WAIT_S = 60.0


def _server(root: Path, base_url: str, **env: str) -> ServerProc:
    settings = {"TALARIA_WORKSPACE_ROOTS": str(root), "TALARIA_CHECKPOINT_INTERVAL": "0.2", **env}
    # Manual mode: every flagged command goes to the person (smart mode would first ask the LLM).
    manual = {"approvals": {"mode": "manual"}}
    return agent_server(root, base_url, toolsets="terminal,clarify,file", env=settings, extra=manual)


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with _server(tmp_path_factory.mktemp("approvals"), llm.base_url) as server:
        yield server


@pytest.fixture(scope="module")
def quick_srv(llm, tmp_path_factory):
    """Questions expire after a second here."""
    root = tmp_path_factory.mktemp("approvals_quick")
    env = {"TALARIA_APPROVAL_TIMEOUT": "1", "TALARIA_CLARIFY_TIMEOUT": "1"}
    with _server(root, llm.base_url, **env) as server:
        yield server


@pytest.fixture
def server(llm, tmp_path):
    """A server for one test (it is killed, stopped, or keeps an allow-list the others must not see)."""
    with _server(tmp_path, llm.base_url) as server:
        yield server


def victim_folder(srv: ServerProc, name: str) -> Path:
    folder = srv.root / "victims" / name
    folder.mkdir(parents=True)
    (folder / "keep.txt").write_text("precious")
    return folder


def terminal_call(command: str, call_id: str = "call_1") -> Reply:
    return Reply(tool_calls=[{"id": call_id, "name": "terminal", "arguments": {"command": command}}])


class Stream:
    """A turn's SSE stream read in a background thread; ``wait_for(name)`` polls the events seen."""

    def __init__(self, srv: ServerProc, stream_id: str):
        self.events: list[tuple[int, str, dict]] = []
        self._sse = SSE(srv, stream_id, timeout=WAIT_S * 2)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for event in self._sse:
            self.events.append(event)

    def wait_for(self, name: str, timeout: float = WAIT_S) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = named(self.events, name)
            if found:
                return found[0]
            time.sleep(0.05)
        raise AssertionError(f"no {name} event; saw {names(self.events)}")

    def finish(self, timeout: float = WAIT_S) -> list[tuple[int, str, dict]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the stream did not end; saw {names(self.events)}"
        self._sse.close()
        return self.events


def tool_results(data: dict) -> list[str]:
    return [m.get("content") or "" for m in data["messages"] if m.get("role") == "tool"]


def ask_rm(srv: ServerProc, fake: FakeLLM, folder: Path, sid: str | None = None) -> tuple[str, Stream, dict]:
    sid = sid or new_session(srv)
    fake.script(terminal_call(f"rm -rf {folder}"), Reply(text="All done."))
    stream = Stream(srv, start(srv, sid, "clean up please"))
    return sid, stream, stream.wait_for("approval")


def respond(srv: ServerProc, sid: str, approval_id: str, choice: str) -> tuple[int, dict]:
    body = {"session_id": sid, "approval_id": approval_id, "choice": choice}
    return srv.json("POST", "/api/approval/respond", body)


# ---------------------------------------------------------------------- approvals


@pytest.mark.parametrize("choice", ["once", "session"])
def test_a_flagged_command_runs_only_after_the_person_approves_it(srv, fake, choice):
    folder = victim_folder(srv, f"approve_{choice}")
    sid, stream, asked = ask_rm(srv, fake, folder)
    assert asked["command"] == f"rm -rf {folder}"
    assert asked["pattern_key"] and asked["description"]
    assert folder.exists(), "the command ran before the person answered"
    pending = srv.get_json(f"/api/approval/pending?session_id={sid}")
    assert [p["approval_id"] for p in pending["pending"]] == [asked["approval_id"]]
    assert pending["yolo"] is False
    assert respond(srv, sid, asked["approval_id"], choice) == (
        200,
        {"ok": True, "approval_id": asked["approval_id"], "choice": choice},
    )
    events = stream.finish()
    assert not folder.exists()
    assert named(events, "approval_resolved")[0]["choice"] == choice
    assert srv.get_json(f"/api/approval/pending?session_id={sid}")["pending"] == []
    assert respond(srv, sid, asked["approval_id"], "once")[0] == 409
    # The same kind of command again in this session: "session" remembered it, "once" did not.
    again = victim_folder(srv, f"again_{choice}")
    fake.script(terminal_call(f"rm -rf {again}"), Reply(text="Again done."))
    stream = Stream(srv, start(srv, sid, "and that one"))
    if choice == "once":
        asked = stream.wait_for("approval")
        assert respond(srv, sid, asked["approval_id"], "deny")[0] == 200
    events = stream.finish()
    assert again.exists() == (choice == "once")
    assert ("approval" in names(events)) == (choice == "once")


def test_always_allows_the_kind_of_command_in_every_session_and_keeps_it_in_the_agents_config(server, fake):
    folder = victim_folder(server, "always")
    sid, stream, asked = ask_rm(server, fake, folder)
    assert respond(server, sid, asked["approval_id"], "always")[0] == 200
    stream.finish()
    assert not folder.exists()
    allow_list = yaml.safe_load((server.hermes_home / "config.yaml").read_text())["command_allowlist"]
    assert asked["pattern_key"] in allow_list
    other = victim_folder(server, "always_other")
    fake.script(terminal_call(f"rm -rf {other}"), Reply(text="Done too."))
    events = Stream(server, start(server, new_session(server), "remove it")).finish()
    assert "approval" not in names(events) and not other.exists()


def test_always_is_in_the_agents_config_when_the_answer_returns_even_if_the_server_dies_at_once(server, fake):
    """``always`` answered 200 and the allow-list reached config.yaml ~8 ms later: a SIGKILL right after the
    200 lost it every time. Three rounds, each killing the server the moment the answer arrives."""
    for round_ in range(3):
        write_hermes_config(server.hermes_home, fake.base_url, extra={"approvals": {"mode": "manual"}})
        if round_:
            server.start()
        folder = victim_folder(server, f"always_killed_{round_}")
        sid, stream, asked = ask_rm(server, fake, folder)
        status, _data = respond(server, sid, asked["approval_id"], "always")
        server.kill()
        assert status == 200
        stream.finish()
        saved = yaml.safe_load((server.hermes_home / "config.yaml").read_text())
        assert asked["pattern_key"] in saved.get("command_allowlist", []), f"lost in round {round_}"
        fake.reset()


def test_dont_ask_again_is_off_until_the_person_turns_it_on_for_that_session(srv, fake):
    sid, other_sid = new_session(srv), new_session(srv)
    assert srv.get_json(f"/api/approval/pending?session_id={sid}")["yolo"] is False
    on = srv.post_json("/api/approval/yolo", {"session_id": sid, "enabled": True})
    assert on == {"ok": True, "session_id": sid, "yolo": True}
    folder = victim_folder(srv, "yolo")
    fake.script(terminal_call(f"rm -rf {folder}"), Reply(text="Removed."))
    events = Stream(srv, start(srv, sid, "remove it")).finish()
    assert "approval" not in names(events) and not folder.exists()
    # Another session still asks.
    kept = victim_folder(srv, "yolo_other")
    other, stream, asked = ask_rm(srv, fake, kept, other_sid)
    assert respond(srv, other, asked["approval_id"], "deny")[0] == 200
    stream.finish()
    assert kept.exists()
    srv.post_json("/api/approval/yolo", {"session_id": sid, "enabled": False})
    assert srv.get_json(f"/api/approval/pending?session_id={sid}")["yolo"] is False


def test_deny_leaves_the_folder_untouched_and_the_transcript_says_so(srv, fake):
    folder = victim_folder(srv, "deny")
    sid, stream, asked = ask_rm(srv, fake, folder)
    assert respond(srv, sid, asked["approval_id"], "deny")[0] == 200
    stream.finish()
    assert (folder / "keep.txt").read_text() == "precious"
    assert any("BLOCKED" in text and "denied" in text for text in tool_results(session(srv, sid)))


def hidden_rm(folder: Path) -> str:
    """A deletion inside a command substitution that the agent's redaction shows as ``GITHUB_TOKEN=***``."""
    return f"export GITHUB_TOKEN=$(rm${{IFS}}-rf${{IFS}}{folder})"


@pytest.mark.parametrize("choice", ["deny", "once"])
def test_the_card_shows_the_command_that_runs_not_the_agents_redacted_copy(srv, fake, choice):
    """The event and card showed ``export GITHUB_TOKEN=***`` ("delete in root path") and "Allow once"
    deleted the folder: a person must approve exactly what will execute."""
    folder = victim_folder(srv, f"hidden_{choice}")
    sid = new_session(srv)
    fake.script(terminal_call(hidden_rm(folder)), Reply(text="Set."))
    stream = Stream(srv, start(srv, sid, "set the token"))
    asked = stream.wait_for("approval")
    assert asked["command"] == hidden_rm(folder) and asked["masked"] is False
    pending = srv.get_json(f"/api/approval/pending?session_id={sid}")["pending"]
    assert [p["command"] for p in pending] == [hidden_rm(folder)]
    assert on_disk(srv, sid)["pending_question"]["command"] == hidden_rm(folder)
    assert folder.exists(), "the command ran before the person answered"
    assert respond(srv, sid, asked["approval_id"], choice)[0] == 200
    stream.finish()
    assert folder.exists() == (choice == "deny")


def test_a_literal_secret_in_a_flagged_command_is_masked_and_the_rest_shown_as_it_runs(srv, fake):
    folder = victim_folder(srv, "literal_secret")
    secret = "ghp_" + "Zq7Kp2Lm9X" * 4
    command = f"export GITHUB_TOKEN={secret} && rm -rf {folder}"
    sid = new_session(srv)
    fake.script(terminal_call(command), Reply(text="Done."))
    stream = Stream(srv, start(srv, sid, "clean with the token"))
    asked = stream.wait_for("approval")
    assert asked["command"] == f"export GITHUB_TOKEN=*** && rm -rf {folder}" and asked["masked"] is True
    assert secret not in json.dumps(on_disk(srv, sid)["pending_question"])
    assert respond(srv, sid, asked["approval_id"], "deny")[0] == 200
    stream.finish()
    assert folder.exists()


def test_a_harmless_command_runs_without_asking(srv, fake):
    sid = new_session(srv)
    fake.script(terminal_call("echo harmless-output"), Reply(text="Printed."))
    stream = Stream(srv, start(srv, sid, "print something"))
    events = stream.finish()
    assert "approval" not in names(events)
    assert any("harmless-output" in text for text in tool_results(session(srv, sid)))


def test_no_answer_within_the_timeout_is_a_deny_the_transcript_names(quick_srv, fake):
    folder = victim_folder(quick_srv, "timeout")
    sid, stream, asked = ask_rm(quick_srv, fake, folder)
    events = stream.finish()
    assert named(events, "approval_resolved")[0]["outcome"] == "timeout"
    assert folder.exists()
    assert any("nobody answered within 1 s" in text for text in tool_results(session(quick_srv, sid)))
    assert respond(quick_srv, sid, asked["approval_id"], "once")[0] == 409


def test_cancelling_the_turn_while_it_waits_denies_the_command(srv, fake):
    folder = victim_folder(srv, "cancel")
    sid, stream, asked = ask_rm(srv, fake, folder)
    srv.post_json("/api/chat/cancel", {"session_id": sid})
    events = stream.finish()
    assert named(events, "approval_resolved")[0]["outcome"] == "cancelled"
    assert folder.exists()
    assert respond(srv, sid, asked["approval_id"], "once")[0] == 409
    fake.reset()  # the cancelled turn never asked for its scripted follow-up
    fake.script(Reply(text="Still here."))
    after = Stream(srv, start(srv, sid, "are you there?")).finish()
    assert text_of(after).strip() == "Still here."
    assert folder.exists()


def test_two_sessions_waiting_at_once_get_their_own_answers(srv, fake):
    keep = victim_folder(srv, "two_keep")
    drop = victim_folder(srv, "two_drop")
    fake.script(terminal_call(f"rm -rf {keep}"), terminal_call(f"rm -rf {drop}"))
    sid_keep, sid_drop = new_session(srv), new_session(srv)
    stream_keep = Stream(srv, start(srv, sid_keep, "remove one"))
    asked_keep = stream_keep.wait_for("approval")
    stream_drop = Stream(srv, start(srv, sid_drop, "remove the other"))
    asked_drop = stream_drop.wait_for("approval")
    assert asked_keep["command"].endswith(str(keep)) and asked_drop["command"].endswith(str(drop))
    # Each session sees only its own question, and an answer through the other session is refused.
    assert respond(srv, sid_keep, asked_drop["approval_id"], "once")[0] == 404
    keep_pending = srv.get_json(f"/api/approval/pending?session_id={sid_keep}")["pending"]
    assert [p["approval_id"] for p in keep_pending] == [asked_keep["approval_id"]]
    assert respond(srv, sid_drop, asked_drop["approval_id"], "once")[0] == 200
    assert respond(srv, sid_keep, asked_keep["approval_id"], "deny")[0] == 200
    stream_keep.finish()
    stream_drop.finish()
    assert keep.exists() and not drop.exists()


def test_a_server_killed_while_a_command_waits_restarts_with_nothing_run_and_says_so(server, fake):
    folder = victim_folder(server, "killed")
    sid, stream, asked = ask_rm(server, fake, folder)
    server.kill()
    stream.finish()
    server.start()
    assert folder.exists()
    data = session(server, sid)
    notes = [m["content"] for m in data["messages"] if m.get("_question")]
    assert len(notes) == 1 and str(folder) in notes[0] and "did not run" in notes[0]
    assert data["active_stream_id"] is None
    assert respond(server, sid, asked["approval_id"], "once")[0] == 404


def test_a_server_stopped_while_a_command_waits_denies_it_and_says_so(server, fake):
    folder = victim_folder(server, "stopped")
    sid, stream, _asked = ask_rm(server, fake, folder)
    server.stop()
    events = stream.finish()
    assert named(events, "approval_resolved")[0]["outcome"] == "stopped"
    server.start()
    assert folder.exists()
    texts = tool_results(session(server, sid))
    assert any("the server stopped while the command waited for approval" in text for text in texts)


# ---------------------------------------------------------------------- clarify


def clarify_call(question: str, choices: list[str] | None = None) -> Reply:
    args = {"question": question, **({"choices": choices} if choices else {})}
    return Reply(tool_calls=[{"id": "call_q", "name": "clarify", "arguments": args}])


def test_a_clarify_question_reaches_the_person_and_the_answer_reaches_the_agent(srv, fake):
    sid = new_session(srv)
    fake.script(clarify_call("Which colour?", ["red", "blue"]), Reply(text="Blue it is."))
    stream = Stream(srv, start(srv, sid, "paint it"))
    asked = stream.wait_for("clarify")
    assert asked["question"] == "Which colour?" and asked["choices"] == ["red", "blue"]
    assert (
        srv.get_json(f"/api/clarify/pending?session_id={sid}")["pending"][0]["clarify_id"]
        == asked["clarify_id"]
    )
    body = {"session_id": sid, "clarify_id": asked["clarify_id"], "response": "blue"}
    assert srv.json("POST", "/api/clarify/respond", body)[0] == 200
    stream.finish()
    assert srv.json("POST", "/api/clarify/respond", body)[0] == 409
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert json.loads(sent[-1]["content"])["user_response"] == "blue"


def test_an_unanswered_clarify_question_tells_the_agent_there_was_no_answer(quick_srv, fake):
    sid = new_session(quick_srv)
    fake.script(clarify_call("Anything else?"), Reply(text="Going on without it."))
    stream = Stream(quick_srv, start(quick_srv, sid, "ask me"))
    stream.wait_for("clarify")
    events = stream.finish()
    assert named(events, "clarify_resolved")[0]["outcome"] == "timeout"
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert "did not answer" in json.loads(sent[-1]["content"])["user_response"]


# ---------------------------------------------------------------------- workspace


def test_two_sessions_streaming_at_once_each_run_in_their_own_workspace(srv, fake):
    first, second = srv.root / "ws_one", srv.root / "ws_two"
    first.mkdir()
    second.mkdir()
    sids = []
    for folder in (first, second):
        sid = new_session(srv)
        row = srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": str(folder)})
        assert row["session"]["workspace"] == str(folder)
        sids.append(sid)
    # Both turns ask for `pwd` before either gets its answer: the tool calls overlap in time.
    fake.script(
        Reply(tool_calls=[{"id": "p1", "name": "terminal", "arguments": {"command": "pwd"}}], delay=0.5),
        Reply(tool_calls=[{"id": "p2", "name": "terminal", "arguments": {"command": "pwd"}}], delay=0.5),
        Reply(text="ok"),
        Reply(text="ok"),
    )
    streams = [Stream(srv, start(srv, sid, "where am I?")) for sid in sids]
    for stream in streams:
        stream.finish()
    for sid, folder in zip(sids, (first, second), strict=True):
        outputs = [json.loads(text).get("output", "") for text in tool_results(session(srv, sid))]
        assert outputs == [str(folder)]


def test_a_relative_file_the_agent_writes_lands_in_the_sessions_workspace(srv, fake):
    folder = srv.root / "ws_files"
    folder.mkdir()
    sid = new_session(srv)
    srv.post_json("/api/session/workspace", {"session_id": sid, "workspace": str(folder)})
    write = {"id": "w1", "name": "write_file", "arguments": {"path": "note.txt", "content": "hello"}}
    fake.script(Reply(tool_calls=[write]), Reply(text="Written."))
    Stream(srv, start(srv, sid, "write a note")).finish()
    assert (folder / "note.txt").read_text() == "hello"
    assert not (srv.workspace / "note.txt").exists()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("relative/folder", "absolute"),
        ("/no/such/folder/anywhere", "does not exist"),
        ("/etc", "outside"),
    ],
)
def test_a_refused_workspace_names_the_reason_and_changes_nothing(srv, path, reason):
    sid = new_session(srv)
    before = session(srv, sid)["workspace"]
    status, data = srv.json("POST", "/api/session/workspace", {"session_id": sid, "workspace": path})
    assert status == 400 and reason in data["error"]
    assert session(srv, sid)["workspace"] == before


def test_a_file_or_a_link_out_of_the_roots_is_refused(srv):
    sid = new_session(srv)
    afile = srv.root / "a_file.txt"
    afile.write_text("x")
    link = srv.root / "escape"
    link.symlink_to("/etc")
    for path, reason in ((afile, "not a folder"), (link, "outside")):
        status, data = srv.json("POST", "/api/session/workspace", {"session_id": sid, "workspace": str(path)})
        assert status == 400 and reason in data["error"]


# ---------------------------------------------------------------------- bad input


def _bad_requests(sid: str) -> list[tuple[str, str, object, int]]:
    missing = "0123456789ab"
    return [
        ("POST", "/api/approval/respond", {"session_id": sid, "approval_id": "nope", "choice": "once"}, 404),
        ("POST", "/api/approval/respond", {"session_id": sid, "approval_id": "nope", "choice": "maybe"}, 400),
        ("POST", "/api/approval/respond", {"session_id": sid, "approval_id": 5, "choice": "once"}, 400),
        (
            "POST",
            "/api/approval/respond",
            {"session_id": "../etc", "approval_id": "x", "choice": "once"},
            400,
        ),
        ("POST", "/api/approval/respond", {"session_id": sid, "approval_id": "x", "choice": ["once"]}, 400),
        ("GET", f"/api/approval/pending?session_id={missing}", None, 404),
        ("GET", "/api/approval/pending?session_id=%2E%2E%2Fx", None, 400),
        ("GET", "/api/approval/pending", None, 400),
        ("POST", "/api/approval/yolo", {"session_id": sid, "enabled": "yes"}, 400),
        ("POST", "/api/approval/yolo", {"session_id": missing, "enabled": True}, 404),
        ("POST", "/api/clarify/respond", {"session_id": sid, "clarify_id": "nope", "response": "hi"}, 404),
        ("POST", "/api/clarify/respond", {"session_id": sid, "clarify_id": "nope", "response": ""}, 400),
        (
            "POST",
            "/api/clarify/respond",
            {"session_id": sid, "clarify_id": "nope", "response": {"a": 1}},
            400,
        ),
        (
            "POST",
            "/api/clarify/respond",
            {"session_id": sid, "clarify_id": "x", "response": "y" * 20001},
            400,
        ),
        ("GET", f"/api/clarify/pending?session_id={missing}", None, 404),
        ("POST", "/api/session/workspace", {"session_id": sid, "workspace": 7}, 400),
        ("POST", "/api/session/workspace", {"session_id": sid, "workspace": "/tmp\x00/x"}, 400),
        ("POST", "/api/session/workspace", {"session_id": sid, "workspace": "~/" + "a/" * 3000}, 400),
        ("POST", "/api/session/workspace", {"session_id": missing, "workspace": "/"}, 400),
        ("POST", "/api/session/new", {"workspace": "/etc"}, 400),
        ("POST", "/api/approval/respond", "[1, 2]", 400),
        ("POST", "/api/clarify/respond", '{"session_id": ', 400),
    ]


def test_bad_input_to_the_new_routes_gets_a_clear_json_error_and_changes_nothing(srv):
    sid = new_session(srv)
    before = session(srv, sid)
    for method, path, body, status in _bad_requests(sid):
        headers = {"Content-Type": "application/json"} if isinstance(body, str) else None
        got, data = srv.json(method, path, body, headers)
        assert got == status and isinstance(data.get("error"), str), (method, path, body, got, data)
    after = session(srv, sid)
    assert (after["workspace"], after["messages"]) == (before["workspace"], before["messages"])
    assert srv.get_json(f"/api/approval/pending?session_id={sid}") == {"pending": [], "yolo": False}
