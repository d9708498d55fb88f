"""Chat turns end to end: the real server subprocess, the real hermes-agent, a fake LLM on 127.0.0.1.

The fake runs in this process (scripted replies, request log); the server reaches it through the
``config.yaml`` in its own ``HERMES_HOME``. Events are read over real SSE connections.
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import threading
import time

import pytest

from api.rules import render_patches
from api.services.render import plain_text_html
from api.store import models
from api.store import session_store as store
from talaria_testing import hermes_webui
from talaria_testing.chat_client import (
    SSE,
    assert_settled,
    assert_well_formed,
    chat,
    named,
    names,
    new_session,
    on_disk,
    read_all,
    roles_and_text,
    session,
    start,
    text_of,
    tokens_streamed,
)
from talaria_testing.fake_llm import Reply, agent_server
from talaria_testing.faults import fill, small_tmpfs
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

MARKER = "[CONTEXT COMPACTION — REFERENCE ONLY]"
INTERRUPTED_TEXT = "⚠ This answer was interrupted (the server stopped before it finished)."
TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}


# ---------------------------------------------------------------------- fixtures


def _server(root, base_url: str | None, toolsets: str = "none", **config) -> ServerProc:
    return agent_server(
        root, base_url, toolsets=toolsets, env={"TALARIA_CHECKPOINT_INTERVAL": "0.2"}, **config
    )


@pytest.fixture(scope="module")
def srv(llm, tmp_path_factory):
    with _server(tmp_path_factory.mktemp("chat"), llm.base_url) as server:
        yield server


@pytest.fixture(scope="module")
def tool_srv(llm, tmp_path_factory):
    with _server(tmp_path_factory.mktemp("chat_tools"), llm.base_url, toolsets="todo") as server:
        yield server


# ---------------------------------------------------------------------- turns


def test_multi_turn_chat_streams_and_sends_the_first_turn_as_history(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="Hello there, how can I help?"), Reply(text="Paris is the capital."))
    first = chat(srv, sid, "hi")
    assert_well_formed(first)
    assert text_of(first) == "Hello there, how can I help?"
    assert named(first, "title") == [{"title": "hi"}]
    assert "error" not in names(first)
    second = chat(srv, sid, "capital of France?")
    assert_well_formed(second)
    assert text_of(second) == "Paris is the capital."
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert roles_and_text([m for m in sent if m["role"] != "system"]) == [
        ("user", "hi"),
        ("assistant", "Hello there, how can I help?"),
        ("user", "capital of France?"),
    ]
    data = session(srv, sid)
    expected = [
        ("user", "hi"),
        ("assistant", "Hello there, how can I help?"),
        ("user", "capital of France?"),
        ("assistant", "Paris is the capital."),
    ]
    assert roles_and_text(data["messages"]) == expected
    assert_settled(data)
    assert roles_and_text(named(second, "done")[0]["session"]["messages"]) == expected
    assert roles_and_text(on_disk(srv, sid)["messages"]) == expected


def test_a_tool_call_turn_streams_tool_events_and_stores_the_whole_exchange(tool_srv, fake):
    sid = new_session(tool_srv)
    fake.script(
        Reply(text="Let me plan.", tool_calls=[{"id": "call_t1", "name": "todo", "arguments": TODO_ARGS}]),
        Reply(text="Planned one task."),
    )
    events = chat(tool_srv, sid, "plan my day")
    assert_well_formed(events)
    assert named(events, "tool") == [{"id": "call_t1", "name": "todo", "args": TODO_ARGS}]
    (done,) = named(events, "tool_complete")
    assert done["id"] == "call_t1" and done["name"] == "todo" and done["is_error"] is False
    assert "write the tests" in done["result"]
    assert names(events).index("tool") < names(events).index("tool_complete")
    assert text_of(events).endswith("Planned one task.")
    messages = session(tool_srv, sid)["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    call = messages[1]["tool_calls"][0]
    assert call["id"] == "call_t1" and call["function"]["name"] == "todo"
    assert json.loads(call["function"]["arguments"]) == TODO_ARGS
    assert messages[2]["tool_call_id"] == "call_t1" and "write the tests" in messages[2]["content"]
    assert messages[3]["content"] == "Planned one task."


def test_a_branch_from_a_message_that_called_a_tool_keeps_the_call_with_its_result(tool_srv, fake):
    """Branching from the assistant row that called a tool (keep_count = its index + 1, as the page asks)
    copied the call without the tool row answering it: the branch's card said "running…" for ever."""
    sid = new_session(tool_srv)
    fake.script(
        Reply(text="Let me plan.", tool_calls=[{"id": "call_b1", "name": "todo", "arguments": TODO_ARGS}]),
        Reply(text="Planned one task."),
    )
    assert_well_formed(chat(tool_srv, sid, "plan my day"))
    branched = tool_srv.post_json("/api/session/branch", {"session_id": sid, "keep_count": 2})["session"]
    rows = session(tool_srv, branched["session_id"])["messages"]
    assert [m["role"] for m in rows] == ["user", "assistant", "tool"]
    assert rows[1]["tool_calls"][0]["id"] == "call_b1"
    assert rows[2]["tool_call_id"] == "call_b1" and "write the tests" in rows[2]["content"]
    # The next turn of the branch sends the model an answered call.
    fake.script(Reply(text="Branch answer."))
    assert text_of(chat(tool_srv, branched["session_id"], "and then?")).endswith("Branch answer.")
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == ["user", "assistant", "tool", "user"]
    # hermes-webui reads a parent_session_id without session_source "fork" as a compression continuation
    # (and showed the parent's cut-off rows in the branch).
    branch_file = tool_srv.session_dir / f"{branched['session_id']}.json"
    assert not hermes_webui.reads_as_continuation(hermes_webui.load(branch_file))


