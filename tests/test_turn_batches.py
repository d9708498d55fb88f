"""A worker's turn events on their way to the server (``api.agent.turn_batches``), with real threads and a
recording send: tokens go in fewer frames, each turn's frames keep the agent's order, nothing is held back."""

from __future__ import annotations

import threading
import time
from typing import Any

from api.agent.turn_batches import Batches


class Pipe:
    """The send side of a channel: records every frame, optionally slow (a server that reads behind)."""

    def __init__(self, delay: float = 0.0) -> None:
        self.frames: list[dict[str, Any]] = []
        self.delay = delay
        self._lock = threading.Lock()
        self.arrived = threading.Condition(self._lock)

    def send(self, frame: dict[str, Any]) -> bool:
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.frames.append(frame)
            self.arrived.notify_all()
        return True

    def events(self, turn_id: str) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return [(f["name"], f["data"]) for f in self.frames if f["id"] == turn_id]

    def text(self, turn_id: str, name: str = "token") -> str:
        return "".join(d["text"] for n, d in self.events(turn_id) if n == name)

    def wait_text(self, turn_id: str, text: str, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                got = "".join(
                    f["data"]["text"] for f in self.frames if f["id"] == turn_id and f["name"] == "token"
                )
                if got == text or time.monotonic() > deadline:
                    return got == text
                self.arrived.wait(0.05)


def test_many_turns_from_many_threads_arrive_whole_in_order_in_fewer_frames():
    pipe = Pipe(delay=0.0005)  # the server reads a frame at a time
    batches = Batches(pipe.send, 0.02)
    words = [f"w{i} " for i in range(300)]

    def turn(turn_id: str) -> None:
        emit = batches.emit(turn_id)
        for n, word in enumerate(words):
            emit("token", {"text": word})
            if n % 100 == 99:
                emit("tool", {"id": f"{turn_id}-{n}"})
                emit("reasoning", {"text": "hmm "})
                emit("reasoning", {"text": "yes "})
            time.sleep(0.0005)
        batches.close(turn_id)

    threads = [threading.Thread(target=turn, args=(f"t{k}",)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    batches.stop()
    for k in range(8):
        turn_id = f"t{k}"
        events = pipe.events(turn_id)
        assert pipe.text(turn_id) == "".join(words)
        assert [d["id"] for n, d in events if n == "tool"] == [f"{turn_id}-{n}" for n in (99, 199, 299)]
        # Each tool event comes after exactly the words before it, and its reasoning after it.
        shown = ""
        for name, data in events:
            if name == "token":
                shown += data["text"]
            elif name == "tool":
                n = int(data["id"].rsplit("-", 1)[1])
                assert shown == "".join(words[: n + 1])
        assert pipe.text(turn_id, "reasoning") == "hmm yes " * 3
        assert len([n for n, _ in events if n == "token"]) < len(words) / 3


def test_the_first_token_after_a_pause_goes_at_once_and_later_ones_within_the_interval():
    pipe = Pipe()
    batches = Batches(pipe.send, 0.5)
    emit = batches.emit("t")
    started = time.monotonic()
    emit("token", {"text": "first "})
    assert pipe.wait_text("t", "first ", timeout=1.0)
    assert time.monotonic() - started < 0.25  # not held for the interval
    emit("token", {"text": "second "})
    emit("token", {"text": "third "})
    assert pipe.wait_text("t", "first second third ", timeout=2.0)  # no close, no other event needed
    assert [d["text"] for _, d in pipe.events("t")] == ["first ", "second third "]
    batches.stop()


def test_a_question_an_interrupt_and_the_turns_end_send_the_batch_first():
    pipe = Pipe()
    batches = Batches(pipe.send, 10.0)  # the flusher would wait far longer than the test
    emit = batches.emit("t")
    emit("token", {"text": "a "})  # at once: nothing was sent yet
    assert pipe.wait_text("t", "a ")
    emit("token", {"text": "b "})
    emit("token", {"text": "c "})
    time.sleep(0.05)
    assert pipe.text("t") == "a "  # held for the interval
    batches.before_frame("t")  # the worker sends a question next
    assert pipe.text("t") == "a b c "
    emit("token", {"text": "d "})
    batches.flush_all()  # the worker stops
    assert pipe.text("t") == "a b c d "
    emit("token", {"text": "e "})
    batches.close("t")
    assert pipe.text("t") == "a b c d e "
    emit("token", {"text": "late "})  # a lingering callback after the end is not held back either
    assert pipe.text("t") == "a b c d e late "
    batches.stop()


def test_an_interval_of_zero_sends_every_token_alone():
    pipe = Pipe()
    batches = Batches(pipe.send, 0.0)
    emit = batches.emit("t")
    for word in ("a ", "b ", "c "):
        emit("token", {"text": word})
    assert [d["text"] for _, d in pipe.events("t")] == ["a ", "b ", "c "]
    batches.stop()


def test_stop_ends_the_flusher_thread():
    pipe = Pipe()
    batches = Batches(pipe.send, 0.01)
    before = set(threading.enumerate())
    emit = batches.emit("t")
    emit("token", {"text": "a "})
    emit("token", {"text": "b "})
    assert pipe.wait_text("t", "a b ")
    (flusher,) = [t for t in threading.enumerate() if t not in before and t.name == "token-batches"]
    batches.stop()
    flusher.join(2.0)
    assert not flusher.is_alive()
