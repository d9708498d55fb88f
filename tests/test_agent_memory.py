"""The agent's memory files through the page: where they are, a durable write, and the refusal to
overwrite a change made since the page read the file (in process, on the test's own HERMES_HOME; a real
agent racing the page is in tests/integration/test_agent_memory.py)."""

from __future__ import annotations

import os
import threading

import pytest

from api.agent import agent_memory, agent_runtime
from api.rules.errors import BadRequest, Conflict


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    """Each test gets an empty agent home (the agent resolves its home from HERMES_HOME at each call)."""
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "hermes_home"))


def _files() -> dict[str, dict]:
    return {row["target"]: row for row in agent_memory.read_all()["files"]}


def test_the_three_files_are_where_the_agent_reads_them():
    paths = {entry.target: entry.path for entry in agent_memory.memory_files()}
    memory_dir = agent_runtime.agent_module("tools.memory_tool").get_memory_dir()
    assert paths["memory"] == memory_dir / "MEMORY.md" and paths["user"] == memory_dir / "USER.md"
    assert paths["soul"].name == "SOUL.md" and paths["soul"].parent == memory_dir.parent
    assert _files()["memory"] == {
        "target": "memory",
        "name": "MEMORY.md",
        "label": "The agent's notes",
        "exists": False,
        "content": "",
        "version": "",
        "chars": 0,
        "limit": 2200,
    }


def test_a_write_from_the_version_read_lands_and_gives_the_new_version():
    written = agent_memory.write("user", "Prefers short answers.", "")
    assert written["exists"] and written["content"] == "Prefers short answers."
    assert _files()["user"]["version"] == written["version"] != ""
    again = agent_memory.write("user", "Prefers short answers.\n§\nWorks in Rust.", written["version"])
    assert _files()["user"]["content"].endswith("Works in Rust.") and again["version"] != written["version"]


def test_a_write_from_an_older_version_is_refused_with_both_texts():
    first = agent_memory.write("memory", "one", "")
    agent_memory.memory_files()[0].path.write_text("one\n§\nwritten by the agent", encoding="utf-8")
    with pytest.raises(Conflict) as refused:
        agent_memory.write("memory", "the person's text", first["version"])
    assert refused.value.status == 409
    assert refused.value.extra["current"]["content"] == "one\n§\nwritten by the agent"
    assert refused.value.extra["yours"] == "the person's text"
    assert _files()["memory"]["content"] == "one\n§\nwritten by the agent"


def test_the_agents_limit_holds_for_the_persons_edit_but_not_for_soul():
    with pytest.raises(BadRequest, match="at most 1,375 characters"):
        agent_memory.write("user", "x" * 1376, "")
    soul = _files()["soul"]  # the agent writes a default identity into a new home
    assert agent_memory.write("soul", "y" * 5000, soul["version"])["chars"] == 5000


@pytest.mark.parametrize(
    "target, content, base", [("notes", "x", ""), ("memory", 5, ""), ("memory", "x", None), (None, "x", "")]
)
def test_bad_input_is_refused_and_changes_nothing(target, content, base):
    with pytest.raises(BadRequest):
        agent_memory.write(target, content, base)
    files = _files()
    assert not files["memory"]["exists"] and not files["user"]["exists"]


def test_a_link_or_fifo_in_place_of_a_file_is_refused_not_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret", encoding="utf-8")
    memory = agent_memory.memory_files()[0].path
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.symlink_to(outside)
    with pytest.raises(BadRequest):
        agent_memory.read_all()
    memory.unlink()
    os.mkfifo(memory)
    try:
        with pytest.raises(BadRequest, match="not a regular file"):
            agent_memory.read_all()
    finally:
        memory.unlink()


def test_the_write_waits_for_the_memory_tools_own_lock():
    """The agent's memory tool rewrites MEMORY.md under its file lock; the page's write takes the same
    lock, so it sees the agent's write (and refuses) rather than racing it."""
    entry = agent_memory.memory_files()[0]
    entry.path.parent.mkdir(parents=True, exist_ok=True)
    lock = agent_runtime.agent_module("tools.memory_tool").MemoryStore._file_lock
    outcome: list[str] = []
    with lock(entry.path):
        writer = threading.Thread(
            target=lambda: outcome.append(_try_write(entry)),
            daemon=True,
        )
        writer.start()
        writer.join(0.3)
        assert writer.is_alive()  # waiting for the lock
        entry.path.write_text("the agent's entry", encoding="utf-8")
    writer.join(5)
    assert outcome == ["409"] and entry.path.read_text(encoding="utf-8") == "the agent's entry"


def _try_write(entry) -> str:
    try:
        agent_memory.write(entry.target, "the page's text", "")
    except Conflict:
        return "409"
    return "200"
