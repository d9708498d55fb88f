"""The changes of a turn that touched 1,000 files, through the server's route (``GET /api/rollback/turn``,
client-side time of the whole request on 127.0.0.1): the real agent, driven by the fake LLM, writes a
file in each of two turns (so the agent checkpoints before each); between its write and the end of the
first turn the files are changed as a build step would change them, and again after the second. Measured for the first turn (from its
checkpoint to the second's) and for the latest (from its checkpoint to the workspace now).

    .venv/bin/python bench/bench_turn_changes.py [--files 1000] [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.workspace_fixture import samples_ms  # noqa: E402
from talaria_testing.chat_client import chat, new_session, session  # noqa: E402
from talaria_testing.fake_llm import FakeLLM, Reply, agent_server  # noqa: E402


def _write(path: str) -> Reply:
    return Reply(tool_calls=[{"name": "write_file", "arguments": {"path": path, "content": "x\n"}}])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=9)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as llm:
        root = Path(tmp)
        env = {"TALARIA_WORKSPACE_ROOTS": str(root)}
        with agent_server(root, llm.base_url, toolsets="file", env=env) as server:
            space = server.workspace
            for i in range(opts.files):
                (space / f"f{i:05}.txt").write_text("old\n")
            sid = new_session(server)
            llm.script(_write("start.txt"), Reply(text="Started."))
            chat(server, sid, "start")
            for i in range(opts.files - 1):
                (space / f"f{i:05}.txt").write_text("new\nline\n")
            time.sleep(1.1)  # the next turn in another second than this one's checkpoint
            llm.script(_write("f09999.txt"), Reply(text="Again."))
            chat(server, sid, "again")
            for i in range(opts.files):
                (space / f"f{i:05}.txt").write_text("third\n")
            users = [row["_idx"] for row in session(server, sid)["messages"] if row["role"] == "user"]
            for label, turn in (("closed turn", users[0]), ("latest turn, to now", users[1])):
                url = f"/api/rollback/turn?session_id={sid}&turn={turn}"
                count = server.get_json(url)["files_changed"]
                ms = statistics.median(samples_ms(lambda url=url: server.request("GET", url), opts.runs))
                print(f"{label}: {count} files changed, median {ms:.1f} ms over {opts.runs} runs")
            url = f"/api/rollback/turns?session_id={sid}"
            ms = statistics.median(samples_ms(lambda: server.request("GET", url), opts.runs))
            print(f"the session's turn list: median {ms:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
