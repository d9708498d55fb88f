"""The session field table: the declared fields are exactly the table's, and a new session sets each."""

from __future__ import annotations

from typing import get_type_hints

from api.models import Session
from api.session_fields import KNOWN_FIELDS, SessionFields


def test_declared_fields_are_the_field_table():
    assert set(get_type_hints(SessionFields)) == set(KNOWN_FIELDS)


def test_a_new_session_sets_every_declared_field(state_dir):
    session = Session(session_id="fields1")
    assert [name for name in get_type_hints(SessionFields) if name not in vars(session)] == []
