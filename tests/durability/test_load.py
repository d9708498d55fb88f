"""Load (full run only): 50 clients list and read sessions on loopback while 4 chat turns stream, 60 s.

The real server (``talaria_testing.server_proc``) drives the real hermes-agent against the fake LLM on
127.0.0.1, whose replies stream slowly. Figures: requests, errors, p50/p99 per endpoint. Afterwards every
session file parses and every finished turn is stored.
"""

from __future__ import annotations

import http.client
import json
import random
import statistics
import threading
import time

import pytest

from talaria_testing import promises
from talaria_testing.scenarios import bound, messages

SECTION = "load"
CLIENTS = 50
STREAMERS = 4
SESSIONS = 200


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _client(host, port, sids, stop, lat, errors, seed):
    rng = random.Random(seed)
    conn = http.client.HTTPConnection(host, port, timeout=30)
    while not stop.is_set():
        if rng.random() < 0.4:
            kind, path = "list", "/api/sessions"
        else:
            kind, path = "read", f"/api/session?session_id={rng.choice(sids)}&msg_limit=50"
        t0 = time.perf_counter()
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
            ok = resp.status == 200 and body[:1] == b"{"
        except (OSError, http.client.HTTPException) as exc:
            ok, body = False, str(exc).encode()
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
        lat[kind].append(time.perf_counter() - t0)
        if not ok:
            errors.append(f"{path}: {body[:120]!r}")
    conn.close()


def _streamer(srv, sid, stop, turns, errors):
    while not stop.is_set():
        try:
            stream_id = srv.post_json(
                "/api/chat/start", {"session_id": sid, "message": f"turn {len(turns)} please"}
            )["stream_id"]
            conn = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
            conn.request(
                "GET", f"/api/chat/stream?stream_id={stream_id}", headers={"Accept": "text/event-stream"}
            )
            resp = conn.getresponse()
            events = [
                line
                for line in resp.read().decode("utf-8", "replace").splitlines()
                if line.startswith("event:")
            ]
            conn.close()
            turns.append((sid, events[-1] if events else None))
            if not events or events[-1] != "event: done":
                errors.append(f"turn on {sid} ended with {events[-1:] or 'nothing'}")
        except Exception as exc:  # noqa: BLE001 - every failure is counted
            errors.append(f"turn on {sid}: {type(exc).__name__}: {exc}")
            time.sleep(0.2)


def test_fifty_clients_read_while_four_turns_stream(durability, counters, tmp_path):
    if not durability.load_seconds:
        pytest.skip("the load test runs in the full durability run only (--durability-full)")
    from talaria_testing.fake_llm import FakeLLM, Reply, write_hermes_config
    from talaria_testing.server_proc import ServerProc

    srv = ServerProc(
        tmp_path / "load", env={"TALARIA_AGENT_TOOLSETS": "none", "TALARIA_CHECKPOINT_INTERVAL": "1.0"}
    )
    with bound(srv.state_dir):
        from api.store import models

        sids = []
        for k in range(SESSIONS):
            s = models.Session(
                session_id=f"load{k:03d}",
                title=f"Load {k}",
                model="fake-model",
                messages=messages(20 + k % 40),
            )
            s.save()
            sids.append(s.session_id)
    with FakeLLM() as llm:
        words = " ".join(f"word{i}" for i in range(120))
        llm.script(*[Reply(text=words, token_delay=0.01) for _ in range(2000)])
        write_hermes_config(srv.hermes_home, llm.base_url)
        srv.start()
        try:
            stop = threading.Event()
            lat: dict[str, list[float]] = {"list": [], "read": []}
            errors: list[str] = []
            turns: list = []
            stream_sids = [
                srv.post_json("/api/session/new", {})["session"]["session_id"] for _ in range(STREAMERS)
            ]
            threads = [
                threading.Thread(target=_streamer, args=(srv, sid, stop, turns, errors))
                for sid in stream_sids
            ]
            threads += [
                threading.Thread(target=_client, args=(srv.host, srv.port, sids, stop, lat, errors, k))
                for k in range(CLIENTS)
            ]
            started = time.monotonic()
            for t in threads:
                t.start()
            time.sleep(durability.load_seconds)
            stop.set()
            for t in threads:
                t.join(90)
            elapsed = time.monotonic() - started
        finally:
            srv.stop()
    all_lat = lat["list"] + lat["read"]
    figures = {
        "seconds": round(elapsed, 1),
        "clients": CLIENTS,
        "streaming_turns": STREAMERS,
        "requests": len(all_lat),
        "requests_per_second": round(len(all_lat) / elapsed, 1),
        "turns_completed": sum(1 for _, last in turns if last == "event: done"),
        "errors": len(errors),
        "p50_ms": round(1000 * statistics.median(all_lat), 2) if all_lat else None,
        "p99_ms": round(1000 * _percentile(all_lat, 0.99), 2),
        "list_p50_ms": round(1000 * _percentile(lat["list"], 0.5), 2),
        "list_p99_ms": round(1000 * _percentile(lat["list"], 0.99), 2),
        "read_p50_ms": round(1000 * _percentile(lat["read"], 0.5), 2),
        "read_p99_ms": round(1000 * _percentile(lat["read"], 0.99), 2),
    }
    for key, value in figures.items():
        counters.set(SECTION, key, value)
    for e in errors[:20]:
        counters.violation(SECTION, "load", e)
    unreadable = [
        p.name
        for p in srv.session_dir.glob("*.json")
        if not isinstance(promises.parse(p.read_bytes()), (dict, list))
    ]
    for sid in stream_sids:
        doc = json.loads((srv.session_dir / f"{sid}.json").read_text(encoding="utf-8"))
        assert not doc.get("active_stream_id"), f"{sid} still streaming after a graceful stop"
    assert not unreadable, unreadable
    assert figures["turns_completed"] >= STREAMERS, figures
    assert not errors, errors[:10]
