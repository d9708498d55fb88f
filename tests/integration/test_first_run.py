"""First run from an empty HOME: what ``talaria`` prints, and ``talaria doctor`` on a healthy and a broken
set-up. The installed console script runs with only ``HOME`` set (no ``HERMES_HOME``), as a new user's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from talaria_testing.fake_llm import FakeLLM, refused_base_url, write_hermes_config
from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

TALARIA = str(Path(sys.executable).parent / "talaria")


class NewUser(ServerProc):
    """The server as a new user starts it: ``talaria`` with an empty HOME and nothing else configured."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.home = root / "home"
        self.hermes_home = self.home / ".hermes"
        self.state_dir = self.hermes_home / "webui"
        self.session_dir = self.state_dir / "sessions"

    def environment(self) -> dict[str, str]:
        env = super().environment()
        # A new user has set none of these: the defaults (under HOME) apply.
        for name in (
            "HERMES_HOME",
            "HERMES_WEBUI_STATE_DIR",
            "HERMES_WEBUI_DEFAULT_WORKSPACE",
            "TALARIA_WORKSPACE_ROOTS",
        ):
            env.pop(name, None)
        env["HOME"] = str(self.home)
        return env

    def command(self) -> list[str]:
        return [TALARIA, "--port", "0"]

    def run(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        return subprocess.run(
            [TALARIA, *args],
            env={**self.environment(), **(env or {})},
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=120,
        )


def test_the_first_start_prints_where_everything_is_and_that_no_model_is_set(tmp_path):
    user = NewUser(tmp_path)
    user.home.mkdir()
    with user:
        assert user.get_json("/health")
        printed = [line.rstrip("\n") for line in user.output if not line[:4].isdigit()]
        assert user.stop() == 0
    assert printed[:6] == [
        f"Talaria listening on http://127.0.0.1:{user.port}",
        f"  state dir  {user.state_dir}",
        f"  workspace  {user.home} (sessions may use folders under {user.home})",
        f"  model      none configured: open the page to set one up, or run "
        f"`{Path(sys.executable).parent / 'hermes'} setup`, or add a `model:` section to "
        f"{user.hermes_home / 'config.yaml'}",
        f"  log file   {user.state_dir / 'logs' / 'talaria.log'}",
        "Stop with Ctrl+C (or SIGTERM). `talaria doctor` checks the set-up.",
    ]
    assert "startup recovery" in (user.state_dir / "logs" / "talaria.log").read_text(encoding="utf-8")


def test_doctor_says_which_process_holds_the_state_dir(tmp_path):
    user = NewUser(tmp_path)
    user.home.mkdir()
    with user:
        held = user.run("doctor")
    assert held.returncode == 1
    assert f"FAIL  state dir  {user.state_dir} is in use by process {user.proc.pid} (" in held.stdout
    free = user.run("doctor")
    assert f"ok    state dir  {user.state_dir}\n" in free.stdout


def test_doctor_passes_on_a_healthy_set_up(tmp_path):
    user = NewUser(tmp_path)
    with FakeLLM() as llm:
        write_hermes_config(user.hermes_home, llm.base_url)
        done = user.run("doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "All checks passed."
    assert f"ok    model      {llm.model} at {llm.base_url}, reachable" in lines


def test_doctor_names_each_broken_part_with_its_fix(tmp_path):
    user = NewUser(tmp_path)
    base_url = refused_base_url()
    write_hermes_config(user.hermes_home, base_url)
    (user.hermes_home / "state.db").write_bytes(b"this is not a database" * 64)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state dir should be")
    done = user.run("doctor", env={"HERMES_WEBUI_STATE_DIR": str(blocked)})
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert f"FAIL  state dir  {blocked} is not a folder\n" in out
    assert f"FAIL  state.db   {user.hermes_home / 'state.db'} cannot be read: " in out
    assert f"FAIL  model      fake-model at {base_url}: " in out
    assert f"fix: Talaria cannot reach the model endpoint {base_url} (the connection was refused)" in out
    assert out.count("fix: ") == 3 and out.endswith("3 check(s) failed.\n")
