"""docs/modules.md against the code: every module has its row, and each row's last column ("imported by")
names exactly the modules that import it.

The rule the column follows (docs/modules.md says it too): a module's importers are the modules of the
table (every `.py` under `api/` but the packages' `__init__.py`, and `server.py`) whose code holds an import
statement naming it — at the top, inside a function (imported at call time) or under `TYPE_CHECKING`. The
column lists them in backticks by their dotted name below `api` (`store.models`, `server.py` for the entry
point), or says "—" when there is none; a module more than ``MANY_IMPORTERS`` modules import says how many
instead ("33 modules").
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MANY_IMPORTERS = 10
ROW = re.compile(r"^\| `(?P<name>[^`]+)` \| .* \| (?P<imported_by>[^|]*) \|$")
COUNT = re.compile(r"^(?P<count>\d+) modules$")


def table_rows(doc: str) -> list[tuple[str, str]]:
    """The module table's rows: the first column's path and the "imported by" column."""
    matches = (ROW.match(line.strip()) for line in doc.splitlines())
    return [(match["name"], match["imported_by"].strip()) for match in matches if match]


def table_modules(root: Path) -> dict[str, Path]:
    """The modules the table must list, by the name the "imported by" column gives them."""
    api = root / "api"
    modules = {
        ".".join(path.relative_to(api).with_suffix("").parts): path
        for path in sorted(api.rglob("*.py"))
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }
    if (root / "server.py").is_file():
        modules["server.py"] = root / "server.py"
    return modules


def row_name(name: str) -> str:
    """The table's first column for a module named as the "imported by" column names it."""
    return name if name.endswith(".py") else "api/" + name.replace(".", "/") + ".py"


def module_name(listed: str) -> str:
    """The "imported by" column's name for the table's first column."""
    return (
        listed if listed == "server.py" else ".".join(Path(listed).relative_to("api").with_suffix("").parts)
    )