def test_a_provider_error_arrives_as_an_error_event_and_the_session_stays_usable(srv, fake):
    sid = new_session(srv)
    fake.script(*[Reply(status=500, error="upstream exploded")] * 3)
    events = chat(srv, sid, "hello?")
    assert_well_formed(events)
    (error,) = named(events, "error")
    assert "upstream exploded" in error["message"] and "500" in error["message"]
    assert names(events).index("error") < names(events).index("done")
    data = session(srv, sid)
    assert_settled(data)
    assert data["messages"][0]["content"] == "hello?"
    assert data["messages"][-1].get("_error") and "upstream exploded" in data["messages"][-1]["content"]
    fake.reset()
    fake.script(Reply(text="All good now."))
    again = chat(srv, sid, "try again")
    assert_well_formed(again)
    assert "error" not in names(again) and text_of(again) == "All good now."
    sent = fake.chat_requests()[-1]["body"]["messages"]
    assert not any("upstream exploded" in str(m.get("content")) for m in sent)  # the error row is not context
    after = session(srv, sid)["messages"]
    assert roles_and_text(after[-2:]) == [("user", "try again"), ("assistant", "All good now.")]
    assert [m["content"] for m in after if m["role"] == "user"] == ["hello?", "try again"]


def test_cancel_mid_stream_keeps_the_partial_text_and_frees_the_session(srv, fake):
    sid = new_session(srv)
    fake.script(Reply(text="one two three four five six", hang_after=2))
    stream_id = start(srv, sid, "count")
    seen = []
    with SSE(srv, stream_id) as sse:
        for event in sse:
            seen.append(event)
            if tokens_streamed(seen) == 2:
                assert fake.wait_for_hang()
                srv.post_json("/api/chat/cancel", {"stream_id": stream_id})
    assert_well_formed(seen)
    assert text_of(seen) == "one two "
    assert "cancelled" in names(seen) and "error" not in names(seen)
    assert names(seen).index("cancelled") < names(seen).index("done")
    data = session(srv, sid)
    assert_settled(data)
    assert data["messages"][0]["content"] == "count"
    partial = data["messages"][-1]
    # the agent stores the interrupted text without its trailing space
    assert (
        partial["role"] == "assistant"
        and partial["content"].rstrip() == "one two"
        and partial["_cancelled"] is True
    )
    fake.reset()
    fake.script(Reply(text="Fresh answer."))
    again = chat(srv, sid, "go on")
    assert_well_formed(again)
    assert text_of(again) == "Fresh answer." and "cancelled" not in names(again)
    assert roles_and_text(session(srv, sid)["messages"][-2:]) == [
        ("user", "go on"),
        ("assistant", "Fresh answer."),
    ]


