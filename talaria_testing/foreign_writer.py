"""Another program rewriting a session file, run as its own process (the way hermes-webui saves).

    python -m talaria_testing.foreign_writer <sid>.json --title T --pin --append-user TEXT --keep 2

It parses the whole file, changes what it was asked to, drops the keys hermes-webui does not know
(Talaria's own fields and sidebar figures), recomputes ``message_count`` and
replaces the file atomically with indented JSON. It prints the new file's inode, size and mtime_ns.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

UNKNOWN_TO_HERMES_WEBUI = (
    "compression_generation",
    "compression_undo",
    "user_message_count",
    "last_message_at",
)


def rewrite(
    path: Path,
    *,
    title: str | None = None,
    pin: bool = False,
    append_user: str | None = None,
    keep: int | None = None,
) -> os.stat_result:
    doc = json.loads(path.read_text(encoding="utf-8"))
    for key in UNKNOWN_TO_HERMES_WEBUI:
        doc.pop(key, None)
    if title is not None:
        doc["title"] = title
        doc["manual_title"] = True
    if pin:
        doc["pinned"] = True
    if keep is not None:
        doc["messages"] = doc["messages"][:keep]
    if append_user is not None:
        doc["messages"].append({"role": "user", "content": append_user, "timestamp": time.time()})
    doc["message_count"] = len(doc["messages"])
    doc["updated_at"] = time.time()
    tmp = path.with_name(f"{path.name}.foreign.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc, ensure_ascii=False, indent=2))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return os.stat(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path", type=Path)
    parser.add_argument("--title")
    parser.add_argument("--pin", action="store_true")
    parser.add_argument("--append-user")
    parser.add_argument("--keep", type=int)
    args = parser.parse_args(argv)
    st = rewrite(args.path, title=args.title, pin=args.pin, append_user=args.append_user, keep=args.keep)
    print(json.dumps([st.st_ino, st.st_size, st.st_mtime_ns]))
    return 0


def run(path: Path, *args: str) -> None:
    """Run the writer as a separate process and wait for it."""
    import subprocess

    subprocess.run([sys.executable, "-m", "talaria_testing.foreign_writer", str(path), *args], check=True)


if __name__ == "__main__":
    sys.exit(main())
