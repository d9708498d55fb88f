"""Model-written titles: asked once after the first exchange, never over a name the person gave."""

from __future__ import annotations

import pytest

from api.models import SESSIONS, Session
from api.services import attachments, titles


def _msg(role, content, **extra):
    return {"role": role, "content": content, "timestamp": 1.0, **extra}


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        (
            [_msg("user", "Plan a trip"), _msg("assistant", "Sure: day one…")],
            ("Plan a trip", "Sure: day one…"),
        ),
        ([_msg("user", "Plan a trip")], None),
        ([_msg("user", "Plan"), _msg("assistant", "⚠ failed", _error=True)], None),
        ([_msg("user", "a"), _msg("assistant", "b"), _msg("user", "c"), _msg("assistant", "d")], None),
        ([], None),
    ],
)
def test_only_a_single_answered_exchange_is_titled(messages, expected):
    assert titles.first_exchange(messages) == expected


@pytest.fixture
def session(state_dir):
    s = Session(
        session_id="t1", title="Plan a trip", messages=[_msg("user", "Plan a trip"), _msg("assistant", "Ok")]
    )
    s.save()
    return s


def test_a_generated_title_is_stored_once_and_durably(session):
    assert titles.apply_title("t1", "  Trip   planning  ")
    SESSIONS.clear()
    loaded = Session.load("t1")
    assert loaded.title == "Trip planning" and loaded.llm_title_generated
    assert not titles.apply_title("t1", "Another title")
    assert titles.wants_title(loaded) is None


def test_a_name_the_person_gave_is_never_replaced(session):
    session.manual_title = True
    session.title = "Mine"
    session.save()
    assert titles.wants_title(session) is None
    assert not titles.apply_title("t1", "Generated")
    assert Session.load("t1").title == "Mine"


@pytest.mark.parametrize("bad", [None, "", "   ", 42, "x" * 500])
def test_an_unusable_title_changes_nothing(session, bad):
    assert not titles.apply_title("t1", bad)
    assert Session.load("t1").title == "Plan a trip"


def test_a_skill_commands_message_is_titled_by_the_persons_words_not_the_skills_text():
    sent = (
        '[IMPORTANT: The user has invoked the "greet" skill, indicating they want you to follow its '
        "instructions. The full skill content is loaded below.]\n\n# Greet\nSay hello.\n\n"
        "The user has provided the following instruction alongside the skill invocation: say hi to Bob"
    )
    assert titles.persons_words(sent) == "/greet say hi to Bob"
    assert titles.persons_words("plain words") == "plain words"


def test_a_message_with_attachments_is_titled_by_what_the_person_wrote_not_the_lines_naming_them():
    """The quick title of a message sent with attachments read "Look at these [Attached image: uploads/…"."""
    attached = [
        {"path": "uploads/dot.png", "name": "dot.png", "kind": "image"},
        {"path": "a.csv", "kind": "file"},
    ]
    sent = attachments.agent_text("Look at these", attached)
    row = _msg("user", sent, attachments=attached)
    assert titles.persons_message(row) == "Look at these"
    assert titles.first_exchange([row, _msg("assistant", "A dot.")]) == ("Look at these", "A dot.")
    # Text that does not end with the lines (edited, or from another program) is kept whole.
    assert titles.persons_message(_msg("user", "Look", attachments=attached)) == "Look"
    assert titles.persons_message(_msg("user", sent, attachments="not a list")) == sent
    assert titles.persons_message(_msg("user", sent)) == sent
