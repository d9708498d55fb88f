"""The installed software: sdist → wheel → a fresh venv → ``talaria`` serves the page and its scripts.

The package is built as a user's ``pip install`` would (``python -m build``: the sdist first, then the
wheel from that sdist, each in an isolated build environment), installed with ``--no-deps`` into a new
venv, and started from that venv's ``talaria`` in a folder outside the repository. For speed the new
venv borrows the test venv's installed dependencies through a ``.pth`` line (the real hermes-agent and
the rest, not stubs); ``pip check`` confirms they satisfy the wheel's requirements.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from talaria_testing.server_proc import ServerProc

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
STATIC = REPO / "static"
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "artifacts", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".ruff_cache"
)


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{cmd} → {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


class InstalledServer(ServerProc):
    """The real server, started by the installed console script instead of the repository's files."""

    def __init__(self, root: Path, venv: Path):
        super().__init__(root)
        self.venv = venv

    def command(self) -> list[str]:
        return [str(self.venv / "bin" / "talaria"), "--host", self.host, "--port", "0"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("build")
    source = root / "source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)
    dist = root / "dist"
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)])
    return {"sdist": next(dist.glob("*.tar.gz")), "wheel": next(dist.glob("*.whl"))}


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(folder)])
    python = folder / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout
    (Path(purelib.strip()) / "borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    _run([*pip, "install", "-q", "--no-deps", str(built["wheel"])])
    _run([*pip, "check"])
    return folder


def _static_files() -> list[str]:
    return sorted(str(p.relative_to(STATIC)) for p in STATIC.rglob("*") if p.is_file())


def test_the_sdist_carries_the_page(built):
    with tarfile.open(built["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {f"static/{rel}" for rel in _static_files()} <= names


def test_the_installed_server_serves_the_page_and_every_script(venv, tmp_path):
    with InstalledServer(tmp_path, venv) as srv:
        status, headers, body = srv.request("GET", "/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert body == (STATIC / "index.html").read_bytes()
        for rel in _static_files():
            status, _, body = srv.request("GET", f"/static/{rel}")
            assert (status, body) == (200, (STATIC / rel).read_bytes()), rel
        assert srv.get_json("/health")


def test_installing_changes_no_other_project(venv, tmp_path):
    probe = (
        "import importlib.metadata as md, importlib.util as u, json;"
        "dist = md.distribution('talaria-webui');"
        "print(json.dumps({'groups': sorted({e.group for e in dist.entry_points}),"
        " 'top': sorted(set(dist.read_text('top_level.txt').split())),"
        " 'testing': u.find_spec('talaria_testing') is not None}))"
    )
    out = _run([str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path).stdout
    found = json.loads(out)
    assert found["groups"] == ["console_scripts"]  # no pytest11 plugin for every other test run
    assert found["top"] == ["api"]  # no generic top-level module such as `server`
    assert found["testing"] is False  # the test support stays in the repository
