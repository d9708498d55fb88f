"""The installable app's shell: the page's static files a service worker may keep offline.

The worker (``static/sw.js``, served at ``/sw.js`` so its scope is the whole origin) is sent with a
preamble naming the shell's URLs and a version drawn from their sizes and modification times: when a
static file changes, the worker's bytes change, the browser installs it afresh and it drops the old cache.
Nothing under ``/api/`` is ever part of the shell.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

WORKER_FILE = "sw.js"
WORKER_URL = "/sw.js"


def shell_urls(root: Path) -> list[tuple[str, os.stat_result]]:
    """``/`` and every ``/static/...`` file under ``root`` (dotfiles, links and the worker left out), sorted."""
    found: list[tuple[str, os.stat_result]] = []
    stack = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            rel = f"{prefix}{entry.name}"
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), f"{rel}/"))
            elif entry.is_file(follow_symlinks=False) and rel != WORKER_FILE:
                found.append((f"/static/{rel}", entry.stat(follow_symlinks=False)))
    index = next((st for url, st in found if url == "/static/index.html"), None)
    if index is not None:
        found.append(("/", index))  # the page is fetched as "/", not by its file name
    return sorted(found)


def worker_source(root: Path, source: bytes) -> bytes:
    """The worker's script: ``source`` after a line declaring the shell's URLs and version."""
    shell = shell_urls(root)
    digest = hashlib.sha256(source)
    for url, st in shell:
        digest.update(f"{url}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    preamble = {"version": digest.hexdigest()[:16], "urls": [url for url, _ in shell]}
    return b"self.TALARIA_SHELL = " + json.dumps(preamble).encode() + b";\n" + source
