"""Counters of the durability suite (kill points, crash states, faults, fuzz cases, load figures).

Tests add to one shared :class:`Counters`; ``tests/durability/conftest.py`` writes it as JSON when
``--durability-json PATH`` is given, and ``bench/report.py`` turns that JSON into the report.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

MAX_VIOLATIONS_KEPT = 200


class Counters:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.values: dict[str, dict[str, Any]] = defaultdict(dict)
        self.violations: list[dict] = []

    def add(self, section: str, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[section][key] += n

    def set(self, section: str, key: str, value: Any) -> None:
        with self._lock:
            self.values[section][key] = value

    def violation(self, section: str, where: str, text: str) -> None:
        with self._lock:
            self.counts[section]["violations"] += 1
            if len(self.violations) < MAX_VIOLATIONS_KEPT:
                self.violations.append({"section": section, "where": where, "text": text})

    def to_dict(self) -> dict:
        with self._lock:
            sections = sorted(set(self.counts) | set(self.values))
            return {
                "sections": {s: {**dict(self.counts.get(s, {})), **self.values.get(s, {})} for s in sections},
                "violations": list(self.violations),
            }

    def write(self, path: Path, extra: dict | None = None) -> None:
        data = self.to_dict()
        if extra:
            data.update(extra)
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True, default=str), encoding="utf-8")
