"""The installable app's shell: which files the service worker may keep, and the version that renews it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from api.services import app_shell


def make_static(root: Path) -> Path:
    (root / "js").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html>")
    (root / "js" / "app.js").write_text("export {};")
    (root / "sw.js").write_text("// the worker")
    return root


def preamble(root: Path) -> dict:
    source = app_shell.worker_source(root, b"// body\n")
    head, _, body = source.partition(b";\n")
    assert body == b"// body\n"
    assert head.startswith(b"self.TALARIA_SHELL = ")
    return json.loads(head[len(b"self.TALARIA_SHELL = ") :])


def test_the_shell_is_the_page_and_its_static_files_without_the_worker_dotfiles_or_links(tmp_path):
    root = make_static(tmp_path / "static")
    (root / ".hidden.js").write_text("secret")
    (root / "js" / "linked.js").symlink_to(tmp_path / "outside.js")
    (tmp_path / "outside.js").write_text("outside")
    os.mkfifo(root / "js" / "pipe.js")
    assert preamble(root)["urls"] == ["/", "/static/index.html", "/static/js/app.js"]


def test_the_version_changes_when_a_static_file_changes_and_only_then(tmp_path):
    root = make_static(tmp_path / "static")
    first = preamble(root)["version"]
    assert preamble(root)["version"] == first
    (root / "js" / "app.js").write_text("export const changed = 1;")
    assert preamble(root)["version"] != first


def test_a_missing_static_folder_gives_an_empty_shell(tmp_path):
    assert preamble(tmp_path / "nowhere")["urls"] == []
