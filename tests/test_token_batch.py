"""The pure batching of a turn's streamed text (``api.rules.token_batch``): merging keeps every character and
the order of every event; a batch is due at once after a pause, else at most once per interval."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.rules import token_batch
from api.rules.token_batch import Batch, merged

Event = tuple[str, dict[str, Any]]

texts = st.text(min_size=0, max_size=6)
streamed = st.tuples(st.sampled_from(["token", "reasoning"]), st.builds(lambda t: {"text": t}, texts))
others = st.one_of(
    st.tuples(st.just("tool"), st.fixed_dictionaries({"id": st.text(max_size=3)})),
    st.tuples(st.just("status"), st.fixed_dictionaries({"message": st.text(max_size=3)})),
    st.tuples(st.just("token"), st.fixed_dictionaries({"text": texts, "extra": st.integers()})),
)
events_strategy = st.lists(st.one_of(streamed, streamed, others), max_size=40)


def split(events: list[Event]) -> list[tuple[str, Any]]:
    """Each event with its streamed text cut into characters: what a reader of the stream sees, whatever
    the batching."""
    out: list[tuple[str, Any]] = []
    for name, data in events:
        if token_batch.mergeable(name, data):
            out += [(name, ch) for ch in data["text"]]
        else:
            out.append((name, data))
    return out


@given(events_strategy)
def test_merged_then_split_is_the_original_sequence(events):
    assert split(merged(events)) == split(events)


@given(events_strategy)
def test_merging_joins_only_neighbours_of_one_name_and_keeps_every_other_event_in_place(events):
    out = merged(events)
    assert [e for e in out if not token_batch.mergeable(*e)] == [
        e for e in events if not token_batch.mergeable(*e)
    ]
    for (a, da), (b, db) in zip(out, out[1:], strict=False):
        assert not (a == b and token_batch.mergeable(a, da) and token_batch.mergeable(b, db))
    assert merged(out) == out
    assert len(out) <= len(events)


def test_a_token_with_more_than_its_text_is_never_merged():
    assert merged([("token", {"text": "a"}), ("token", {"text": "b", "x": 1}), ("token", {"text": "c"})]) == [
        ("token", {"text": "a"}),
        ("token", {"text": "b", "x": 1}),
        ("token", {"text": "c"}),
    ]
    assert merged([("token", {"text": "a"}), ("reasoning", {"text": "b"}), ("token", {"text": "c"})]) == [
        ("token", {"text": "a"}),
        ("reasoning", {"text": "b"}),
        ("token", {"text": "c"}),
    ]


gaps = st.floats(min_value=0.0, max_value=0.05, allow_nan=False)


@given(
    st.lists(st.tuples(st.one_of(streamed, others), gaps), max_size=60),
    st.sampled_from([0.005, 0.02, 0.05]),
)
def test_a_batch_sent_when_due_delivers_every_event_in_order_at_most_once_per_interval_and_late_by_under_two(
    arrivals, interval
):
    """The worker's flusher as a model: a batch goes when it is due (before any later arrival); any other
    event sends the batch first, then itself."""
    batch = Batch(interval)
    sent: list[Event] = []
    due_sends: list[float] = []
    last_send = float("-inf")
    waited: list[float] = []
    arrived_at: list[float] = []  # when each event now in the batch arrived
    now = 0.0

    def send_batch(at: float, due_driven: bool) -> None:
        nonlocal last_send
        events = batch.take(at)
        if events:
            last_send = at
            if due_driven:
                due_sends.append(at)
        waited.extend(at - t for t in arrived_at)
        arrived_at.clear()
        sent.extend(events)

    for (name, data), gap in arrivals:
        now += gap
        due = batch.due()
        if due is not None and due <= now:
            send_batch(due, True)
        if token_batch.mergeable(name, data):
            idle = not batch and now - last_send >= interval
            due = batch.add(name, data["text"], now)
            arrived_at.append(now)
            assert due >= now
            if idle:  # the first text after a pause goes at once
                assert due == now
        else:
            send_batch(now, False)
            sent.append((name, data))
    due = batch.due()
    if due is not None:
        send_batch(due, True)

    assert split(sent) == split([e for e, _ in arrivals])
    assert all(b - a >= interval - 1e-9 for a, b in zip(due_sends, due_sends[1:], strict=False))
    assert all(w < 2 * interval + 1e-9 for w in waited)
    assert not batch


def test_text_past_the_size_cap_is_due_at_once():
    batch = Batch(10.0, max_chars=8)
    assert batch.add("token", "abc", 0.0) == 0.0  # nothing sent before: at once
    batch.take(0.0)
    assert batch.add("token", "abc", 1.0) == 10.0  # the interval after the last send
    assert batch.add("token", "abcdef", 2.0) == 1.0  # over the cap: due since its first text came
    assert batch.take(2.0) == [("token", {"text": "abcabcdef"})]
    assert batch.due() is None and batch.take(3.0) == []


def test_the_batches_of_turns_streaming_together_fall_due_at_the_same_moments():
    """Every busy turn's batch is due on the interval's grid, so one wake of the flusher sends them all."""
    turns = [Batch(0.02) for _ in range(5)]
    dues = set()
    for n, batch in enumerate(turns):
        start = 1.001 + n * 0.003  # each turn's first token after a pause goes at once, at its own time
        assert batch.add("token", "a", start) == start
        batch.take(start)
        dues.add(round(batch.add("token", "b", start + 0.001), 9))
    assert dues == {1.04}  # 1.0 + the interval, rounded up to the grid, for all of them
