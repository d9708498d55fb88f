"""The session field table: the declared fields are exactly the table's, and a new session sets each."""

from __future__ import annotations

from typing import get_type_hints

from api.models import Session
from api.session_fields import KNOWN_FIELDS, SessionFields, collapse_adjacent_duplicate_partials


def test_declared_fields_are_the_field_table():
    assert set(get_type_hints(SessionFields)) == set(KNOWN_FIELDS)


def test_a_new_session_sets_every_declared_field(state_dir):
    session = Session(session_id="fields1")
    assert [name for name in get_type_hints(SessionFields) if name not in vars(session)] == []


def _partial(text: str) -> dict:
    return {"role": "assistant", "content": text, "_partial": True}


def test_a_checkpoint_repeated_right_after_itself_is_dropped_once_loaded():
    rows = [{"role": "user", "content": "q"}, _partial("half "), _partial("half"), _partial("more")]
    kept, dropped = collapse_adjacent_duplicate_partials(rows)
    assert kept == [rows[0], rows[1], rows[3]] and dropped == 1


def test_equal_checkpoints_with_a_row_between_them_both_stay():
    rows = [_partial("same"), {"role": "user", "content": "q"}, _partial("same")]
    assert collapse_adjacent_duplicate_partials(rows) == (rows, 0)
