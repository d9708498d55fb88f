"""``api.agent.approvals`` in process: what the agent is told for each way a question ends, and that a failure
while asking leaves nothing open (the command is refused, the session can be asked again)."""

from __future__ import annotations

import threading
import time

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from api.agent import agent_binding, approvals
from api.rules.errors import BadRequest
from api.store import config
from api.store.models import Session
from talaria_testing.asking import answer_when_asked

DATA = {"command": "rm -rf /srv/x", "description": "recursive delete", "pattern_key": "recursive delete"}
ASKED = {**DATA, "runs": DATA["command"], "runs_redacted": DATA["command"]}  # as the agent's guard asks


@pytest.fixture
def sid(state_dir, monkeypatch):
    monkeypatch.setitem(config.SETTINGS_VALUES, "approval_timeout", 5.0)  # nobody answers: a deny soon
    Session(session_id="ap1", messages=[{"role": "user", "content": "hi"}]).save()
    return "ap1"


def test_the_persons_choice_reaches_the_agent_and_the_journal(sid):
    events: list = []
    emit = answer_when_asked(events, lambda data: approvals.respond(sid, data["approval_id"], "session"))
    assert approvals.ask(sid, emit, ASKED, lambda: False) == ("session", None)
    assert [name for name, _ in events] == ["approval", "approval_resolved"]
    assert events[0][1]["command"] == "rm -rf /srv/x" and events[1][1]["outcome"] == "answered"
    assert Session.load(sid).pending_question is None


def test_an_interrupted_turn_denies_and_says_why(sid):
    choice, reason = approvals.ask(sid, lambda *_: None, ASKED, lambda: True)
    assert choice == "deny" and "the turn was stopped" in reason


def test_a_failure_while_asking_leaves_no_question_open(sid):
    def broken(name, data):
        raise RuntimeError("the journal is gone")

    with pytest.raises(RuntimeError):
        approvals.ask(sid, broken, ASKED, lambda: False)
    assert approvals.pending(sid)["pending"] == []
    assert approvals.ask(sid, lambda *_: None, ASKED, lambda: True)[0] == "deny"  # asking again works


def test_an_invalid_choice_is_refused_before_any_lookup(sid):
    for choice in ("yes", "", None, ["once"], "ONCE"):
        with pytest.raises(BadRequest):
            approvals.respond(sid, "any-id", choice)


# ---------------------------------------------------------------------- the command as it runs

SHELL_SYNTAX = set(" \t\n;&|<>()$`'\"\\{}[]?!#~")


def agent_question(runs: str) -> dict:
    """What the agent's guard hands Talaria for ``runs``: its redacted copy, and the text itself."""
    shown = agent_binding.redacted(runs)
    return {**DATA, "command": shown, "runs": runs, "runs_redacted": shown}


def test_an_expansion_the_agents_redaction_hides_is_shown_as_it_runs():
    """The agent showed ``export GITHUB_TOKEN=***`` for a command substitution that deletes a folder."""
    runs = "export GITHUB_TOKEN=$(rm${IFS}-rf${IFS}/srv/precious)"
    assert agent_binding.redacted(runs) == "export GITHUB_TOKEN=***"
    assert approvals.shown_command(agent_question(runs)) == runs
    for runs in ('export API_KEY="`rm -rf /srv/x`"', "TOKEN=abc;rm -rf /srv/q"):
        assert approvals.shown_command(agent_question(runs)) == runs


def test_only_a_literal_secret_written_in_the_command_is_masked():
    secret = "ghp_" + "a1B2c3D4e5" * 4
    runs = f"export GITHUB_TOKEN={secret} && rm -rf /srv/x"
    shown = approvals.shown_command(agent_question(runs))
    assert shown == "export GITHUB_TOKEN=*** && rm -rf /srv/x" and secret not in shown


@given(
    st.lists(
        st.sampled_from(
            [
                "export ",
                "GITHUB_TOKEN=",
                "API_KEY=",
                "ghp_" + "x9" * 18,
                "sk-" + "ab12" * 8,
                "$(",
                ")",
                "${IFS}",
                "rm",
                " -rf ",
                "/srv/x",
                ";",
                "&&",
                "`",
                '"',
                "'",
                "Bearer ",
                "Authorization: ",
                "\n",
                "|",
                "echo",
                "=",
                "$HOME",
                "~/",
                "*",
            ]
        ),
        max_size=12,
    )
)
def test_the_shown_command_keeps_every_piece_of_shell_syntax_that_runs(pieces):
    runs = "".join(pieces)
    shown = approvals.shown_command(agent_question(runs))
    assert [c for c in shown if c in SHELL_SYNTAX] == [c for c in runs if c in SHELL_SYNTAX]


def test_a_command_that_cannot_be_shown_as_it_runs_is_denied_without_asking(sid):
    events: list = []
    for data in (DATA, {**DATA, "runs": "rm -rf /srv/y", "runs_redacted": "rm -rf /srv/y"}):
        choice, reason = approvals.ask(
            sid, lambda name, data: events.append((name, data)), data, lambda: False
        )
        assert choice == "deny" and "could not be shown exactly" in reason
    assert [name for name, _ in events] == ["status", "status"]
    assert approvals.pending(sid)["pending"] == []


# ---------------------------------------------------------------------- "always"


def _ask_in_background(sid: str, data: dict) -> tuple[threading.Thread, list]:
    events: list = []
    thread = threading.Thread(
        target=approvals.ask, args=(sid, lambda *e: events.append(e), data, lambda: False)
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not approvals.pending(sid)["pending"]:
        assert time.monotonic() < deadline, "the question was never asked"
        time.sleep(0.01)
    return thread, events


def test_always_is_in_the_agents_config_on_disk_before_the_answer_returns(sid, tmp_path, monkeypatch):
    """``always`` answered 200 while the allow-list reached config.yaml ~8 ms later, from the agent's
    thread: a crash in between lost it."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    data = {**agent_question("rm -rf /srv/x"), "pattern_keys": ["recursive delete"]}
    thread, _events = _ask_in_background(sid, data)
    approval_id = approvals.pending(sid)["pending"][0]["approval_id"]
    approvals.respond(sid, approval_id, "always")
    saved = yaml.safe_load((tmp_path / "home" / "config.yaml").read_text())
    assert "recursive delete" in saved["command_allowlist"]
    thread.join(10)


def test_always_is_refused_where_the_agent_does_not_allow_it_and_the_question_keeps_waiting(sid):
    data = {**agent_question("rm -rf /srv/x"), "allow_permanent": False}
    thread, _events = _ask_in_background(sid, data)
    approval_id = approvals.pending(sid)["pending"][0]["approval_id"]
    with pytest.raises(BadRequest):
        approvals.respond(sid, approval_id, "always")
    assert [p["approval_id"] for p in approvals.pending(sid)["pending"]] == [approval_id]
    approvals.respond(sid, approval_id, "deny")
    thread.join(10)
