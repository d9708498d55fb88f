"""A turn's thread bound to its session, the way hermes' gateways do it: the workspace the tools work in,
the approval questions and the clarify questions of that session (``TurnScope``, ``session_bound``), and
the session's "don't ask again" switch. The agent's modules come through ``api.agent.agent_runtime.agent_module``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, cast

from api.agent import turn_checkpoints
from api.agent.agent_runtime import agent_module

AskApproval = Callable[[dict[str, Any], Callable[[], bool]], tuple[str, str | None]]
AskClarify = Callable[[str, list[Any] | None, Callable[[], bool]], str]


@dataclass
class TurnScope:
    """What one turn's tools see: the session's workspace and how the person is asked.

    ``ask_approval(data, interrupted)`` blocks until the person (or a deadline, cancel, stop) decides and
    returns ``(choice, deny_reason)``; ``ask_clarify(question, choices, interrupted)`` returns the answer.
    ``interrupted()`` is the agent's own interrupt flag of the asking thread.
    """

    session_id: str  # Talaria's id: the approval session key, stable when the agent rotates its own id
    workspace: str
    ask_approval: AskApproval
    ask_clarify: AskClarify
    yolo: bool = False


def apply_session_yolo(session_id: str, enabled: bool) -> None:
    """The agent's per-session "don't ask again" (its gateway /yolo), if the agent is loaded yet;
    ``session_bound`` applies it again at the start of every turn."""
    approval = sys.modules.get("tools.approval")
    if approval is not None:
        (approval.enable_session_yolo if enabled else approval.disable_session_yolo)(session_id)


# The agent's guards hand their notifier only a secret-redacted copy of the text they check; the text that
# runs is the guard's own argument. Each guard that can ask, and the name of that argument.
_GUARD_TEXT = {
    "check_all_command_guards": "command",
    "check_execute_code_guard": "command",
    "_run_approval_gate": "display_target",
    "request_elicitation_consent": "message",
}


def text_under_approval() -> str | None:
    """The exact text the agent's approval guard on this thread checks and will run, or None when no
    guard of ``tools.approval`` is found among the callers (then nothing can be shown as it runs)."""
    approval = sys.modules.get("tools.approval")
    if approval is None:
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_globals is vars(approval) and frame.f_code.co_name in _GUARD_TEXT:
            text = frame.f_locals.get(_GUARD_TEXT[frame.f_code.co_name])
            return text if isinstance(text, str) else None
        frame = frame.f_back
    return None


def redacted(text: str) -> str:
    """The agent's own secret redaction of a text, as its approval guards show it."""
    return cast("str", agent_module("agent.redact").redact_sensitive_text(text))


def allow_always(pattern_keys: Iterable[str]) -> Path:
    """Add kinds of command to the agent's permanent allow-list and write it with the agent's own config
    writer (temp file, fsync, rename); the keys are read back from the file. Returns the config file."""
    approval = agent_module("tools.approval")
    keys = {key for key in pattern_keys if key}
    patterns = approval.load_permanent_allowlist() | keys
    approval.load_permanent(patterns)
    approval.save_permanent_allowlist(patterns)
    if not keys <= approval.load_permanent_allowlist():
        raise OSError("the agent's config did not keep the allow-list")
    return Path(agent_module("hermes_cli.config").get_config_path())


@contextlib.contextmanager
def session_bound(agent: Any, scope: TurnScope | None) -> Iterator[None]:
    """Bind the calling thread to the agent's session the way hermes' gateways do.

    Context variables (the agent's session context, its approval session key, the logical cwd) are
    local to this thread and the tool threads the agent starts from it, and the terminal and file tools
    read the session's cwd record by task id, so concurrent turns of different sessions never see each
    other's workspace or approvals. Nothing process-wide (``os.chdir``, ``os.environ``) changes.
    """
    if scope is None:
        yield
        return
    key = scope.session_id
    task_id = str(agent.session_id)  # the tools' record key (``run_conversation(task_id=...)``)
    approval = agent_module("tools.approval")
    session_context = agent_module("gateway.session_context")
    is_interrupted = agent_module("tools.interrupt").is_interrupted
    agent_module("tools.terminal_tool").register_task_env_overrides(task_id, {"cwd": scope.workspace})

    def notify(data: dict[str, Any]) -> None:
        runs = text_under_approval()
        facts = {**data, "runs": runs, "runs_redacted": None if runs is None else redacted(runs)}
        choice, reason = scope.ask_approval(facts, is_interrupted)
        approval.resolve_gateway_approval(key, choice, reason=reason)

    tokens = session_context.set_session_vars(
        platform="webui",
        session_key=key,
        session_id=task_id,
        cwd=scope.workspace,
        async_delivery=False,
    )
    key_token = approval.set_current_session_key(key)
    (approval.enable_session_yolo if scope.yolo else approval.disable_session_yolo)(key)
    approval.register_gateway_notify(key, notify)
    agent.clarify_callback = lambda question, choices: scope.ask_clarify(question, choices, is_interrupted)
    try:
        with turn_checkpoints.bound(agent, scope.workspace):
            yield
    finally:
        agent.clarify_callback = None
        approval.unregister_gateway_notify(key)
        approval.reset_current_session_key(key_token)
        session_context.clear_session_vars(tokens)
