"""The pipe between the server and an agent worker: whole frames from many threads, a closed end reads None."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from api.agent import worker_frames
from api.agent.worker_frames import Channel, FrameError


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    a, b = Channel(left), Channel(right)
    yield a, b
    a.close()
    b.close()


def test_frames_sent_from_many_threads_arrive_whole(pair):
    a, b = pair
    senders = [
        threading.Thread(target=lambda n=n: [a.send({"n": n, "i": i, "pad": "x" * 5000}) for i in range(50)])
        for n in range(4)
    ]
    for thread in senders:
        thread.start()
    got = [b.receive() for _ in range(200)]
    for thread in senders:
        thread.join()
    assert sorted((f["n"], f["i"]) for f in got) == sorted((n, i) for n in range(4) for i in range(50))
    assert all(f["pad"] == "x" * 5000 for f in got)


def test_values_json_does_not_know_travel_as_text_and_keys_as_strings(pair):
    a, b = pair
    a.send({"when": object.__new__(type("Odd", (), {"__str__": lambda self: "odd"})), "map": {1: "one"}})
    assert b.receive() == {"when": "odd", "map": {"1": "one"}}


def test_a_closed_end_reads_as_none_and_sending_to_it_says_false(pair):
    a, b = pair
    a.close()
    assert b.receive() is None
    assert b.send({"x": 1}) is False


def test_a_length_over_the_limit_or_a_frame_that_is_not_an_object_is_refused(pair):
    a, b = pair
    a.sock.sendall(struct.pack(">I", worker_frames.MAX_FRAME_BYTES + 1))
    with pytest.raises(FrameError):
        b.receive()
    left, right = socket.socketpair()
    sender, receiver = Channel(left), Channel(right)
    left.sendall(struct.pack(">I", 2) + b"[]")
    with pytest.raises(FrameError):
        receiver.receive()
    sender.close()
    receiver.close()


def test_a_frame_cut_short_reads_as_a_closed_end():
    left, right = socket.socketpair()
    receiver = Channel(right)
    left.sendall(struct.pack(">I", 100) + b'{"a":')
    left.close()
    assert receiver.receive() is None
    receiver.close()


def test_a_lone_surrogate_from_the_model_travels_as_the_replacement_character(pair):
    a, b = pair
    assert a.send({"name": "token", "data": {"text": "half \ud800 of a pair"}})
    assert b.receive() == {"name": "token", "data": {"text": "half \ufffd of a pair"}}
