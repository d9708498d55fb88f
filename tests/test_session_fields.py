"""The session field table: the declared fields are exactly the table's, and a new session sets each."""

from __future__ import annotations

from typing import get_type_hints

from api.rules.session_fields import (
    FIELDS,
    KNOWN_FIELDS,
    NORMALISE,
    SessionFields,
    collapse_adjacent_duplicate_partials,
)
from api.services import session_list
from api.store.models import Session


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


def test_each_declared_type_is_the_one_its_kind_gives():
    hints = get_type_hints(SessionFields)
    wrong = {
        field.name: (hints[field.name], NORMALISE[field.kind][1])
        for field in FIELDS
        if field.name in hints and field.kind != "given" and hints[field.name] != NORMALISE[field.kind][1]
    }
    assert wrong == {}


def test_the_index_row_holds_exactly_the_fields_the_table_marks_for_it(state_dir):
    session = Session(
        session_id="rowkeys",
        parent_session_id="p1",
        worktree_path="/tmp/wt",
        compression_recovery_action="restore",
        environment="build-box",
        messages=[{"role": "user", "content": "hi", "timestamp": 1.0}],
    )
    assert set(session.compact()) == {field.name for field in FIELDS if field.index}


def test_an_index_row_leaves_out_what_is_unset_and_its_groups(state_dir):
    row = Session(session_id="rowbare").compact()
    left_out = {field.name for field in FIELDS if field.index in ("if_set", "worktree", "recovery")}
    assert left_out and not left_out & set(row)


def test_the_sidebar_sends_the_fields_the_table_marks_for_it(state_dir):
    row = Session(session_id="side1", agent_session_id="agent-1").compact()
    sent = session_list.sidebar_row(row)
    assert set(sent) == {f.name for f in FIELDS if f.sidebar == "always"} | {"agent_session_id"}


def test_token_counts_a_file_holds_as_text_load_index_and_save_as_zero(state_dir):
    """A hand-edited or foreign file with "input_tokens": "many" once made the index row raise on the
    addition of cached tokens, so the session could not be saved."""
    session = Session(session_id="tokens1", input_tokens="many", cache_read_tokens="x", output_tokens=True)
    assert (session.input_tokens, session.cache_read_tokens, session.output_tokens) == (0, 0, 0)
    assert session.compact()["cache_hit_percent"] == 0
    session.messages = [{"role": "user", "content": "hi", "timestamp": 1.0}]
    assert session.save() is True
    assert Session.load("tokens1").input_tokens == 0
