"""hermes-webui's module names (``api.config``, ``api.models``, ``api.routes``, ``api.session_ops``,
``api.session_recovery``) are faces over the modules that hold the code: what a program or a test written for
hermes-webui reads, patches and runs through them reaches the code.

A face's own ``__dict__`` is empty, and ``monkeypatch`` restores what it finds there unless the name is a
data descriptor of the module's type: before faces passed every name through a property, undoing a patch of
``api.models.SESSION_DIR`` deleted ``SESSION_DIR`` from the store for every later test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import api.config
import api.models
import api.routes
import api.session_ops
import api.session_recovery
from api.services import session_ops, session_recovery
from api.store import config, models
from api.web import routes

FACES = [
    (api.config, config),
    (api.models, models),
    (api.routes, routes),
    (api.session_ops, session_ops),
    (api.session_recovery, session_recovery),
]


@pytest.mark.parametrize(("face", "home"), FACES, ids=lambda m: m.__name__)
def test_a_face_reads_every_public_name_of_the_module_behind_it(face, home):
    public = [name for name in vars(home) if not name.startswith("__")]
    assert public
    for name in public:
        assert getattr(face, name) is getattr(home, name), name
    assert set(public) <= set(dir(face))


def test_a_patch_through_a_face_reaches_the_code_and_its_undo_restores_it(tmp_path):
    before = api.models.SESSION_DIR
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api.models, "SESSION_DIR", tmp_path)
        patch.setattr(api.models, "SESSION_INDEX_FILE", tmp_path / "_index.json")
        assert models.store().session_dir == tmp_path
        assert api.models.SESSION_DIR == api.config.SESSION_DIR == tmp_path
        session = api.models.Session(session_id="through_the_face", workspace=str(tmp_path), messages=[])
        session.save()
        assert (tmp_path / "through_the_face.json").is_file()
        with api.models.LOCK:
            api.models.SESSIONS.pop("through_the_face", None)
    assert models.store().session_dir == before
    assert before == api.models.SESSION_DIR


def test_a_function_patched_through_a_face_is_the_one_the_code_calls(monkeypatch):
    monkeypatch.setattr(api.config, "resolve_model_provider", lambda model: ("patched", "p", None))
    assert config.resolve_model_provider("anything") == ("patched", "p", None)
    monkeypatch.undo()
    assert config.resolve_model_provider.__module__ == "api.store.config"


def test_a_name_set_and_deleted_through_a_face_is_set_and_deleted_behind_it():
    api.routes.ADDED_BY_A_TEST = 1
    assert routes.ADDED_BY_A_TEST == 1
    del api.routes.ADDED_BY_A_TEST
    assert not hasattr(routes, "ADDED_BY_A_TEST")


def test_the_recovery_command_line_runs_through_its_face(tmp_path):
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "api.session_recovery", "--audit", "--session-dir", str(sessions)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
        env={
            "PATH": "/usr/bin:/bin",
            "HERMES_HOME": str(tmp_path / "home"),
            "HERMES_WEBUI_STATE_DIR": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stderr
