"""Server-Sent Events: ``id:`` lines from the turn journal, heartbeats, resume from ``Last-Event-ID``.

A dropped connection ends only the relay; the turn goes on and a reconnect resumes after the last id.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from api.agent.turn_journal import Turn
from api.rules import jsonio
from api.services.session_feed import ChangeLog
from api.web import http_io

HEARTBEAT_S = 15.0
# Events that arrive within a tick of the last write go out together in the next one: at 100 tokens/s a
# reader wakes and writes 20 times a second rather than 100, and the page still sees a token within a
# tick (the live render itself comes at most every ``api.services.live_render.RENDER_INTERVAL_S``).
STREAM_TICK_S = 0.05


def frame(seq: int, name: str, data: dict[str, Any]) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, name.encode(), jsonio.dumps(data))


def serve_turn_events(
    handler: BaseHTTPRequestHandler,
    turn: Turn,
    last_event_id: int | None,
    heartbeat_s: float = HEARTBEAT_S,
    tick_s: float = STREAM_TICK_S,
) -> None:
    http_io.start_stream(handler)
    seq = max(int(last_event_id or 0), 0)
    try:
        handler.wfile.write(b"retry: 1000\n\n")
        while True:
            events, finished = turn.events_after(seq, heartbeat_s)
            if events:
                handler.wfile.write(b"".join(frame(s, n, d) for s, n, d in events))
                seq = events[-1][0]
            elif finished:
                break
            else:
                handler.wfile.write(b": heartbeat\n\n")
            flush = getattr(handler.wfile, "flush", None)
            if flush:
                flush()
            if finished and not events:
                break
            if events and not finished:
                # Gather what arrives within a tick into one write, but send the end of the turn at once: a
                # server stopping closes the stream soon after its turns end.
                turn.wait_finished(tick_s)
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
        return  # the browser went away; the turn keeps running


# ---------------------------------------------------------------------- the sidebar feed

FEED_POLL_S = 1.0  # how soon a closed tab frees its place in the stream budget


def change_frame(seq: int, name: str, payload: dict[str, Any]) -> bytes:
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (seq, name.encode("ascii"), jsonio.dumps(payload))


def serve_session_changes(
    handler: BaseHTTPRequestHandler, changes: ChangeLog, after: int | None, heartbeat_s: float = HEARTBEAT_S
) -> None:
    """Relay a ``session_feed.ChangeLog`` after ``after`` (None: from now on) until the client leaves
    or the log closes (the server stops); ``event: reset`` when the tab must load the list again."""
    http_io.start_stream(handler)
    seq = changes.seq if after is None else after
    try:
        handler.wfile.write(b"retry: 2000\n\n")
        quiet_since = time.monotonic()
        while not changes.closed and not http_io.client_gone(handler):
            current, delta = changes.since(seq)
            if delta is None:
                handler.wfile.write(change_frame(current, "reset", {}))
            else:
                if delta["upsert"] or delta["remove"]:
                    handler.wfile.write(change_frame(current, "sessions", delta))
                agent = changes.agent_sessions_since(seq)
                if agent is not None:
                    handler.wfile.write(change_frame(current, "agent_sessions", {"agent_sessions": agent}))
            if current != seq or time.monotonic() - quiet_since >= heartbeat_s:
                if current == seq:
                    handler.wfile.write(b": heartbeat\n\n")
                quiet_since = time.monotonic()
            seq = current
            changes.wait(seq, min(FEED_POLL_S, heartbeat_s))
    except OSError:
        return  # the tab went away
