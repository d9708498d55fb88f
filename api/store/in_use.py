"""The one instance in use of a kind of live state the app owns (its live turns, jobs, feed...).

``api.server.app.App`` builds each and puts it in use (``use``), as it does its store (``session_store.use``);
code that holds no app reference reaches it here. Without an app, the first use builds one, so a module
imported alone or a test works on a fresh instance, and a test puts its own in use instead of patching globals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class InUse(Generic[T]):
    """A slot holding the instance in use; ``build()`` makes one when the slot is empty."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._held: T | None = None
        self._guard = threading.Lock()

    def get(self, given: T | None = None) -> T:
        """``given`` (what a caller holding the app passes down), else the instance in use."""
        if given is not None:
            return given
        held = self._held
        if held is not None:
            return held
        with self._guard:
            if self._held is None:
                self._held = self._build()
            return self._held

    def use(self, value: T | None) -> T | None:
        """Put ``value`` in use (None: the next use builds one); returns the one it replaces."""
        with self._guard:
            previous, self._held = self._held, value
            return previous
