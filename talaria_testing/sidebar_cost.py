"""What a sidebar request costs, measured without a clock: the memory it allocates.

A request that copies, sorts or serialises every session allocates in proportion to the sessions stored;
one that costs what it asks for allocates in proportion to its answer. Many index rows are made by the
index's own ``note_saved`` (as a save does), without writing thousands of files.
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path


def index_many_sessions(session_dir: Path, count: int, *, pinned_every: int = 0) -> list[str]:
    """``count`` sidebar rows in the index of ``session_dir`` (a row per session, as saves leave them)."""
    from api.store import models

    index = models.store().index
    sids = []
    base = time.time() - count
    for n in range(count):
        session = models.Session(
            session_id=f"many{n:06d}",
            title=f"Session {n}",
            updated_at=base + n,
            pinned=bool(pinned_every) and n % pinned_every == 0,
        )
        index.note_saved(session_dir, session_dir / "_index.json", session.compact(), (100, n))
        sids.append(session.session_id)
    index.flush()
    return sids


def touch_row(session_dir: Path, sid: str) -> None:
    """One session changes (as a streaming turn's checkpoint does): its row moves to the top."""
    from api.store import models

    index = models.store().index
    session = models.Session(session_id=sid, title="changed", updated_at=time.time() + 10)
    index.note_saved(session_dir, session_dir / "_index.json", session.compact(), (200, 1))
    index.flush()  # the flush runs now, not in a timer thread during the measurement


def bytes_allocated(call: Callable[[], object]) -> int:
    """The peak of memory ``call`` allocates (its result included)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
