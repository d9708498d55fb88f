"""Promise 10 checks on a real tmpfs: a save that fails (read-only, full) leaves memory equal to the file.

    with tmpfs_sessions(tmp_path) as (mnt, sessions):
        ...make a session...
        fails_and_changes_nothing(mnt, sid, lambda: session_ops.clear_session(sid), READ_ONLY)

After the failed operation the file is byte-for-byte unchanged, ``GET /api/session`` (its domain call)
shows the file's state, and a later successful save (a pin) writes nothing of the failed change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api.rules import jsonio
from api.rules.errors import ApiError
from api.services import session_catalogue, session_views
from talaria_testing.faults import fill, remount, small_tmpfs
from talaria_testing.scenarios import bound


@contextlib.contextmanager
def tmpfs_sessions(tmp_path: Path, size: str = "2m") -> Iterator[tuple[Path, Path]]:
    """A real small tmpfs with ``api.store.models`` bound to its ``sessions`` folder; skips where mounting is refused."""
    with small_tmpfs(tmp_path / "mnt", size) as mnt:
        if mnt is None:
            pytest.skip("mounting a tmpfs is not permitted here")
        with bound(mnt) as sessions:
            yield mnt, sessions


@contextlib.contextmanager
def read_only(mnt: Path) -> Iterator[None]:
    remount(mnt, "ro")
    try:
        yield
    finally:
        remount(mnt, "rw")


@contextlib.contextmanager
def disk_full(mnt: Path) -> Iterator[None]:
    filler = fill(mnt)
    try:
        yield
    finally:
        filler.unlink()


READ_ONLY = read_only
DISK_FULL = disk_full
FAULTS = {"read_only": READ_ONLY, "disk_full": DISK_FULL}


def _visible(doc: dict) -> dict:
    return {
        "messages": [(m.get("role"), m.get("content")) for m in doc.get("messages") or []],
        "title": doc.get("title"),
        "archived": bool(doc.get("archived")),
    }


def fails_and_changes_nothing(
    mnt: Path, sid: str, operation: Callable[[], Any], fault: Callable[[Path], Any]
) -> None:
    path = Path(mnt) / "sessions" / f"{sid}.json"
    before = path.read_bytes()
    with fault(mnt), pytest.raises((OSError, ApiError)) as caught:
        operation()
    if isinstance(caught.value, ApiError):  # a domain wrapper: it must still be the failed save
        assert any(w in caught.value.message.lower() for w in ("read-only", "space")), caught.value.message
    assert path.read_bytes() == before, "the failed operation changed the file"
    on_disk = jsonio.loads(before)
    shown = session_views.get_session_payload(sid)["session"]
    assert _visible(shown) == _visible(on_disk), "GET shows a change that was never saved"
    session_catalogue.set_flag(sid, "pinned", not on_disk.get("pinned"))
    after = jsonio.loads(path.read_bytes())
    assert _visible(after) == _visible(on_disk), "a later pin wrote the change that failed"
    assert after["pinned"] is (not on_disk.get("pinned"))
