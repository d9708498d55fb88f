"""A command run through the live execution environment this process's turns use: the agent's own, keyed as
its tools key it, so its SSH master connection or container is reused (and made when there is none yet)."""

from __future__ import annotations

from typing import Any

from api.agent import agent_runtime


def run(command: str, timeout: int, stdin: str | None = None) -> dict[str, Any]:
    """``{output, returncode}`` of ``command`` (fed ``stdin``) there. Refused in a process whose tools run on
    this machine: only an environment's worker answers for another host."""
    if not agent_runtime.tools_elsewhere():
        raise RuntimeError("this process runs its tools on this machine, not in an execution environment")
    code_execution = agent_runtime.agent_module("tools.code_execution_tool")
    env, _ = code_execution._get_or_create_env("default")
    result = env.execute(command, timeout=timeout, stdin_data=stdin)
    return {"output": str(result.get("output") or ""), "returncode": result.get("returncode")}
