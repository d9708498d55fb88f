"""The write paths the durability suite attacks, each as a scenario: build a state folder, then run one operation.

A scenario's ``build(sessions, n)`` runs in the test process and returns a small JSON-able ``info`` dict;
its ``run(sessions, info)`` is the operation under attack (in a killed child, under the file-system
recorder, or once in process as the reference). Both call the real store through its public names,
bound to ``<root>/sessions`` by :func:`bound`. Message rows are deterministic, so every run of an
operation produces the same transcript.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from talaria_testing.fsrecorder import FsRecorder

SID = "dur1"
OTHER = "dur2"
BASE_TS = 1_700_000_000.0

# What a scenario's operation is allowed to leave behind (see talaria_testing.promises).
GROW = "grow"  # the transcript grows or only metadata changes
DELIBERATE = "deliberate"  # undo, retry, truncate, clear: a shrink the person asked for
COMPRESS = "compress"  # compress, uncompress: only the context changes
LOSS = "loss"  # a save that shrinks without provenance: recovery must bring the old file back
RECOVERY = "recovery"  # the operation is startup recovery itself: the backup must end up live
DELETE = "delete"  # the session leaves the folder and must never come back
UNDELETE = "undelete"  # a deleted session comes back from the trash
KINDS = (GROW, DELIBERATE, COMPRESS, LOSS, RECOVERY, DELETE, UNDELETE)


def message(i: int, tag: str = "m") -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    body = " ".join(f"{tag}{i}w{k}" for k in range(3 + (i * 7) % 23))
    return {"role": role, "content": f"{tag} {i}: {body}", "timestamp": BASE_TS + i}


def messages(n: int, start: int = 0, tag: str = "m") -> list[dict]:
    return [message(i, tag) for i in range(start, start + n)]


@contextlib.contextmanager
def bound(root: Path, *, restore: bool = True) -> Iterator[Path]:
    """A store on ``<root>/sessions`` in use, with the fake agent installed and index flushes deferred.

    On exit (with ``restore``) the pending index rows are flushed into the folder and everything is put back.
    """
    import api.store.config as config
    import api.store.models as models
    from api.store import session_store as store_module
    from talaria_testing.scripted_compressor import install_scripted_compressor

    sessions = Path(root) / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    mp = pytest.MonkeyPatch()
    built = store_module.Store(sessions, models.Session)
    previous = store_module.use(built)
    try:
        mp.setitem(config.SETTINGS_VALUES, "index_flush_delay", 3600.0)
        # The fake agent lives in this process's sys.modules: its calls run here, not in a worker process.
        mp.setitem(config.SETTINGS_VALUES, "agent_workers", 0)
        install_scripted_compressor(mp)
        yield sessions
    finally:
        if restore:
            built.index.forget(sessions)
            store_module.use(previous)
            mp.undo()


def copy_state(src_root: Path, dst_root: Path) -> None:
    """A fresh copy of a state folder (mtimes kept, so the index's file signatures stay valid)."""
    shutil.copytree(src_root, dst_root, symlinks=True)


# ---------------------------------------------------------------------- building blocks


def _new(sid: str, msgs: list[dict], title: str = "Durability") -> None:
    from api.store import models

    models.Session(session_id=sid, title=title, model="fake-model", messages=msgs).save()


def _base(sessions: Path, n: int) -> dict:
    _new(SID, messages(n))
    _new(OTHER, messages(4, tag="o"), title="Bystander")
    return {}


def _get(sid: str = SID):
    from api.store import models

    return models.get_session(sid)


def _append(k: int = 2) -> None:
    s = _get()
    start = len(s.messages)
    s.messages.extend(messages(k, start=1000 + start))
    s.save()


def _loss(keep: int) -> None:
    """A save that drops rows without any provenance: the bug recovery exists for (#1558)."""
    s = _get()
    s.messages = s.messages[:keep]
    s.save()


def _compress() -> dict:
    from api.services import compression

    return compression.manual_compress(SID)


def _corrupt_live(sessions: Path, data: bytes) -> None:
    (sessions / f"{SID}.json").write_bytes(data)


TORN = b'{"session_id": "dur1", "title": "torn", "messages": [{"role": "user", "content": "half'


# ---------------------------------------------------------------------- builds


def build_plain(sessions: Path, n: int) -> dict:
    return _base(sessions, n)


def build_empty(sessions: Path, n: int) -> dict:
    _new(OTHER, messages(4, tag="o"), title="Bystander")
    return {}


def build_compressed(sessions: Path, n: int) -> dict:
    _base(sessions, n)
    _compress()
    _append(2)
    return {}


def build_after_undo(sessions: Path, n: int) -> dict:
    from api.services import session_ops

    _base(sessions, n)
    session_ops.undo_last(SID)
    _append(2)
    return {}


def build_lost(sessions: Path, n: int) -> dict:
    _base(sessions, n)
    _loss(max(1, n // 3))
    return {}


def build_lost_corrupt(sessions: Path, n: int) -> dict:
    build_lost(sessions, n)
    _corrupt_live(sessions, TORN)
    return {}


def build_lost_orphan(sessions: Path, n: int) -> dict:
    build_lost(sessions, n)
    (sessions / f"{SID}.json").unlink()
    return {}


def build_lost_compressed(sessions: Path, n: int) -> dict:
    build_compressed(sessions, n)
    _loss(max(1, n // 3))
    return {}


def build_corrupt(sessions: Path, n: int) -> dict:
    _base(sessions, n)
    _corrupt_live(sessions, TORN)
    return {}


def build_deleted(sessions: Path, n: int) -> dict:
    from api.services import session_catalogue, session_ops

    _base(sessions, n)
    session_ops.undo_last(SID)  # leaves a .bak behind, so an orphan backup could spring back
    return {"undo_token": session_catalogue.delete_session(SID)["undo_token"]}


def build_streaming(sessions: Path, n: int) -> dict:
    """A turn in flight: the user row written ahead, a partial answer checkpointed."""
    _base(sessions, n)
    s = _get()
    s.messages.append(message(len(s.messages) + 2000))
    s.active_stream_id = "stream1"
    s.pending_user_message = s.messages[-1]["content"]
    s.pending_started_at = BASE_TS + 5000
    s.messages.append(
        {"role": "assistant", "content": "partial ans", "timestamp": BASE_TS + 5001, "_partial": True}
    )
    s.save()
    return {}


# ---------------------------------------------------------------------- operations


def run_grow(sessions: Path, info: dict) -> None:
    _append(2)


def run_first_save(sessions: Path, info: dict) -> None:
    _new(SID, messages(6))


def run_loss(sessions: Path, info: dict) -> None:
    _loss(max(1, len(_get().messages) // 3))


def run_over_corrupt(sessions: Path, info: dict) -> None:
    _new(SID, messages(8, tag="fresh"))


def run_index_flush(sessions: Path, info: dict) -> None:
    from api.store import models

    s = _get()
    s.title = "Renamed for the index"
    s.save()
    store = models.store()
    store.index.flush(store.index_file)


def run_rename(sessions: Path, info: dict) -> None:
    from api.services import session_catalogue

    session_catalogue.rename_session(SID, "A new title")


def run_compress(sessions: Path, info: dict) -> None:
    _compress()


def run_uncompress(sessions: Path, info: dict) -> None:
    from api.services import compression

    compression.uncompress(SID)


def run_undo(sessions: Path, info: dict) -> None:
    from api.services import session_ops

    session_ops.undo_last(SID)


def run_retry(sessions: Path, info: dict) -> None:
    from api.services import session_ops

    session_ops.retry_last(SID)


def run_truncate(sessions: Path, info: dict) -> None:
    from api.services import session_ops

    session_ops.truncate_session(SID, 3)


def run_clear(sessions: Path, info: dict) -> None:
    from api.services import session_ops

    session_ops.clear_session(SID)


def run_recovery(sessions: Path, info: dict) -> None:
    from api.services.session_recovery import recover_all_sessions_on_startup

    recover_all_sessions_on_startup(sessions, rebuild_index=True)


def run_delete(sessions: Path, info: dict) -> None:
    from api.services import session_catalogue

    session_catalogue.delete_session(SID)


def run_undelete(sessions: Path, info: dict) -> None:
    from api.services import session_catalogue

    session_catalogue.restore_deleted(info["undo_token"])


def run_checkpoint(sessions: Path, info: dict) -> None:
    """A streaming checkpoint: the partial answer grows (the shape api.services.streaming saves every few seconds)."""
    s = _get()
    s.messages[-1] = dict(s.messages[-1], content=s.messages[-1]["content"] + "wer, and more of it")
    s.save()


def run_final_merge(sessions: Path, info: dict) -> None:
    """The turn's end: the partial row becomes the answer, pending fields clear, one save."""
    s = _get()
    s.messages[-1] = {"role": "assistant", "content": "the complete answer", "timestamp": BASE_TS + 5002}
    s.active_stream_id = None
    s.pending_user_message = None
    s.pending_started_at = None
    s.save()


# ---------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    build: Callable[[Path, int], dict]
    run: Callable[[Path, dict], Any]
    note: str = ""


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("save_grow", GROW, build_plain, run_grow, "Session.save, growing"),
    Scenario("save_first", GROW, build_empty, run_first_save, "first save of a new session"),
    Scenario("save_shrink_loss", LOSS, build_plain, run_loss, "shrinking save: .bak, then the live file"),
    Scenario(
        "save_shrink_loss_compressed",
        LOSS,
        build_compressed,
        run_loss,
        "genuine loss after a manual compression",
    ),
    Scenario(
        "save_over_corrupt",
        GROW,
        build_corrupt,
        run_over_corrupt,
        "save over an unparsable file (kept aside)",
    ),
    Scenario("index_flush", GROW, build_plain, run_index_flush, "save + _index.json flush"),
    Scenario("rename", GROW, build_plain, run_rename, "title change + save"),
    Scenario("checkpoint", GROW, build_streaming, run_checkpoint, "turn checkpoint (partial answer grows)"),
    Scenario("final_merge", GROW, build_streaming, run_final_merge, "turn end: merge + pending cleared"),
    Scenario("compress", COMPRESS, build_plain, run_compress, "manual compress (fake agent)"),
    Scenario("compress_after_undo", COMPRESS, build_after_undo, run_compress, "compress after an undo"),
    Scenario("uncompress", COMPRESS, build_compressed, run_uncompress, "uncompress"),
    Scenario("undo", DELIBERATE, build_plain, run_undo, "undo"),
    Scenario("retry", DELIBERATE, build_plain, run_retry, "retry"),
    Scenario("truncate", DELIBERATE, build_plain, run_truncate, "truncate (edit)"),
    Scenario("clear", DELIBERATE, build_plain, run_clear, "clear"),
    Scenario("undo_after_compress", DELIBERATE, build_compressed, run_undo, "undo on a compressed session"),
    Scenario("restore", RECOVERY, build_lost, run_recovery, "startup recovery restores a loss"),
    Scenario(
        "restore_compressed",
        RECOVERY,
        build_lost_compressed,
        run_recovery,
        "recovery of a compressed session",
    ),
    Scenario(
        "restore_corrupt", RECOVERY, build_lost_corrupt, run_recovery, "recovery over a corrupt live file"
    ),
    Scenario("restore_orphan", RECOVERY, build_lost_orphan, run_recovery, "recovery of an orphan backup"),
    Scenario("delete", DELETE, build_plain, run_delete, "delete (tombstone, move to trash)"),
    Scenario("undelete", UNDELETE, build_deleted, run_undelete, "undo a delete"),
)


def run_in_place_write(sessions: Path, info: dict) -> None:
    """Mutant, not a Talaria path: rewrite the live file in place, as a naive store would (the suite must catch it)."""
    from api.rules import jsonio
    from api.store import atomic

    s = _get()
    s.messages.extend(messages(2, start=900))
    data = jsonio.dumps_document(s.to_payload())
    path = sessions / f"{SID}.json"
    with open(path, "r+b") as fh:
        fh.truncate(0)
        atomic._step("tmp_created", path)
        fh.write(data[: len(data) // 2])
        fh.flush()
        atomic._step("tmp_written", path)
        fh.write(data[len(data) // 2 :])
        fh.flush()
        os.fsync(fh.fileno())
        atomic._step("tmp_fsynced", path)


MUTANTS: tuple[Scenario, ...] = (
    Scenario("mutant_in_place_write", GROW, build_plain, run_in_place_write, "naive in-place write"),
)
BY_NAME = {s.name: s for s in SCENARIOS + MUTANTS}


def build_template(scenario: Scenario, root: Path, n: int) -> dict:
    """Build the scenario's starting state in ``root`` (in this process) and return its ``info``."""
    with bound(root) as sessions:
        info = scenario.build(sessions, n)
    return info


def record(scenario: Scenario, template: Path, root: Path, info: dict) -> tuple[FsRecorder, dict[str, bytes]]:
    """Run the scenario's operation on a copy of ``template`` in ``root`` under the file-system recorder:
    the recording and the files the operation left."""
    copy_state(template, root)
    with bound(root) as sessions:
        with FsRecorder(root) as rec:
            scenario.run(sessions, info)
        final = files_under(root)
    return rec, final


def run_in_process(scenario: Scenario, root: Path, info: dict) -> None:
    with bound(root) as sessions:
        scenario.run(sessions, info)


def files_under(root: Path) -> dict[str, bytes]:
    """Every regular file below ``root`` by relative path (symlinks are recorded by target text)."""
    out: dict[str, bytes] = {}
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = b"->" + os.readlink(full).encode()
            else:
                with open(full, "rb") as fh:
                    out[rel] = fh.read()
    return out