def test_sse_reconnect_with_last_event_id_receives_exactly_the_missed_events(srv, fake):
    sid = new_session(srv)
    text = "the quick brown fox jumps over the lazy dog and runs far away"
    fake.script(Reply(text=text, token_delay=0.05))
    stream_id = start(srv, sid, "tell me a story")
    first = []
    with SSE(srv, stream_id) as sse:
        for event in sse:
            first.append(event)
            if len(first) == 3:
                break  # drop the connection mid-turn
    assert [i for i, _, _ in first] == [1, 2, 3]
    resumed = read_all(srv, stream_id, last_event_id=3)
    assert resumed and resumed[0][0] == 4
    replay = read_all(srv, stream_id)  # the whole journal, from the start
    assert_well_formed(replay)
    assert first == replay[:3] and resumed == replay[3:]
    assert text_of(replay) == text
    late = read_all(srv, stream_id, last_event_id=len(replay) - 1)
    assert late == replay[-1:]
    assert read_all(srv, stream_id, last_event_id=len(replay)) == []
    assert roles_and_text(session(srv, sid)["messages"]) == [("user", "tell me a story"), ("assistant", text)]


def _page_of(events) -> list[str]:
    """Each text segment's HTML as a page that applied the ``render`` patches among ``events`` shows it."""
    states: dict[int, render_patches.SegmentState] = {}
    for _, name, data in events:
        if name == "render":
            render_patches.apply(states.setdefault(data["segment"], render_patches.SegmentState()), data)
    return [
        plain_text_html("".join(state.plain)) if state.plain is not None else "".join(state.blocks)
        for _, state in sorted(states.items())
    ]


def _long_markdown(parts: int) -> str:
    return "\n\n".join(
        f"## Part {i}\n\nStep {i} uses `code`, **bold** and a line\nbreak.\n\n- one\n- two\n\n"
        f"```python\nx = {i}\n```"
        for i in range(parts)
    )


def test_a_long_answer_streams_as_patches_and_every_reader_ends_with_the_saved_render(srv, fake):
    """A long answer's render events each carried the whole answer so far, and the journal kept them all:
    every reader downloaded (and the server held) hundreds of copies. Readers from the start, resuming
    mid-turn with Last-Event-ID, and joining after the end must still show the same final page."""
    sid = new_session(srv)
    text = _long_markdown(1500)  # about 140 KB: past the journal's folding threshold several times
    fake.script(Reply(text=text))
    stream_id = start(srv, sid, "a long answer please")
    early: list = []
    with SSE(srv, stream_id) as sse:
        for event in sse:
            early.append(event)
            if len(early) == 3000:
                break  # drop the connection mid-turn
    resumed = read_all(srv, stream_id, last_event_id=early[-1][0])
    live = early + resumed
    late = read_all(srv, stream_id)
    for events in (live, late):  # numbers increase; folded patches leave gaps
        assert [i for i, _, _ in events] == sorted({i for i, _, _ in events}) and names(events)[-1] == "done"
    saved = [m for m in named(late, "done")[0]["session"]["messages"] if m["role"] == "assistant"][-1]
    assert saved["content"] == text and roles_and_text(session(srv, sid)["messages"])[-1] == (
        "assistant",
        text,
    )
    assert _page_of(live) == _page_of(late) == [saved["html"]]
    assert text_of(live) == text_of(late) == text
    carried = sum(render_patches.size(d) for _, n, d in live if n == "render")
    kept = sum(render_patches.size(d) for _, n, d in late if n == "render")
    assert carried < 3 * len(saved["html"])
    assert kept < 2 * len(saved["html"]) + 130_000


