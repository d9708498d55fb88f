"""Ways a chat turn can end, driven against a real server and the fake LLM, with what each must leave behind.

``drive(srv, fake, sid, kind, text, tag)`` scripts the fake for one outcome, runs the turn over HTTP
(cancelling it where the outcome says so) and returns its SSE events. ``expected(kind, text, tag)`` says
which rows that turn leaves in the transcript and which of them reach the model's next request, both in
the projected shape of ``project``: the rows docs/turns.md describes, without the parts a test cannot know
in advance (tool output, error wording).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace

from talaria_testing.chat_client import SSE, on_disk, start, tokens_streamed
from talaria_testing.fake_llm import Reply
from talaria_testing.fake_llm_server import last_user_text
from talaria_testing.server_proc import ServerProc

TODO_ARGS = {"todos": [{"id": "1", "content": "write the tests", "status": "pending"}]}
CANCEL_TOKENS = 2  # a cancel while streaming comes after this many tokens
# The agent closes a turn stopped inside a tool with its own row, "Operation interrupted."
INTERRUPTED_BY_AGENT = "Operation interrupted"

# Outcomes a shared server (todo and terminal tools, default timeouts) can produce.
KINDS = (
    "answer",
    "tool",
    "provider_401",
    "provider_500",
    "tool_then_500",
    "cancel_streaming",
    "cancel_before_output",
    "cancel_in_tool",
    "denied_approval",
)
# What a server needs for every outcome: the terminal tool, and commands the agent flags asking the person.
SERVER_ENV = {"TALARIA_AGENT_TOOLSETS": "todo,terminal", "TALARIA_CHECKPOINT_INTERVAL": "0.1"}
AGENT_CONFIG = {"approvals": {"mode": "manual"}}


@dataclass
class Expected:
    transcript: list[tuple]  # every row the turn leaves in ``messages``
    model: list[tuple]  # the rows of it that the next model request holds


def project(row: dict) -> tuple:
    """A row as a test can predict it: role, text, tool-call ids; error rows only as errors."""
    if row.get("_error"):
        return ("error", bool(row.get("_interrupted")))
    role = row.get("role")
    content = row.get("content")
    text = content.strip() if isinstance(content, str) else json.dumps(content)
    if role == "tool":
        return ("tool", row.get("tool_call_id"))
    if role == "assistant":
        calls = tuple(c.get("id") for c in row.get("tool_calls") or [] if isinstance(c, dict))
        return ("assistant", text, calls)
    return (role, text)


def _user(text: str) -> tuple:
    return ("user", text.strip())


def _assistant(text: str, *calls: str) -> tuple:
    return ("assistant", text.strip(), tuple(calls))


def _words(tag: str) -> list[str]:
    return [f"{tag}-w{i} " for i in range(6)]


def replies(kind: str, text: str, tag: str) -> list[Reply]:
    """What the fake answers for one outcome (``tag`` makes every text and tool-call id unique).

    Each reply answers only this turn's requests: a request an earlier, stopped turn retries late gets
    the fake's default answer instead of taking this turn's script.
    """
    return [replace(r, for_user=text) for r in _replies(kind, tag)]


def turn_request(requests: list[dict], text: str) -> dict:
    """The first model request of the turn whose user message is ``text``."""
    mine = [r for r in requests if last_user_text(r["body"]) == text]
    assert mine, f"the model was never called for {text!r}"
    return mine[0]


def _replies(kind: str, tag: str) -> list[Reply]:
    call = f"call_{tag}"
    if kind == "answer":
        return [Reply(text=f"answer {tag}.", reasoning=f"thinking {tag}")]
    if kind == "tool":
        return [
            Reply(text=f"plan {tag}.", tool_calls=[{"id": call, "name": "todo", "arguments": TODO_ARGS}]),
            Reply(text=f"planned {tag}."),
        ]
    if kind in ("provider_401", "provider_500"):
        status = 401 if kind == "provider_401" else 500
        return [Reply(status=status, error=f"refused {tag}")] * 3
    if kind == "tool_then_500":
        return [
            Reply(text=f"plan {tag}.", tool_calls=[{"id": call, "name": "todo", "arguments": TODO_ARGS}]),
            *[Reply(status=500, error=f"refused {tag}")] * 3,
        ]
    if kind == "cancel_streaming":
        return [Reply(text="".join(_words(tag)), hang_after=CANCEL_TOKENS)]
    if kind == "cancel_before_output":
        return [Reply(text="".join(_words(tag)), hang_after=0)]
    if kind == "cancel_in_tool":
        sleep = {"command": "sleep 30"}
        return [
            Reply(text=f"run {tag}.", tool_calls=[{"id": call, "name": "terminal", "arguments": sleep}]),
            Reply(text=f"slept {tag}."),
        ]
    if kind == "denied_approval":
        remove = {"command": f"rm -rf ./victim-{tag}"}
        return [
            Reply(text=f"remove {tag}.", tool_calls=[{"id": call, "name": "terminal", "arguments": remove}]),
            Reply(text=f"kept {tag}."),
        ]
    raise ValueError(kind)


def expected(kind: str, text: str, tag: str) -> Expected:
    user, call = _user(text), f"call_{tag}"
    if kind == "answer":
        rows = [user, _assistant(f"answer {tag}.")]
        return Expected(rows, rows)
    if kind == "tool":
        rows = [user, _assistant(f"plan {tag}.", call), ("tool", call), _assistant(f"planned {tag}.")]
        return Expected(rows, rows)
    if kind in ("provider_401", "provider_500"):
        return Expected([user, ("error", False)], [])
    if kind == "tool_then_500":
        rows = [user, _assistant(f"plan {tag}.", call), ("tool", call)]
        return Expected([*rows, ("error", False)], rows)
    if kind == "cancel_streaming":
        rows = [user, _assistant("".join(_words(tag)[:CANCEL_TOKENS]))]
        return Expected(rows, rows)
    if kind == "cancel_before_output":
        return Expected([user], [])
    if kind == "cancel_in_tool":
        rows = [user, _assistant(f"run {tag}.", call), ("tool", call), _assistant(INTERRUPTED_BY_AGENT + ".")]
        return Expected(rows, rows)
    if kind == "denied_approval":
        rows = [user, _assistant(f"remove {tag}.", call), ("tool", call), _assistant(f"kept {tag}.")]
        return Expected(rows, rows)
    raise ValueError(kind)


def _cancel(srv: ServerProc, stream_id: str) -> None:
    srv.post_json("/api/chat/cancel", {"stream_id": stream_id})


def drive(srv: ServerProc, fake, sid: str, kind: str, text: str, tag: str) -> list[tuple[int, str, dict]]:
    """Run one turn that ends as ``kind``; returns its events (the stream read to its end)."""
    fake.script(*replies(kind, text, tag))
    stream_id = start(srv, sid, text)
    if kind == "cancel_before_output":
        assert fake.wait_for_hang(30), "the model call never started"
        _cancel(srv, stream_id)
    events: list[tuple[int, str, dict]] = []
    pending_cancel = kind in ("cancel_streaming", "cancel_in_tool", "denied_approval")
    with SSE(srv, stream_id, timeout=60) as sse:
        for event in sse:
            events.append(event)
            if not pending_cancel:
                continue
            if kind == "cancel_streaming" and tokens_streamed(events) == CANCEL_TOKENS:
                assert fake.wait_for_hang(30), "the answer never paused"
            elif kind == "denied_approval" and event[1] == "approval":
                answer = {"session_id": sid, "approval_id": event[2]["approval_id"], "choice": "deny"}
                srv.post_json("/api/approval/respond", answer)
                pending_cancel = False
                continue
            elif not (kind == "cancel_in_tool" and event[1] == "tool"):
                continue
            _cancel(srv, stream_id)
            pending_cancel = False
    return events


def expected_killed(text: str, tag: str, tokens: int) -> Expected:
    """A turn whose server was killed: its checkpoint (if any text had arrived), then the interrupted marker."""
    rows = [_user(text)]
    if tokens:
        rows.append(_assistant("".join(_words(tag)[:tokens])))
    return Expected([*rows, ("error", True)], rows if tokens else [])


def kill_mid_turn(srv: ServerProc, fake, sid: str, text: str, tag: str, tokens: int) -> list[dict]:
    """Start a turn, let ``tokens`` tokens reach the checkpoint on disk, SIGKILL the server, start it again.

    Returns the model requests the turn made before the kill."""
    fake.script(Reply(text="".join(_words(tag)), hang_after=tokens, for_user=text))
    start(srv, sid, text)
    assert fake.wait_for_hang(30), "the model call never started"
    if tokens:
        partial = "".join(_words(tag)[:tokens])
        deadline = time.monotonic() + 30
        while not any(
            m.get("_partial") and (m.get("content") or "").strip() == partial.strip()
            for m in on_disk(srv, sid)["messages"]
        ):
            assert time.monotonic() < deadline, "no checkpoint reached the disk"
            time.sleep(0.02)
    requests = fake.chat_requests()
    srv.kill()
    fake.reset()
    srv.start()
    return requests
