"""Message versions beside their floor: an edit that keeps the replaced tail as a version, and a switch
between two versions, in sessions of 100, 1,000 and 5,000 messages; the edit and the switch fork halfway.

The floor is one save of the same session (``Session.save``, durable): an edit is that save plus the kept
tail's durable write, a switch that save plus the shown tail's write and the chosen tail's read.

    .venv/bin/python bench/bench_versions.py [--sizes 100,1000,5000] [--runs 7]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import api.store.models as M  # noqa: E402
from api.services import session_ops, session_versions
from api.store import config  # noqa: E402
from bench.bench_store import make_messages, timed  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="talaria-bench-versions-"))
    print(f"{'messages':>9} {'save (floor) ms':>16} {'edit ms':>9} {'switch ms':>10}")
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            folder = root / f"n{n}"
            folder.mkdir()
            # Every module's paths (not only api.store.models'): nothing of the bench lands in ~/.hermes.
            config.configure(
                config.load_settings(
                    environ={"HERMES_HOME": str(folder), "HERMES_WEBUI_STATE_DIR": str(folder)}
                )
            )
            Path(M.SESSION_DIR).mkdir(parents=True, exist_ok=True)
            M.SESSIONS.clear()
            msgs = make_messages(n)
            sid, fork = f"v{n}", n // 2 - (n // 2) % 2
            M.Session(session_id=sid, title="bench", messages=list(msgs)).save()
            session = M.get_session(sid)
            floor = timed(lambda _c: session.save(), args.runs)

            def edit(_c) -> None:
                session_ops.truncate_session(sid, fork)
                again = M.get_session(sid)
                again.messages = [*again.messages, *msgs[fork:]]  # the new version, as long as the old one
                again.save()

            # The edit is measured with its re-growth save; the second save is the floor's cost again.
            edit_ms = timed(edit, args.runs) - floor
            sid2 = sid + "s"  # two versions of equal length, switched back and forth
            M.Session(session_id=sid2, title="bench", messages=list(msgs)).save()
            session_ops.truncate_session(sid2, fork)
            grown = M.get_session(sid2)
            grown.messages = [*grown.messages, *msgs[fork:]]
            grown.save()
            toggle = {"to": 0}

            def switch2(_c) -> None:
                session_versions.switch_version(sid2, fork, toggle["to"])
                toggle["to"] = 1 - toggle["to"]

            switch_ms = timed(switch2, args.runs)
            print(f"{n:>9} {floor:>16.2f} {edit_ms:>9.2f} {switch_ms:>10.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