def test_a_server_killed_mid_turn_restarts_with_the_checkpoint_and_an_interrupted_marker(fake, tmp_path):
    srv = _server(tmp_path, fake.base_url).start()
    try:
        sid = new_session(srv)
        fake.script(Reply(text="Earlier answer."), Reply(text="alpha beta gamma delta epsilon", hang_after=3))
        chat(srv, sid, "first question")
        stream_id = start(srv, sid, "second question")
        with SSE(srv, stream_id) as sse:
            seen = []
            for event in sse:
                seen.append(event)
                if tokens_streamed(seen) == 3:
                    break
        assert text_of(seen) == "alpha beta gamma "
        deadline = time.monotonic() + 10
        while not any(
            m.get("_partial") and m["content"] == "alpha beta gamma " for m in on_disk(srv, sid)["messages"]
        ):
            assert time.monotonic() < deadline, "no checkpoint reached the disk"
            time.sleep(0.05)
        srv.kill()
        fake.release()
        srv.start()
        assert sid in srv.get_json("/api/recovery/startup")["interrupted_turns"]
        data = session(srv, sid)
        assert_settled(data, partial_ok=True)  # the checkpoint stays marked partial, before the marker
        rows = data["messages"]
        assert roles_and_text(rows[:4]) == [
            ("user", "first question"),
            ("assistant", "Earlier answer."),
            ("user", "second question"),
            ("assistant", "alpha beta gamma "),
        ]
        assert rows[3]["_partial"] is True and not rows[3].get("_error")
        assert (
            len(rows) == 5
            and rows[4]["_error"]
            and rows[4]["_interrupted"]
            and "interrupted" in rows[4]["content"]
        )
        fake.reset()
        fake.script(Reply(text="Back again."))
        again = chat(srv, sid, "are you there?")
        assert_well_formed(again)
        assert "error" not in names(again) and text_of(again) == "Back again."
        after = session(srv, sid)["messages"]
        assert after[:5] == rows
        assert roles_and_text(after[5:]) == [("user", "are you there?"), ("assistant", "Back again.")]
        sent = [m for m in fake.chat_requests()[-1]["body"]["messages"] if m["role"] != "system"]
        assert [m["content"] for m in sent if m["role"] == "user"] == [
            "first question",
            "second question",
            "are you there?",
        ]
    finally:
        srv.stop()


def test_a_graceful_stop_mid_turn_saves_the_partial_answer_as_interrupted_not_cancelled(fake, tmp_path):
    srv = _server(tmp_path, fake.base_url).start()
    try:
        sid = new_session(srv)
        fake.script(Reply(text="alpha beta gamma delta", hang_after=2))
        stream_id = start(srv, sid, "question")
        seen, stopper = [], threading.Thread(target=srv.stop)
        with SSE(srv, stream_id) as sse:
            for event in sse:
                seen.append(event)
                if tokens_streamed(seen) == 2 and not stopper.is_alive():
                    assert fake.wait_for_hang()
                    stopper.start()  # SIGTERM while the answer is still streaming
        stopper.join(30)
        assert srv.proc.returncode == 0, srv.log_text()[-4000:]
        assert_well_formed(seen)
        assert "cancelled" not in names(seen)
        assert [e["message"] for e in named(seen, "error")] == [INTERRUPTED_TEXT]
        fake.release()
        srv.start()
        assert sid not in srv.get_json("/api/recovery/startup")["interrupted_turns"]  # settled before exit
        data = session(srv, sid)
        assert_settled(data, partial_ok=True)
        rows = data["messages"]
        assert roles_and_text(rows[:2]) == [("user", "question"), ("assistant", "alpha beta")]
        assert rows[1]["_partial"] is True and not rows[1].get("_cancelled")
        assert len(rows) == 3 and rows[2]["_error"] and rows[2]["_interrupted"]
        fake.reset()
        fake.script(Reply(text="Back."))
        assert text_of(chat(srv, sid, "again")) == "Back."
    finally:
        srv.stop()


def _follow(srv: ServerProc, sid: str, streaming: threading.Semaphore) -> None:
    """Start a turn and read its stream to the end; ``streaming`` is released at its first token."""
    told = False
    try:
        with SSE(srv, start(srv, sid, "count"), timeout=30) as sse:
            for _, name, _ in sse:
                if name == "token" and not told:
                    told = True
                    streaming.release()
    finally:
        if not told:
            streaming.release()


def _poll(srv: ServerProc, sid: str, done: threading.Event) -> None:
    while not done.is_set():
        with contextlib.suppress(OSError, http.client.HTTPException):
            srv.request("GET", "/api/sessions")
            srv.request("GET", f"/api/session?session_id={sid}")


