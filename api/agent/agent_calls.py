"""The agent's side calls outside a turn (a title, a manual compression, a goal's judgement, a background
process's state, a command in the process's execution environment), run where the agent runs.

Each takes and returns plain data, so ``api.agent.worker_pool`` can run it in a worker process (the agent's LLM
call then leaves the server process) and, with ``agent_workers`` 0, here. ``run(name, args)`` is the one
entry both use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from api.agent import agent_goals, agent_runtime, environment_exec, toolsets

log = logging.getLogger("talaria.agent_calls")


def title(user_text: str, answer_text: str, runtime: dict[str, Any] | None) -> str | None:
    """A short title for a first exchange by the agent's title generator (None when it fails)."""
    return agent_runtime.generate_title(user_text, answer_text, runtime)


def _request_tokens(agent: Any, messages: list[Any]) -> int:
    """What a request with ``messages`` weighs, system prompt and tool schemas included: the figure the
    context meter shows after a turn (the provider's count), so the two agree."""
    return max(agent_runtime.estimate_request_tokens(agent, messages), 1)


def compress(
    session_id: str,
    model: str,
    provider: str | None,
    runtime: dict[str, Any],
    messages: list[dict[str, Any]],
    focus_topic: str | None,
) -> dict[str, Any]:
    """The agent's compressor over ``messages``: ``{messages, changed, aborted, before_tokens, after_tokens}``
    (``messages`` unvalidated, as the compressor returned them)."""
    # A throwaway agent (state_db_path=None): only its compressor is used, and nothing is persisted.
    agent = agent_runtime.build_agent(
        session_id,
        model,
        provider,
        state_db_path=None,
        runtime=runtime,
        enabled_toolsets=toolsets.setting_toolsets(),
    )
    before_tokens = _request_tokens(agent, messages)
    outcome = agent_runtime.compress_messages(
        agent, messages, focus_topic=focus_topic, current_tokens=before_tokens
    )
    compressed = outcome.messages
    after_tokens = _request_tokens(agent, compressed) if isinstance(compressed, list) else before_tokens
    return {
        "messages": compressed,
        "changed": outcome.changed,
        "aborted": outcome.aborted,
        "before_tokens": before_tokens,
        "after_tokens": after_tokens,
    }


def judge_goal(session_id: str, answer: str) -> dict[str, Any] | None:
    """The agent's judge over ``answer`` toward the session's standing goal (its ``GoalManager``, which saves
    the new state in the agent's store): ``{decision, card}``, or None when the session has no active goal.
    Here its judge model is called where the agent's tools run, so it also sees this process's background
    processes (it may decide to wait on one)."""
    mgr = agent_goals.recorded_manager(session_id)
    if mgr is None or mgr.state is None or not mgr.is_active():
        return None
    decision = mgr.evaluate_after_turn(
        answer, user_initiated=True, background_processes=agent_goals.background_processes()
    )
    return {
        "decision": {
            "should_continue": bool(decision.get("should_continue")),
            "continuation_prompt": decision.get("continuation_prompt"),
        },
        "card": agent_goals.card(session_id, mgr.state),
    }


def process_state(proc_id: str) -> dict[str, Any] | None:
    """``{exited, exit_code, output}`` of a background process the agent's terminal tool started in this
    process, or None when its registry has none (read only: no poll bookkeeping of the agent's is touched)."""
    try:
        registry = agent_runtime.agent_module("tools.process_registry").process_registry
        found = registry.get(proc_id)
    except Exception:  # noqa: BLE001 - an agent that cannot answer leaves the card as it is
        log.exception("reading background process %s failed", proc_id)
        return {"exited": False, "exit_code": None, "output": ""}
    if found is None:
        return None
    output = found.output_buffer or ""
    clean = getattr(registry, "_clean_shell_noise", None)  # the agent's own: bash's startup warnings go
    return {
        "exited": bool(found.exited),
        "exit_code": found.exit_code,
        "output": clean(output) if callable(clean) else output,
    }


def environment_command(command: str, timeout: int, stdin: str | None = None) -> dict[str, Any]:
    """``{output, returncode}`` of ``command`` run through this process's execution environment
    (``api.agent.environment_exec``)."""
    return environment_exec.run(command, timeout, stdin)


CALLS: dict[str, Callable[..., Any]] = {
    "title": title,
    "compress": compress,
    "judge_goal": judge_goal,
    "process_state": process_state,
    "environment_command": environment_command,
}


def run(name: str, args: dict[str, Any]) -> Any:
    """Run the side call ``name`` with ``args`` here."""
    return CALLS[name](**args)
