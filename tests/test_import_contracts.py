"""The import contracts in pyproject.toml: every module of api has its place in the layers contract, and
`lint-imports` (what scripts/test.sh runs) refuses a module that has none or that imports a layer above it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def layers_contract(pyproject: Path) -> dict[str, Any]:
    """The contract that puts each module of api in a layer."""
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "layers" and c.get("containers") == ["api"]]
    return contract


def layered_modules(contract: dict[str, Any]) -> list[str]:
    return [name.strip() for layer in contract["layers"] for name in layer.replace("|", ":").split(":")]


def test_every_module_of_api_has_its_place_in_the_layers_contract():
    contract = layers_contract(REPO / "pyproject.toml")
    api = REPO / "api"
    modules = {path.stem for path in api.glob("*.py") if path.stem != "__init__"}
    modules |= {path.parent.name for path in api.glob("*/__init__.py")}
    listed = layered_modules(contract)
    assert contract.get("exhaustive") is True, "lint-imports itself refuses a module in no layer"
    assert sorted(modules - set(listed)) == [], "in no layer"
    assert sorted(set(listed) - modules) == [], "in a layer but no such module"
    assert len(listed) == len(set(listed)), "in two layers"


def lint_copy(tmp_path: Path, changes: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`lint-imports` over a copy of the repository's api and contracts with `changes` written into it."""
    shutil.copytree(REPO / "api", tmp_path / "api", ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for name, code in changes.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(tmp_path / "pyproject.toml")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_lint_imports_refuses_a_new_module_in_no_layer(tmp_path):
    result = lint_copy(tmp_path, {"api/brand_new.py": "from api import errors\n"})
    assert result.returncode != 0, result.stdout
    assert "are not listed as layers" in result.stdout
    assert "api.brand_new" in result.stdout


def test_lint_imports_refuses_a_store_module_importing_a_service(tmp_path):
    # No other contract forbids this import, and it closes no cycle: only the layers refuse it.
    state_lock = (REPO / "api" / "store" / "state_lock.py").read_text(encoding="utf-8")
    later = "\n\ndef later():\n    from api.services import workspace_git\n"
    result = lint_copy(tmp_path, {"api/store/state_lock.py": state_lock + later})
    assert result.returncode != 0, result.stdout
    assert "api.store.state_lock -> api.services.workspace_git" in result.stdout
