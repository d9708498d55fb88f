"""``git status --porcelain=v1 -z`` as the panel's entries (``api.rules.git_porcelain``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.rules import git_porcelain


def test_each_state_in_words_with_a_renames_source_skipped():
    raw = (
        " M app.py\0M  staged.py\0R  new.txt\0README old.txt\0?? fresh\nname.txt\0 D gone.txt\0UU both.txt\0"
    )
    assert git_porcelain.entries(raw) == {
        "entries": [
            {"path": "app.py", "state": "modified", "staged": "no"},
            {"path": "staged.py", "state": "modified", "staged": "yes"},
            {"path": "new.txt", "state": "renamed", "staged": "yes"},
            {"path": "fresh\nname.txt", "state": "new"},
            {"path": "gone.txt", "state": "deleted", "staged": "no"},
            {"path": "both.txt", "state": "conflict", "staged": "yes"},
        ],
        "truncated": False,
    }


PATHS = st.text(alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), min_size=1)


@given(st.lists(st.tuples(st.sampled_from(["M ", " M", "A ", "??", "R ", " D"]), PATHS), max_size=30))
def test_every_entry_comes_back_once_in_order(items):
    raw = "".join(f"{code} {path}\0" + ("source\0" if code == "R " else "") for code, path in items)
    found = git_porcelain.entries(raw)
    assert [row["path"] for row in found["entries"]] == [path for _, path in items]
    assert found["truncated"] is False


def test_more_than_the_limit_is_cut_and_said():
    raw = "".join(f"?? f{i}\0" for i in range(git_porcelain.STATUS_MAX + 1))
    found = git_porcelain.entries(raw)
    assert len(found["entries"]) == git_porcelain.STATUS_MAX and found["truncated"] is True
