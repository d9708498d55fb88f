"""The shell half of the path rule (``environment_shell.locate``), run by this machine's bash as the host's
would run it: a path resolves inside the folder or the script stops with OUTSIDE, whatever the name holds
(quotes, ``$(...)``, spaces, a trailing newline, a leading dash) and wherever a link points."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.rules import remote_output
from api.services import environment_shell
from api.services.environment_shell import MISSING, OUTSIDE


def _locate(folder: Path, relative: str, *, must_exist: bool = True) -> tuple[int, list[str]]:
    script = f"cd -- {folder} || exit 3\n" + environment_shell.locate(relative, must_exist=must_exist)
    done = subprocess.run(
        ["bash", "-c", remote_output.framed(script)], capture_output=True, text=True, check=True
    )
    framed = remote_output.unframed(done.stdout)
    assert framed is not None, done.stdout
    data, code = framed
    return code, remote_output.records(data)


@pytest.fixture
def workspace(tmp_path):
    (tmp_path / "secret.txt").write_text("outside\n")
    folder = tmp_path / "work"
    (folder / "inner").mkdir(parents=True)
    (folder / "out").symlink_to("..")
    (folder / "secret_link.txt").symlink_to("../secret.txt")
    (folder / "inner_link").symlink_to("inner")
    return folder


@pytest.mark.parametrize(
    "path", ["../secret.txt", "inner/../../secret.txt", "out/secret.txt", "secret_link.txt", "out"]
)
def test_a_path_that_resolves_out_of_the_folder_stops_the_script(workspace, path):
    assert _locate(workspace, path, must_exist=False)[0] == OUTSIDE


def test_a_link_inside_resolves_to_its_target_and_a_missing_file_only_where_allowed(workspace):
    assert _locate(workspace, "inner_link") == (0, [str(workspace), str(workspace / "inner")])
    assert _locate(workspace, "inner/gone.txt")[0] == MISSING
    assert _locate(workspace, "inner/gone.txt", must_exist=False) == (
        0,
        [str(workspace), str(workspace / "inner" / "gone.txt")],
    )
    assert _locate(workspace, "") == (0, [str(workspace), str(workspace)])


NAMES = st.text(
    alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1, max_size=30
).filter(lambda name: name not in (".", ".."))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(NAMES)
def test_any_name_resolves_to_itself(workspace, name):
    path = workspace / "inner" / name
    path.write_text("x")
    try:
        assert _locate(workspace, f"inner/{name}") == (0, [str(workspace), str(path)])
    finally:
        path.unlink()
