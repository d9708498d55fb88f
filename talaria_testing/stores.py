"""A store on a folder of the test's, in use while a block runs (what ``api.store.models``' names act on)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def store_on(session_dir: Path) -> Iterator[Any]:
    """A ``Store`` on ``session_dir`` in use for the block; its index written and the previous store back after."""
    from api.store import models
    from api.store import session_store as store

    built = store.Store(Path(session_dir), models.Session)
    previous = store.use(built)
    try:
        yield built
    finally:
        built.close()
        store.use(previous)
