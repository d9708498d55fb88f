"""Message versions as data: which versions each edited message has and which one is shown.

A session's ``message_versions`` is a list of groups, one per transcript index where an edit or a
regeneration forked the conversation: ``{"index": i, "versions": [id or None, ...], "current": k}``.
Slot ``k`` is the version the transcript shows from row ``i`` on (``None``: its rows are in the session
file itself); every other slot names the kept file holding that version's rows (``api/store/version_store.py``).
A group past index ``i`` belongs to the tail it sits in: when that tail is put aside, its groups go with it.

Pure: data in, data out.
"""

from __future__ import annotations

import copy
import re
from typing import Any, TypeGuard

from api.rules.errors import BadRequest, Conflict

VERSION_ID = re.compile(r"[0-9a-f]{32}")


def _is_index(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _valid_group(group: Any) -> bool:
    if not isinstance(group, dict) or not _is_index(group.get("index")):
        return False
    slots, current = group.get("versions"), group.get("current")
    if not isinstance(slots, list) or len(slots) < 2 or not _is_index(current) or current >= len(slots):
        return False
    return all(
        (slot is None) == (i == current) and (slot is None or VERSION_ID.fullmatch(str(slot)) is not None)
        for i, slot in enumerate(slots)
    )


def groups_of(value: Any) -> list[dict[str, Any]]:
    """The well-formed groups of a stored value, by index, one per index (a malformed one is dropped)."""
    seen: dict[int, dict[str, Any]] = {}
    for group in value if isinstance(value, list) else ():
        if _valid_group(group) and group["index"] not in seen:
            seen[group["index"]] = copy.deepcopy(group)
    return [seen[i] for i in sorted(seen)]


def split_at(
    groups: list[dict[str, Any]], index: int
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[dict[str, Any]]]:
    """(groups before ``index``, the group at it or None, the groups after it: they belong to its tail)."""
    before = [g for g in groups if g["index"] < index]
    at = next((g for g in groups if g["index"] == index), None)
    after = [g for g in groups if g["index"] > index]
    return before, at, after


def add_version(groups: list[dict[str, Any]], index: int, kept_id: str) -> list[dict[str, Any]]:
    """The groups once the tail from ``index`` is kept as ``kept_id`` and a new, empty version is shown.

    The groups past ``index`` went into the kept tail with its rows.
    """
    before, at, _after = split_at(groups, index)
    if at is None:
        at = {"index": index, "versions": [kept_id, None], "current": 1}
    else:
        at = copy.deepcopy(at)
        at["versions"][at["current"]] = kept_id
        at["versions"].append(None)
        at["current"] = len(at["versions"]) - 1
    return [*before, at]


def chosen_slot(group: dict[str, Any], version: Any) -> str:
    """The kept id of version ``version`` of ``group``: 400 out of range, 409 for the version shown."""
    if not _is_index(version) or version >= len(group["versions"]):
        raise BadRequest(f"version must be an integer from 0 to {len(group['versions']) - 1}")
    if version == group["current"]:
        raise Conflict("That version is already shown.")
    return str(group["versions"][version])


def switch_to(
    groups: list[dict[str, Any]], index: int, version: Any, kept_id: str, tail_groups: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The groups once version ``version`` of ``index`` is shown (the shown tail kept as ``kept_id``).

    ``tail_groups`` are the groups the chosen version's tail carries; those of the tail put aside go with it.
    """
    before, at, _after = split_at(groups, index)
    if at is None:
        raise BadRequest("This message has no other versions.")
    chosen_slot(at, version)
    at = copy.deepcopy(at)
    at["versions"][at["current"]] = kept_id
    at["versions"][version] = None
    at["current"] = version
    inner = [g for g in groups_of(tail_groups) if g["index"] > index]
    return [*before, at, *inner]


def drop_from(groups: list[dict[str, Any]], index: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(groups that stay, groups dropped) when the transcript loses its rows from ``index`` on for good."""
    return [g for g in groups if g["index"] < index], [g for g in groups if g["index"] >= index]


def kept_ids(groups: list[dict[str, Any]]) -> list[str]:
    """The ids of the kept files the groups name directly (not those inside the kept tails)."""
    return [slot for g in groups for slot in g["versions"] if slot is not None]


def summary(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the page needs to draw "‹ 2/3 ›": each group's index, version count and shown version."""
    return [{"index": g["index"], "count": len(g["versions"]), "current": g["current"]} for g in groups]
