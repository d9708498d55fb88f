"""The ``talaria`` command: a bad setting is one line and exit 2; ``--version``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from api.server import cli
from api.store import config
from talaria_testing.server_proc import REPO_DIR, ServerProc


def _talaria(tmp_path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    srv = ServerProc(tmp_path, env=env)  # only for its isolated environment (home, state dir)
    return subprocess.run(
        [sys.executable, str(REPO_DIR / "server.py"), *args],
        env=srv.environment(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "args,env,expected",
    [
        (["--port", "99999"], None, "talaria: --port 99999: must be between 0 and 65535"),
        (["--port", "eighty"], None, "talaria: --port eighty: must be an integer"),
        ([], {"TALARIA_PORT": "abc"}, "talaria: TALARIA_PORT='abc': must be an integer"),
        ([], {"TALARIA_LOG_LEVEL": "loud"}, "talaria: TALARIA_LOG_LEVEL='loud': must be one of DEBUG, INFO, WARNING, ERROR"),
        (["doctor"], {"TALARIA_SERVER_THREADS": "0"}, "talaria: TALARIA_SERVER_THREADS='0': must be at least 1"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_line_and_exit_2(tmp_path, args, env, expected):
    done = _talaria(tmp_path, *args, env=env)
    assert (done.returncode, done.stderr, done.stdout) == (2, expected + "\n", "")


def test_a_bad_setting_in_config_yaml_names_the_key(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("webui:\n  port: -1\n")
    with pytest.raises(
        config.SettingError, match=r"^webui.port: -1 in config.yaml: must be between 0 and 65535$"
    ):
        config.load_settings({"HERMES_HOME": str(home)})


def test_without_strict_a_bad_value_falls_back_to_the_default(tmp_path):
    values = config.load_settings({"HERMES_HOME": str(tmp_path), "TALARIA_PORT": "abc"}, strict=False)
    assert values["port"] == 8787


def test_version_prints_the_installed_version(tmp_path):
    done = _talaria(tmp_path, "--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"talaria {cli.version()}" and cli.version() != "unknown"


def test_help_names_each_settings_variable_and_config_key():
    text = cli.build_arg_parser().format_help()
    assert "  TALARIA_PASSWORD  |  webui.password\n" in text and "  HERMES_HOME\n" in text
    assert text.startswith("usage: talaria [--host HOST]") and "[doctor]" in text.splitlines()[0]
