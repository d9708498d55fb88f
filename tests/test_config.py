"""Settings as data, the cache's safe eviction, locks, model/provider resolution."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from api import config


def test_settings_table_has_help_for_every_setting():
    assert all(s.help and s.name for s in config.SETTINGS)


def test_environment_overrides_yaml_and_default(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("webui:\n  port: 9100\n  sessions_cache_max: 7\n")
    values = config.load_settings({"HERMES_HOME": str(home), "TALARIA_PORT": "9200"})
    assert values["port"] == 9200
    assert values["sessions_cache_max"] == 7
    assert values["state_dir"] == str((home / "webui").resolve())
    assert values["host"] == "127.0.0.1"


def test_state_dir_comes_from_hermes_webui_state_dir(tmp_path):
    values = config.load_settings(
        {"HERMES_HOME": str(tmp_path), "HERMES_WEBUI_STATE_DIR": str(tmp_path / "st")}
    )
    assert values["state_dir"] == str(tmp_path / "st")


def test_tests_never_point_at_the_real_hermes_home():
    assert Path("~/.hermes").expanduser().resolve() != config.HERMES_HOME


def test_session_agent_lock_is_shared_per_id():
    a = config._get_session_agent_lock("x")
    assert config._get_session_agent_lock("x") is a
    assert config._get_session_agent_lock("y") is not a


@pytest.mark.parametrize(
    "model,provider,expected",
    [
        ("gpt", "openai", "@openai:gpt"),
        ("gpt", "", "gpt"),
        ("gpt", "default", "gpt"),
        ("@x:gpt", "openai", "@x:gpt"),
    ],
)
def test_model_with_provider_context(model, provider, expected):
    assert config.model_with_provider_context(model, provider) == expected


def test_resolve_model_provider_reads_the_agent_config(monkeypatch, tmp_path):
    (tmp_path / "config.yaml").write_text(
        "model:\n  provider: custom\n  base_url: http://127.0.0.1:1/v1\n  default: fake\n"
    )
    monkeypatch.setattr(config, "HERMES_HOME", tmp_path)
    assert config.resolve_model_provider("") == ("fake", "custom", "http://127.0.0.1:1/v1")
    assert config.resolve_model_provider("@openrouter:m") == ("m", "openrouter", None)


# Runs in a fresh interpreter: records every file opened under the given folders and every environment
# variable an ``api`` module reads, while importing each ``api`` module, then does what ``argv[3]`` says.
_IMPORT_PROBE = textwrap.dedent(
    """
    import json, os, sys

    watched = tuple(os.path.realpath(p) + os.sep for p in sys.argv[1:3])
    opened, env_reads = [], []

    def audit(event, args):
        if event in ("open", "os.listdir", "os.scandir") and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.path.realpath(os.fsdecode(args[0]))
            if (path + os.sep).startswith(watched):
                opened.append(path)

    sys.addaudithook(audit)
    api_dir = os.path.join(os.getcwd(), "api") + os.sep

    class Recording(type(os.environ)):
        def __getitem__(self, key):
            frame = sys._getframe(1)
            while frame and frame.f_code.co_filename.endswith(("os.py", "_collections_abc.py", "<frozen os>")):
                frame = frame.f_back
            if frame and frame.f_code.co_filename.startswith(api_dir):
                env_reads.append(key)
            return super().__getitem__(key)

    e = os.environ
    os.environ = Recording(e._data, e.encodekey, e.decodekey, e.encodevalue, e.decodevalue)

    import importlib, pkgutil, api
    for module in pkgutil.walk_packages(api.__path__, "api."):
        importlib.import_module(module.name)

    from api import config, models
    result = {"opened": list(opened), "env_reads": list(env_reads)}
    if sys.argv[3] == "use-without-configure":
        os.environ = e
        models.Session(session_id="probe", workspace="/", model="m", messages=[{"role": "user", "content": "hi"}]).save()
        models.SESSIONS.clear()
        with models.LOCK:
            pass
        loaded = models.Session.load("probe")
        result["used"] = {
            "paths": [str(p) for p in (models.STATE_DIR, models.SESSION_DIR, models.SESSION_INDEX_FILE)],
            "file": os.path.isfile(os.path.join(sys.argv[2], "sessions", "probe.json")),
            "loaded": [m["content"] for m in loaded.messages],
            "got": models.get_session("probe").session_id,
            "cached": list(models.SESSIONS),
            "sidebar": [row["session_id"] for row in models.all_sessions()],
        }
    elif sys.argv[3] == "configure":
        os.environ = e
        config.configure(config.load_settings(strict=False))
        result["paths"] = [str(p) for p in (config.SESSION_DIR, models.SESSION_DIR, config.STATE_DB_PATH)]
    print(json.dumps(result))
    """
)


def _probe_fresh_import(tmp_path: Path, then: str) -> dict:
    home, state = tmp_path / "home", tmp_path / "state"
    home.mkdir()
    state.mkdir()
    # Poisoned: a read of either would be seen by the audit hook, and would not parse.
    (home / "config.yaml").write_text("webui: [port: {{\n", encoding="utf-8")
    (home / ".env").write_text("\x00garbage\n", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "HERMES_HOME": str(home), "HERMES_WEBUI_STATE_DIR": str(state)}
    return _run_probe([_IMPORT_PROBE, str(home), str(state), then], env)


def _run_probe(args: list[str], env: dict[str, str]) -> dict:
    """What a fresh interpreter running ``python -c *args`` in the project folder printed last (JSON)."""
    done = subprocess.run(
        [sys.executable, "-c", *args],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_every_api_module_reads_no_file_and_no_environment_variable(tmp_path):
    found = _probe_fresh_import(tmp_path, "nothing")
    assert found["opened"] == []
    assert found["env_reads"] == []


def test_sessions_used_without_configure_live_in_the_folders_the_environment_names(tmp_path):
    """hermes-webui resolves its paths from the environment: code written for it saves a Session right
    after importing api.store.models, without calling configure (it got NotConfigured). Importing still reads
    nothing; the first use of a path reads HERMES_HOME / HERMES_WEBUI_STATE_DIR, never ~/.hermes."""
    found = _probe_fresh_import(tmp_path, "use-without-configure")
    assert found["opened"] == [] and found["env_reads"] == []
    state = (tmp_path / "state").resolve()
    assert found["used"] == {
        "paths": [str(state), str(state / "sessions"), str(state / "sessions" / "_index.json")],
        "file": True,
        "loaded": ["hi"],
        "got": "probe",
        "cached": ["probe"],
        "sidebar": ["probe"],
    }


def test_configure_points_config_and_models_paths_at_the_given_settings(tmp_path):
    found = _probe_fresh_import(tmp_path, "configure")
    state = (tmp_path / "state").resolve()
    assert found["paths"] == [
        str(state / "sessions"),
        str(state / "sessions"),
        str((tmp_path / "home").resolve() / "state.db"),
    ]


_LAZY_INSTALL_PROBE = textwrap.dedent(
    """
    import json, subprocess, sys
    from api.store import config
    config.configure(config.load_settings(strict=False))
    from tools import lazy_deps
    ran = []
    subprocess.run = lambda *args, **kwargs: ran.append(args) or (_ for _ in ()).throw(AssertionError("pip ran"))
    missing = [name for name in lazy_deps.LAZY_DEPS if lazy_deps.feature_missing(name)
               and not lazy_deps._unsupported_feature_reason(name)]
    allowed, outcome = lazy_deps._allow_lazy_installs(), "not tried"
    if not allowed:  # (when allowed, ensure would really install)
        try:
            lazy_deps.ensure(missing[0], prompt=False)
            outcome = "installed"
        except lazy_deps.FeatureUnavailable as exc:
            outcome = str(exc)
    print(json.dumps({"allowed": allowed, "outcome": outcome, "pip": len(ran)}))
    """
)


@pytest.mark.parametrize(("setting", "allowed"), [(None, False), ("1", True)])
def test_the_agent_installs_a_tools_package_only_when_the_setting_allows_it(tmp_path, setting, allowed):
    """Building an agent checks each tool's requirements, and the agent's text-to-speech check started
    `pip install edge-tts` from the server (a request reaching the package index, a process outliving the
    request). Talaria turns the agent's lazy installs off unless `agent_installs` is set."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "HERMES_HOME": str(home),
        "HERMES_WEBUI_STATE_DIR": str(tmp_path / "state"),
    }
    if setting is not None:
        env["TALARIA_AGENT_INSTALLS"] = setting
    found = _run_probe([_LAZY_INSTALL_PROBE], env)
    assert found["allowed"] is allowed
    if not allowed:
        assert "disabled" in found["outcome"] and found["pip"] == 0
