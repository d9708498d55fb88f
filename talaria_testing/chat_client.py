"""A test client for chat turns on a running server: start a turn, read its SSE stream, read the session.

Events come back as ``(id, name, data)`` tuples, the way ``/api/chat/stream`` numbers them.
"""

from __future__ import annotations

import http.client
import json

from talaria_testing.server_proc import ServerProc


class SSE:
    """One connection to ``/api/chat/stream``; iterating yields ``(id, name, data)`` as frames arrive."""

    def __init__(
        self, srv: ServerProc, stream_id: str, last_event_id: int | None = None, timeout: float = 30
    ):
        self.conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        self.conn.request("GET", f"/api/chat/stream?stream_id={stream_id}", headers=headers)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        assert self.resp.getheader("Content-Type", "").startswith("text/event-stream")

    def __iter__(self):
        fields: dict[str, str] = {}
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if not line:
                if "event" in fields:
                    yield int(fields["id"]), fields["event"], json.loads(fields["data"])
                fields = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                fields[key] = value[1:] if value.startswith(" ") else value

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> SSE:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_all(
    srv: ServerProc, stream_id: str, last_event_id: int | None = None
) -> list[tuple[int, str, dict]]:
    with SSE(srv, stream_id, last_event_id) as sse:
        return list(sse)


def start(srv: ServerProc, sid: str, message: str) -> str:
    return srv.post_json("/api/chat/start", {"session_id": sid, "message": message})["stream_id"]


def chat(srv: ServerProc, sid: str, message: str) -> list[tuple[int, str, dict]]:
    return read_all(srv, start(srv, sid, message))


def names(events) -> list[str]:
    return [n for _, n, _ in events]


def named(events, name: str) -> list[dict]:
    return [d for _, n, d in events if n == name]


def text_of(events) -> str:
    return "".join(d["text"] for d in named(events, "token"))


def tokens_streamed(events) -> int:
    """How many of the fake LLM's tokens (each one word) the stream carried: a worker sends the tokens that
    arrive within a few milliseconds as one event, so token events are not counted; the words are (the
    agent may put white space before a segment's first token)."""
    return len(text_of(events).split())


def assert_well_formed(events) -> None:
    """Ids count up from 1 without gaps, and ``done`` comes last, once."""
    assert [i for i, _, _ in events] == list(range(1, len(events) + 1))
    assert names(events).count("done") == 1 and names(events)[-1] == "done"


def new_session(srv: ServerProc) -> str:
    return srv.post_json("/api/session/new", {})["session"]["session_id"]


def session(srv: ServerProc, sid: str) -> dict:
    return srv.get_json(f"/api/session?session_id={sid}")["session"]


def on_disk(srv: ServerProc, sid: str) -> dict:
    return json.loads((srv.session_dir / f"{sid}.json").read_text(encoding="utf-8"))


def roles_and_text(messages: list[dict]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in messages]


def assert_settled(data: dict, partial_ok: bool = False) -> None:
    assert data["active_stream_id"] is None and data["pending_user_message"] is None
    assert not data.get("pending_started_at") and not data.get("is_streaming")
    assert partial_ok or not any(m.get("_partial") for m in data["messages"])