def imported_modules(path: Path, root: Path) -> set[str]:
    """The names (below `api`) an import statement anywhere in the file names: modules and packages."""
    names: set[str] = set()
    here = path.relative_to(root).parent.parts  # ("api", "store") for api/store/models.py
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name[len("api.") :] for alias in node.names if alias.name.startswith("api."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(here[: len(here) - node.level + 1])
                parts = [*base, *(node.module.split(".") if node.module else [])]
            else:
                parts = (node.module or "").split(".")
            if parts[:1] != ["api"]:
                continue
            package = ".".join(parts[1:])
            if package:
                names.add(package)
            names.update(f"{package}.{alias.name}" if package else alias.name for alias in node.names)
    return names


def importers(root: Path) -> dict[str, set[str]]:
    """Each module of the table → the modules of the table that import it."""
    modules = table_modules(root)
    found: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for target in imported_modules(path, root) & found.keys() - {name}:
            found[target].add(name)
    return found


def disagreements(root: Path) -> list[str]:
    """What docs/modules.md says that the code does not do, one line each; empty when it is true."""
    rows = table_rows((root / "docs" / "modules.md").read_text(encoding="utf-8"))
    real = importers(root)
    listed_names = [listed for listed, _ in rows]
    problems = [
        f"{row_name(name)}: no row in the table" for name in real if row_name(name) not in listed_names
    ]
    problems += [
        f"{name}: two rows" for name in sorted({n for n in listed_names if listed_names.count(n) > 1})
    ]
    for listed, imported_by in rows:
        if listed.endswith("/"):
            if not (root / listed).is_dir():
                problems.append(f"{listed}: listed but no such folder")
            continue
        name = module_name(listed)
        if name not in real or row_name(name) != listed:
            problems.append(f"{listed}: listed but no such module")
            continue
        count = COUNT.match(imported_by)
        if count:
            if len(real[name]) <= MANY_IMPORTERS:
                problems.append(f"{listed}: says {imported_by}; {len(real[name])} import it, name them")
            elif int(count["count"]) != len(real[name]):
                problems.append(f"{listed}: says {imported_by}; {len(real[name])} import it")
            continue
        named = set(re.findall(r"`([^`]+)`", imported_by))
        if not named and imported_by != "—":
            problems.append(f"{listed}: imported-by column {imported_by!r} names no module")
        if len(real[name]) > MANY_IMPORTERS:
            problems.append(f"{listed}: {len(real[name])} modules import it; say '{len(real[name])} modules'")
            continue
        if named - real[name]:
            problems.append(f"{listed}: names {sorted(named - real[name])}, which do not import it")
        if real[name] - named:
            problems.append(f"{listed}: imported by {sorted(real[name] - named)}, not named")
    return problems


def test_the_module_table_is_true_to_the_code():
    assert importers(REPO)["server.cli"] == {"server.py"}, "the real imports are read"
    assert disagreements(REPO) == []


def write_tree(root: Path, files: dict[str, str], table: list[tuple[str, str]]) -> None:
    for name, code in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
    lines = ["| module | its one concern | imported by |", "|---|---|---|"]
    lines += [f"| `{name}` | a concern | {imported_by} |" for name, imported_by in table]
    (root / "docs").mkdir(exist_ok=True)
    (root / "docs" / "modules.md").write_text("# Modules\n\n" + "\n".join(lines) + "\n", encoding="utf-8")


FILES = {
    "api/__init__.py": "",
    "api/store/__init__.py": "",
    "api/store/files.py": "import json\n",
    "api/rules.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from api.store.files import X\n",
    "api/service.py": "def later():\n    from api.store import files\n    import api.rules as rules\n",
    "api/web/routes.py": "from ..service import later\nfrom .. import rules\n",
    "server.py": "from api.web.routes import main\n",
    "static/app.js": "",
}
TRUE_TABLE = [
    ("server.py", "—"),
    ("api/store/files.py", "`rules`, `service`"),
    ("api/rules.py", "`service`, `web.routes`"),
    ("api/service.py", "`web.routes`"),
    ("api/web/routes.py", "`server.py`"),
    ("static/", "—"),
]


def test_a_table_naming_every_importer_of_every_module_has_nothing_to_report(tmp_path):
    write_tree(tmp_path, FILES, TRUE_TABLE)
    assert disagreements(tmp_path) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"api/store/files.py": None}, "api/store/files.py: no row in the table"),
        ({"api/gone.py": "`web.routes`"}, "api/gone.py: listed but no such module"),
        ({"assets/": "—"}, "assets/: listed but no such folder"),
        (
            {"api/service.py": "`web.routes`, `server.py`"},
            "api/service.py: names ['server.py'], which do not import it",
        ),
        ({"api/store/files.py": "`service`"}, "api/store/files.py: imported by ['rules'], not named"),
        ({"api/rules.py": "`web.routes`"}, "api/rules.py: imported by ['service'], not named"),
        ({"api/web/routes.py": "—"}, "api/web/routes.py: imported by ['server.py'], not named"),
        (
            {"server.py": "the command line"},
            "server.py: imported-by column 'the command line' names no module",
        ),
        ({"api/store/files.py": "2 modules"}, "api/store/files.py: says 2 modules; 2 import it, name them"),
    ],
)
def test_a_row_the_code_contradicts_is_reported(tmp_path, change, problem):
    table = dict(TRUE_TABLE)
    for name, imported_by in change.items():
        if imported_by is None:
            del table[name]
        else:
            table[name] = imported_by
    write_tree(tmp_path, FILES, list(table.items()))
    assert disagreements(tmp_path) == [problem]


def test_a_module_with_two_rows_is_reported(tmp_path):
    write_tree(tmp_path, FILES, [*TRUE_TABLE, ("api/store/files.py", "`rules`, `service`")])
    assert disagreements(tmp_path) == ["api/store/files.py: two rows"]


def test_a_module_more_than_ten_modules_import_gives_their_exact_count(tmp_path):
    users = {f"api/user{n}.py": "from api import base\n" for n in range(MANY_IMPORTERS + 1)}
    rows = [(name, "—") for name in users]
    write_tree(
        tmp_path, {"api/base.py": "", **users}, [("api/base.py", f"{MANY_IMPORTERS + 1} modules"), *rows]
    )
    assert disagreements(tmp_path) == []
    write_tree(tmp_path, {}, [("api/base.py", f"{MANY_IMPORTERS} modules"), *rows])
    assert disagreements(tmp_path) == [
        f"api/base.py: says {MANY_IMPORTERS} modules; {MANY_IMPORTERS + 1} import it"
    ]
