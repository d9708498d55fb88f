"""Approvals: a command hermes-agent flags waits for the person's once / session / always / deny.

The agent's own gateway path (``tools.approval``, wired in ``api.agent.agent_binding.session_bound``) detects
the command, keeps the session and "always" allow-lists and the session yolo; here are the question, the
person's answer, and what the agent is told when nobody answered: it fails closed (deny) on a timeout, a
cancelled turn or a stopping server, and says which.

The person approves the command that runs: the card shows it as it runs, with only literal secret values
masked (``exact_view``), and a command that cannot be shown so is denied without asking. "Always" is on
disk, through the agent's own config writer, before the answer is acknowledged.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from api.agent import agent_binding
from api.agent.agent_events import OnEvent
from api.agent.questions import ANSWERED, CANCELLED, STOPPED, TIMEOUT, Question, Questions
from api.rules.errors import ApiError, BadRequest
from api.store import atomic, models, session_lookup
from api.store import config as _config
from api.store.in_use import InUse

CHOICES = ("once", "session", "always", "deny")
# The app's (``App.approvals``, ``App.yolo``), else built on first use: the open approval questions, and the
# sessions whose person turned "don't ask again" on (until the server stops).
QUESTIONS: InUse[Questions] = InUse(lambda: Questions("approval"))
YOLO: InUse[set[str]] = InUse(set)

# A run of these characters is a literal word to the shell: no expansion, substitution, quoting, globbing
# or separator, so masking it cannot hide anything that runs.
_LITERAL = re.compile(r"[A-Za-z0-9_\-.+/=:@%,]+")
# What may stand in for such a run: the agent's masks (``***``, ``ghp_ab...wxyz``), never shell syntax.
_MASK = re.compile(r"[^\s;&|<>()$`'\"\\{}\[\]?!#~]+")
UNSHOWABLE = (
    "Talaria denied it: the command that would run could not be shown exactly, so it was not offered "
    "for approval"
)


def exact_view(runs: str, redacted: str) -> str:
    """The command as the person is shown it: ``runs`` itself, except where the agent's redaction
    (``redacted``) replaced a literal word (a secret written in the command) by a mask. Anything else the
    redaction hid, an expansion or a command substitution above all, is shown as it runs (pure)."""
    matcher = difflib.SequenceMatcher(None, runs, redacted, autojunk=False)
    parts = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        ran, shown = runs[i1:i2], redacted[j1:j2]
        masked = op == "replace" and _LITERAL.fullmatch(ran) and _MASK.fullmatch(shown)
        parts.append(shown if masked else ran)
    return "".join(parts)


def shown_command(data: dict[str, Any]) -> str | None:
    """What the card shows for the agent's question ``data`` (its redacted ``command``, the guard's
    ``runs`` and the agent's redaction of it, ``runs_redacted``), or None when the text that runs is not
    the one the agent asked about (pure)."""
    runs, shown = data.get("runs"), str(data.get("command") or "")
    if not isinstance(runs, str) or data.get("runs_redacted") != shown:
        return None
    return exact_view(runs, shown)


def deny_reason(question: Question) -> str | None:
    """Why Talaria denied on the person's behalf (None when the person answered)."""
    if question.outcome == ANSWERED:
        return None
    return {
        TIMEOUT: f"Talaria denied it: nobody answered within {question.timeout_s:g} s",
        CANCELLED: "Talaria denied it: the turn was stopped while the command waited for approval",
        STOPPED: "Talaria denied it: the server stopped while the command waited for approval",
    }.get(question.outcome or "", "Talaria denied it")


def decision(question: Question) -> tuple[str, str | None]:
    """What the agent is told: ``(choice, deny_reason)``; anything but an answer is a deny."""
    reason = deny_reason(question)
    return (question.answer if reason is None else "deny"), reason


def ask(
    session_id: str,
    emit: OnEvent,
    data: dict[str, Any],
    interrupted: Callable[[], bool],
    *,
    questions: Questions | None = None,
) -> tuple[str, str | None]:
    """Show the flagged command to the person and block until it is decided: ``(choice, deny_reason)``;
    ``questions`` are the turn's app's open approvals (those in use when None).

    A command that cannot be shown as it runs is denied at once, and the turn says so."""
    command = shown_command(data)
    if command is None:
        emit("status", {"kind": "warn", "message": UNSHOWABLE})
        return "deny", UNSHOWABLE
    payload = {
        "command": command,
        "masked": command != data.get("runs"),
        "description": str(data.get("description") or ""),
        "pattern_key": str(data.get("pattern_key") or ""),
        "pattern_keys": [str(k) for k in data.get("pattern_keys") or []],
        "allow_permanent": data.get("allow_permanent") is not False,
    }
    timeout_s = float(_config.setting("approval_timeout"))
    question = QUESTIONS.get(questions).ask(session_id, payload, timeout_s, emit, interrupted, _resolution)
    return decision(question)


def _resolution(question: Question) -> dict[str, Any]:
    choice, reason = decision(question)
    return {"choice": choice, "reason": reason}


def respond(
    session_id: str, approval_id: Any, choice: Any, *, questions: Questions | None = None
) -> dict[str, Any]:
    """Settle the question among ``questions`` (the app's open approvals; those in use when None) with the
    person's choice; "always" is durable in the agent's config first."""
    if choice not in CHOICES:
        raise BadRequest(f"choice must be one of: {', '.join(CHOICES)}")
    if not isinstance(approval_id, str) or not approval_id:
        raise BadRequest("approval_id must be a non-empty string")
    QUESTIONS.get(questions).answer(
        session_id, approval_id, choice, before=_allow_always if choice == "always" else None
    )
    return {"ok": True, "approval_id": approval_id, "choice": choice}


def _allow_always(question: Question) -> None:
    """Write the question's kinds of command into the agent's allow-list, durably (the config file and
    its folder entry), before the answer settles it; a failure leaves the question waiting."""
    if question.payload.get("allow_permanent") is False:
        raise BadRequest("This command cannot be always allowed; choose once, this session or deny.")
    keys = question.payload.get("pattern_keys") or [question.payload.get("pattern_key") or ""]
    try:
        config_file = agent_binding.allow_always(keys)
        atomic.fsync_dir(config_file.parent)
    except OSError as exc:
        raise ApiError(f"Could not save the allow-list: {exc.strerror or exc}", status=500) from exc


def pending(
    session_id: str,
    *,
    questions: Questions | None = None,
    switches: set[str] | None = None,
    store: models.Store | None = None,
) -> dict[str, Any]:
    """The session (of ``store``)'s open approvals among ``questions`` and its yolo switch among ``switches``
    (the app's; those in use when None)."""
    session_lookup.load_session(session_id, store=store)
    return {"pending": QUESTIONS.get(questions).pending(session_id), "yolo": yolo(session_id, switches)}


def yolo(session_id: str, switches: set[str] | None = None) -> bool:
    return session_id in YOLO.get(switches)


def set_yolo(
    session_id: str, enabled: Any, *, switches: set[str] | None = None, store: models.Store | None = None
) -> dict[str, Any]:
    """The session's explicit "don't ask again" switch among ``switches`` (the app's; those in use when None;
    the agent's session yolo, off until turned on)."""
    if not isinstance(enabled, bool):
        raise BadRequest("enabled must be true or false")
    session_lookup.load_session(session_id, store=store)
    switches = YOLO.get(switches)
    (switches.add if enabled else switches.discard)(session_id)
    agent_binding.apply_session_yolo(session_id, enabled)
    return {"ok": True, "session_id": session_id, "yolo": enabled}