def _stop_under_load(srv: ServerProc, pause: float) -> tuple[int | None, list[str]]:
    """Three streaming turns and two pollers; SIGTERM ``pause`` s after every turn streams."""
    sids = [new_session(srv) for _ in range(3)]
    streaming, done = threading.Semaphore(0), threading.Event()
    threads = [threading.Thread(target=_follow, args=(srv, sid, streaming)) for sid in sids]
    threads += [threading.Thread(target=_poll, args=(srv, sids[0], done)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in sids:
        assert streaming.acquire(timeout=30)
    time.sleep(pause)
    code = srv.stop()
    done.set()
    for thread in threads:
        thread.join(30)
    return code, sids


def test_graceful_stops_under_load_with_streaming_turns_exit_cleanly(fake, tmp_path):
    """One graceful stop under load once ended in SIGABRT. A bounded repeat: each server streams three
    answers and serves the sidebar and a session to pollers when it is told to stop; every stop exits 0,
    with no fault-handler stack in its log, and leaves each turn saved as interrupted.

    Each answer streams for 30 s, as long as the wait for all three to begin: under a loaded machine a
    3-second answer begun first had ended before the third began, so it was saved whole, not interrupted."""
    for attempt in range(3):
        fake.reset()
        words = " ".join(f"w{k}" for k in range(3000))
        fake.script(*[Reply(text=words, token_delay=0.01) for _ in range(3)])
        srv = _server(tmp_path / f"stop{attempt}", fake.base_url).start()
        try:
            code, sids = _stop_under_load(srv, 0.3 * attempt)
            assert code == 0, srv.log_text()[-6000:]
            assert "Fatal Python error" not in srv.log_text()
            for sid in sids:
                rows = json.loads((srv.session_dir / f"{sid}.json").read_text(encoding="utf-8"))["messages"]
                assert rows[-1].get("_interrupted"), rows[-1]
        finally:
            srv.stop()


# ---------------------------------------------------------------------- automatic compression


def _long_history(pairs: int = 25, size: int = 5500) -> list[dict]:
    rows = []
    for i in range(2 * pairs):
        role = "user" if i % 2 == 0 else "assistant"
        head = f"{role} message {i}: "
        body = " ".join(f"w{(i * 131 + k) % 997}" for k in range(size // 5))
        rows.append({"role": role, "content": (head + body)[:size], "timestamp": 1_750_000_000.0 + i * 10})
    return rows


def _write_session(srv: ServerProc, sid: str, messages: list[dict], monkeypatch) -> None:
    """Save a session into the server's state folder through a store of its own before the server starts."""
    srv.session_dir.mkdir(parents=True, exist_ok=True)
    srv.workspace.mkdir(parents=True, exist_ok=True)
    own = store.Store(srv.session_dir, models.Session)
    sess = models.Session(
        session_id=sid,
        title="A long conversation",
        workspace=str(srv.workspace),
        messages=copy.deepcopy(messages),
        context_messages=copy.deepcopy(messages),
    )
    own.create(sess)
    own.close()  # the index is written now, so no deferred flush races the server


def test_an_automatic_compression_inside_a_turn_keeps_every_visible_row(fake, tmp_path, monkeypatch):
    srv = _server(tmp_path, fake.base_url, context_length=65536)
    history = _long_history()
    _write_session(srv, "long_chat", history, monkeypatch)
    before = on_disk(srv, "long_chat")["messages"]
    fake.script_summary(Reply(text="## Goal\nSUMMARY-FROM-THE-FAKE of the long conversation."))
    fake.script(Reply(text="Here is my answer."), Reply(text="Still here."))
    srv.start()
    try:
        events = chat(srv, "long_chat", "one more question")
        assert_well_formed(events)
        assert "error" not in names(events)
        (compressed,) = named(events, "compressed")
        # the anchor is the last row before this turn, whatever the checkpoints did meanwhile
        assert compressed["anchor_idx"] == len(history) - 1 and compressed["summary"].startswith(MARKER)
        assert names(events).index("compressed") < names(events).index("done")
        assert len(fake.summary_requests()) == 1
        sent = fake.chat_requests()[-1]["body"]["messages"]
        assert any(MARKER in str(m.get("content")) for m in sent) and len(sent) < len(history)
        saved = on_disk(srv, "long_chat")
        assert saved["messages"][: len(before)] == before  # every earlier row, unchanged
        assert json.dumps(saved["messages"][: len(before)]) == json.dumps(before)
        assert roles_and_text(saved["messages"][len(before) :]) == [
            ("user", "one more question"),
            ("assistant", "Here is my answer."),
        ]
        (summary_row,) = [m for m in saved["context_messages"] if MARKER in str(m.get("content"))]
        assert "SUMMARY-FROM-THE-FAKE" in summary_row["content"]  # the summary the fake wrote
        assert len(saved["context_messages"]) < len(history)
        assert saved["compression_anchor_visible_idx"] == len(history) - 1
        assert saved["compression_anchor_message_key"]["ts"] == history[-1]["timestamp"]
        assert session(srv, "long_chat")["total_messages"] == len(history) + 2

        srv.stop()
        srv.start()
        reloaded = on_disk(srv, "long_chat")
        assert reloaded["messages"] == saved["messages"]
        assert any(MARKER in str(m.get("content")) for m in reloaded["context_messages"])
        assert len(reloaded["context_messages"]) < len(history)
        again = chat(srv, "long_chat", "and another")
        assert_well_formed(again)
        assert "compressed" not in names(again) and text_of(again) == "Still here."
        sent = fake.chat_requests()[-1]["body"]["messages"]
        assert any(MARKER in str(m.get("content")) for m in sent) and len(sent) < len(history)
        assert len(fake.summary_requests()) == 1
        final = on_disk(srv, "long_chat")["messages"]
        assert final[: len(before)] == before and len(final) == len(history) + 4
    finally:
        srv.stop()


# ---------------------------------------------------------------------- no provider


def test_without_a_provider_a_turn_ends_with_an_error_saying_how_to_configure_one(tmp_path):
    srv = _server(tmp_path, None).start()
    try:
        assert not (srv.hermes_home / "config.yaml").exists()
        sid = new_session(srv)
        events = chat(srv, sid, "hello?")
        assert_well_formed(events)
        (error,) = named(events, "error")
        advice = error["message"] + "\n" + error.get("hint", "")
        assert "config.yaml" in advice and "base_url" in advice
        data = session(srv, sid)
        assert_settled(data)
        assert data["messages"][0]["content"] == "hello?" and data["messages"][-1].get("_error")
    finally:
        srv.stop()


def _feed_rows_of(srv: ServerProc, sid: str, after: int, until, timeout: float = 15.0) -> dict:
    """The first sidebar row of ``sid`` on ``/api/sessions/feed?after=`` for which ``until(row)`` holds."""
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    try:
        conn.request("GET", f"/api/sessions/feed?after={after}", headers={"Accept": "text/event-stream"})
        resp = conn.getresponse()
        while line := resp.readline():
            if line.startswith(b"data:"):
                for row in json.loads(line[5:]).get("upsert", []):
                    if row["session_id"] == sid and until(row):
                        return row
        raise AssertionError("the feed ended without the row")
    finally:
        conn.close()


def test_the_sidebar_row_stops_saying_streaming_when_the_final_save_failed(llm, tmp_path):
    """The state folder on a real tmpfs that fills up while the answer streams: the final save fails, the
    file still names the turn, and the sidebar's live dot stayed on for good (list and feed said
    is_streaming). The row follows the turns of the process: no turn runs, so it is not streaming."""
    with small_tmpfs(tmp_path / "mnt", "8m") as mnt:
        if mnt is None:
            pytest.skip("mounting a tmpfs is not permitted here")
        env = {"HERMES_WEBUI_STATE_DIR": str(mnt), "TALARIA_CHECKPOINT_INTERVAL": "60"}
        with llm.fresh(), agent_server(tmp_path / "srv", llm.base_url, env=env) as srv:
            sid = new_session(srv)
            llm.script(Reply(text="one two three four five", hang_after=2))
            stream_id = start(srv, sid, "count for me")
            with SSE(srv, stream_id) as sse:
                events = iter(sse)
                assert next(name for _, name, _ in events if name == "token")
                listed = srv.get_json("/api/sessions")
                (row,) = [r for r in listed["sessions"] if r["session_id"] == sid]
                assert row["is_streaming"] is True
                filler = fill(mnt)
                try:
                    llm.release()
                    rest = [(name, data) for _, name, data in events]
                finally:
                    filler.unlink()
            assert rest[-1] == ("done", {"session": None})
            assert any(name == "error" and "Saving" in data["message"] for name, data in rest)
            saved = json.loads((mnt / "sessions" / f"{sid}.json").read_text(encoding="utf-8"))
            assert saved["active_stream_id"] == stream_id  # the file still names the turn
            (row,) = [r for r in srv.get_json("/api/sessions")["sessions"] if r["session_id"] == sid]
            assert row["is_streaming"] is False
            settled = _feed_rows_of(srv, sid, listed["feed_seq"], lambda r: not r["is_streaming"])
            assert settled["is_streaming"] is False
