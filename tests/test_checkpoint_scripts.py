"""The host's checkpoint store as shell text (``api.rules.checkpoint_scripts``), run here by bash in a
``tmp_path`` folder with its own ``HOME``, as the environment's shell runs it there: snapshots dated by the
caller's clock and kept through the cut to the newest ``snapshots``, a first one of an empty folder, big files
and the agent's excluded folders left out, a listing of many ranges, one file's diff, a restore that removes
what the checkpoint did not hold (and the folders that leaves empty) and leaves unknown paths alone, names
that are not shell words, and no store or snapshot where there must be none."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path

import pytest

from api.rules import checkpoint_records, checkpoint_scripts, remote_output
from api.rules.checkpoint_scripts import Limits

SMALL = Limits(snapshots=3, file_mb=1, total_mb=500, files=1_000)


class Host:
    def __init__(self, root: Path):
        self.home = root / "home"
        self.work = self.home / "work"
        self.work.mkdir(parents=True)
        self.env = {"PATH": os.environ["PATH"], "HOME": str(self.home), "TMPDIR": str(root)}

    def run(self, script: str, stdin: bytes | None = None) -> tuple[int, bytes]:
        done = subprocess.run(
            ["bash", "-c", script], cwd=self.work, env=self.env, input=stdin, capture_output=True, timeout=60
        )
        return done.returncode, done.stdout

    def snapshot(self, reason: str, at: int, limits: Limits = SMALL) -> str:
        code, out = self.run(checkpoint_scripts.snapshot(reason, at, limits))
        assert code == 0, out
        return out.decode()

    def history(self) -> list[checkpoint_records.Point]:
        code, out = self.run(checkpoint_scripts.history())
        assert code == 0
        records = remote_output.records(out)
        assert records[0] == str(self.work.resolve())
        return checkpoint_records.points(records[2:])

    def changes(self, *ranges: tuple[str, str | None]) -> list[list[checkpoint_records.FileChange]]:
        code, out = self.run(checkpoint_scripts.changes(list(ranges), SMALL.file_mb))
        assert code == 0
        lines = out.decode().split("\n")[: len(ranges)]
        return [checkpoint_records.changes(base64.b64decode(line).decode()) for line in lines]

    def restore(self, commit: str, *paths: str) -> tuple[int, bytes]:
        listed = base64.b64encode(b"".join(p.encode() + b"\0" for p in paths))
        return self.run(checkpoint_scripts.restore(commit), listed)


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


def _statuses(rows):
    return [(row.path, row.status) for row in rows]


def test_snapshots_are_dated_by_the_callers_clock_and_keep_their_dates_through_the_cut(host):
    taken = []
    for n in range(5):
        (host.work / "a.txt").write_text(f"version {n}\n")
        taken.append(host.snapshot(f"before write_file {n}", 1_700_000_000 + 60 * n))
    history = host.history()
    assert [p.at for p in history] == [1_700_000_120, 1_700_000_180, 1_700_000_240]
    assert [p.reason for p in history] == [
        "before write_file 2",
        "before write_file 3",
        "before write_file 4",
    ]
    assert history[-1].hash == taken[-1]  # the newest keeps its hash: same tree, parent, date and message
    # Nothing changed since the newest: no checkpoint is added, and the newest is answered.
    assert host.snapshot("again", 1_700_001_000) == taken[-1]
    assert len(host.history()) == 3
    store = host.home / ".local" / "share" / "talaria" / "checkpoints" / "store"
    assert (store / "HEAD").is_file() and not (host.work / ".git").exists()


def test_an_empty_folder_gets_a_first_checkpoint_so_a_turn_making_its_first_files_can_be_restored(host):
    empty = host.snapshot("before write_file", 1_700_000_000)
    (host.work / "docs").mkdir()
    (host.work / "docs" / "new.md").write_text("# new\n")
    [rows] = host.changes((empty, None))
    assert _statuses(rows) == [("docs/new.md", "added")]
    assert host.restore(empty, "docs/new.md") == (0, b"1\n")
    assert list(host.work.iterdir()) == []  # the file, and the folder it left empty


def test_big_files_and_the_agents_excluded_folders_are_left_out(host):
    (host.work / "small.txt").write_text("s\n")
    (host.work / "big.bin").write_bytes(b"x" * (1024 * 1024 + 1))
    (host.work / "node_modules").mkdir()
    (host.work / "node_modules" / "dep.js").write_text("x\n")
    (host.work / ".env").write_text("SECRET=1\n")
    first = host.snapshot("s", 1_700_000_000)
    (host.work / "small.txt").write_text("t\n")
    (host.work / "big2.bin").write_bytes(b"y" * (1024 * 1024 + 1))
    [rows] = host.changes((first, None))
    assert _statuses(rows) == [("small.txt", "modified")]


def test_many_ranges_are_listed_in_one_command_in_their_order(host):
    (host.work / "keep.txt").write_text("1\n")
    one = host.snapshot("one", 1_700_000_000)
    (host.work / "keep.txt").write_text("2\n")
    (host.work / "gone.txt").write_text("g\n")
    two = host.snapshot("two", 1_700_000_010)
    (host.work / "gone.txt").unlink()
    first, second, whole = host.changes((one, two), (two, None), (one, None))
    assert _statuses(first) == [("gone.txt", "added"), ("keep.txt", "modified")]
    assert _statuses(second) == [("gone.txt", "deleted")]
    assert _statuses(whole) == [("keep.txt", "modified")]
    assert (first[1].insertions, first[1].deletions) == (1, 1)
    code, diff = host.run(checkpoint_scripts.diff(one, None, "keep.txt", 1))
    assert code == 0 and b"-1\n+2\n" in diff
    code, every = host.run(checkpoint_scripts.diff(one, None, None, 1))
    assert code == 0 and b"a/keep.txt" in every and b"gone.txt" not in every


def test_a_restore_puts_back_removes_and_leaves_unknown_paths_alone(host):
    odd = "it's $(touch pwned) *.txt\nname"
    (host.work / "a.txt").write_text("before\n")
    (host.work / odd).write_text("odd before\n")
    before = host.snapshot("before", 1_700_000_000)
    (host.work / "a.txt").write_text("after\n")
    (host.work / odd).unlink()
    (host.work / "made" / "deep").mkdir(parents=True)
    (host.work / "made" / "deep" / "x.txt").write_text("x\n")
    (host.work / "other.txt").write_text("not the turn's\n")
    code, out = host.restore(before, "a.txt", odd, "made/deep/x.txt", "never-there.txt")
    assert (code, out) == (0, b"3\n")
    assert (host.work / "a.txt").read_text() == "before\n"
    assert (host.work / odd).read_text() == "odd before\n"
    assert not (host.work / "made").exists()
    assert (host.work / "other.txt").read_text() == "not the turn's\n"  # not named: untouched
    assert not (host.work / "pwned").exists() and not (host.work / "*.txt").exists()
    assert host.restore(before) == (0, b"0\n")  # no path: nothing restored, not everything


def test_a_missing_store_or_checkpoint_and_broad_folders_answer_their_codes(host, tmp_path):
    assert host.history() == []  # no store yet: the folder and its key, no checkpoint
    assert host.run(checkpoint_scripts.changes([("ab" * 20, None)], 1))[0] == checkpoint_scripts.NO_STORE
    host.snapshot("s", 1_700_000_000)
    assert host.run(checkpoint_scripts.has_commit("ab" * 20))[0] == checkpoint_scripts.NO_COMMIT
    assert host.restore("ab" * 20, "a")[0] == checkpoint_scripts.NO_COMMIT
    home = Host(tmp_path / "other")
    home.work = home.home
    assert home.run(checkpoint_scripts.snapshot("s", 1, SMALL))[0] == checkpoint_scripts.TOO_BROAD
    for n in range(12):
        (host.work / f"f{n}").write_text("x")
    few = Limits(files=10)
    assert host.run(checkpoint_scripts.snapshot("s", 1, few))[0] == checkpoint_scripts.TOO_MANY


def test_a_commit_that_is_not_a_hash_never_reaches_a_script():
    for bad in ("HEAD", "ab;rm -rf ~", "AB12", "ab", "a" * 65):
        with pytest.raises(ValueError):
            checkpoint_scripts.restore(bad)
        with pytest.raises(ValueError):
            checkpoint_scripts.changes([("ab12", bad)], 1)


def test_a_snapshot_and_a_restore_run_as_one_command_and_the_snapshot_is_the_undo(host):
    (host.work / "a.txt").write_text("before\n")
    before = host.snapshot("before", 1_700_000_000)
    (host.work / "a.txt").write_text("after\n")
    script = checkpoint_scripts.snapshot_then_restore("pre-rollback snapshot", 1_700_000_100, SMALL, before)
    code, out = host.run(script, base64.b64encode(b"a.txt\0"))
    kept, _, count = out.partition(b"\0")
    assert (code, count) == (0, b"1\n")
    assert (host.work / "a.txt").read_text() == "before\n"
    assert [p.reason for p in host.history()] == ["before", "pre-rollback snapshot"]
    assert host.restore(kept.decode(), "a.txt") == (0, b"1\n")
    assert (host.work / "a.txt").read_text() == "after\n"
    # A checkpoint the store does not hold: the snapshot is taken, nothing is restored.
    code, out = host.run(checkpoint_scripts.snapshot_then_restore("s", 1, SMALL, "ab" * 20), b"")
    assert code == checkpoint_scripts.NO_COMMIT and (host.work / "a.txt").read_text() == "after\n"
