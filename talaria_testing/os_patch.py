"""Swap some ``os`` functions for a test object's own ``_<name>`` methods while a ``with`` block runs."""

from __future__ import annotations

import os
from collections.abc import Callable


class OsPatch:
    """Subclasses set ``PATCHED`` (names of ``os`` functions) and define ``_<name>`` for each; ``self._real``
    holds the originals while patched."""

    PATCHED: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._real: dict[str, Callable] = {}

    def __enter__(self):
        for name in self.PATCHED:
            self._real[name] = getattr(os, name)
            setattr(os, name, getattr(self, f"_{name}"))
        return self

    def __exit__(self, *exc) -> None:
        for name, fn in self._real.items():
            setattr(os, name, fn)
        self._real.clear()
