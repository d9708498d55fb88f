"""git's answers parsed into checkpoints and changed files (``api.rules.checkpoint_records``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.rules import checkpoint_records
from api.rules.checkpoint_records import FileChange, Point

_names = st.text(
    st.characters(blacklist_characters="\0\t\n", blacklist_categories=("Cs",)), min_size=1, max_size=20
)
_changes = st.lists(
    st.tuples(
        _names, st.sampled_from(["A", "M", "D"]), st.integers(0, 9_999), st.integers(0, 9_999), st.booleans()
    ),
    unique_by=lambda row: row[0],
    max_size=12,
)


def _git_output(rows) -> str:
    raw = "".join(f":100644 100644 {'0' * 40} {'1' * 40} {status}\0{path}\0" for path, status, *_ in rows)
    numstat = "".join(
        f"{'-' if binary else ins}\t{'-' if binary else dels}\t{path}\0"
        for path, _s, ins, dels, binary in rows
    )
    return raw + numstat


@given(_changes)
def test_every_changed_file_is_read_back_with_its_status_and_counts(rows):
    expected = [
        FileChange(path, {"A": "added", "D": "deleted"}.get(status, "modified"), 0 if binary else ins,
                   0 if binary else dels, binary)
        for path, status, ins, dels, binary in rows
    ]  # fmt: skip
    assert checkpoint_records.changes(_git_output(rows)) == expected


def test_points_keep_their_order_and_leave_malformed_records_out():
    records = [
        f"{'a' * 40}|1700000000|before write_file",
        "junk",
        f"{'b' * 40}|x|bad date",
        f"{'c' * 40}|5|a|b",
    ]
    assert checkpoint_records.points(records) == [
        Point("a" * 40, 1_700_000_000, "before write_file"),
        Point("c" * 40, 5, "a|b"),
    ]


def test_a_commit_hash_is_lowercase_hexadecimal_of_4_to_64_characters():
    assert checkpoint_records.is_commit_hash("abcd") and checkpoint_records.is_commit_hash("0" * 64)
    for bad in ("abc", "ABCD", "0" * 65, "abcg", None, 12345):
        assert not checkpoint_records.is_commit_hash(bad)
