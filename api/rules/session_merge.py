"""Three-way merge of a session document: our changes since we read the file, onto what the file holds now.

Another writer (hermes-webui, a script, a restored backup) may rewrite a session file while Talaria holds
it in memory. Before a save, ``merge(base, ours, theirs)`` compares field by field: a field only one side
changed takes that side's value; a list both sides only appended to gets both appends (an appended turn
commutes with a rename, a pin or another turn); ``updated_at`` takes the later time; a title a person
chose beats one made up from the first message. Anything else both sides changed is a conflict. A Talaria-only field missing from the other writer's file was dropped by a
program that does not know it, not emptied, so its absence counts as "unchanged".

Pure functions over payload dicts (``Session.to_payload()`` shape).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any

from api.rules.session_fields import DERIVED_KEYS

_MISSING = object()


class MergeConflict(Exception):
    """Both sides changed ``field`` in ways that do not combine."""

    def __init__(self, field: str):
        super().__init__(field)
        self.field = field


def snapshot(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``payload`` that later in-place list appends and dict updates of the live object cannot change."""
    out = {}
    for key, value in payload.items():
        if key in DERIVED_KEYS:
            continue
        if isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, dict):
            value = dict(value)
        out[key] = value
    return out


def changed_since(base: Mapping[str, Any], payload: Mapping[str, Any]) -> bool:
    """Whether ``payload`` differs from the ``snapshot`` ``base``: a field or list changed, added or removed.

    Rows are compared by identity first, so a row changed in place inside an unchanged list is not seen.
    """
    now = snapshot(payload)
    return now.keys() != base.keys() or any(not _same(base[key], value) for key, value in now.items())


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):  # True == 1, yet a flag is not a count
        return type(a) is type(b) and a == b
    return bool(a == b)


def _extends(base: Any, longer: Any) -> bool:
    """True when ``longer`` is ``base`` plus rows appended at its end."""
    if not isinstance(base, (list, tuple)) or not isinstance(longer, (list, tuple)):
        return False
    if len(longer) < len(base):
        return False
    return all(map(operator.is_, base, longer)) or _same(base, longer[: len(base)])


def _merge_field(key: str, base: Any, ours: Any, theirs: Any) -> Any:
    if _same(ours, base):
        return theirs
    if _same(theirs, base) or _same(ours, theirs):
        return ours
    if key == "updated_at" and isinstance(ours, (int, float)) and isinstance(theirs, (int, float)):
        return max(ours, theirs)
    if _extends(base, ours) and _extends(base, theirs):
        return list(base) + list(theirs[len(base) :]) + list(ours[len(base) :])
    raise MergeConflict(key)


def _person_chosen_title(
    ours_title: Any, theirs_title: Any, ours: Mapping[str, Any], theirs: Mapping[str, Any]
) -> Any:
    """Both sides retitled: a title a person chose wins over one made up from the first message."""
    if theirs.get("manual_title") and not ours.get("manual_title"):
        return theirs_title
    if ours.get("manual_title") and not theirs.get("manual_title"):
        return ours_title
    if _same(ours_title, theirs_title):
        return ours_title
    raise MergeConflict("title")


def merge(
    base: Mapping[str, Any],
    ours: Mapping[str, Any],
    theirs: Mapping[str, Any],
    *,
    absent_means_unchanged: Iterable[str] = (),
) -> dict[str, Any]:
    """The merged payload; raises ``MergeConflict`` naming the first field both sides changed differently."""
    keep_when_absent = frozenset(absent_means_unchanged)
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*theirs, *ours, *base]):
        if key in DERIVED_KEYS:
            continue
        b = base.get(key, _MISSING)
        o = ours.get(key, _MISSING)
        t = theirs.get(key, _MISSING)
        if t is _MISSING and key in keep_when_absent:
            t = b
        if key == "title" and not (_same(o, b) or _same(t, b)):
            value = _person_chosen_title(o, t, ours, theirs)
        else:
            value = _merge_field(key, b, o, t)
        if value is not _MISSING:
            out[key] = list(value) if isinstance(value, tuple) else value
    return out
