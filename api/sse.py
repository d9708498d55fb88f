"""Server-Sent Events: ``id:`` lines from the turn journal, heartbeats, resume from ``Last-Event-ID``.

A dropped connection ends only the relay; the turn goes on and a reconnect resumes after the last id.
"""

from __future__ import annotations

import json

from api import http_io

HEARTBEAT_S = 15.0


def frame(seq: int, name: str, data: dict) -> bytes:
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"id: {seq}\nevent: {name}\ndata: {payload}\n\n".encode()


def serve_turn_events(handler, turn, last_event_id: int | None, heartbeat_s: float = HEARTBEAT_S) -> None:
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
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
        return  # the browser went away; the turn keeps running
