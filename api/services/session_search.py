"""Search over every session: titles, then messages ranked by the full-text index (bm25), paged, each
with a snippet whose matched words are marked, then the agent's own conversations found through its
``state.db`` index. Until the index has caught up with the files, messages are found by reading the files
(``session_catalogue.search_sessions``) and the answer says how far the rebuild is.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from typing import Any

from api.agent import agent_sessions
from api.rules import search_query
from api.rules.errors import BadRequest
from api.rules.search_query import Query
from api.services import render, search_indexer, session_catalogue
from api.store import models
from api.store.search_index import Filters, Hit, SearchIndex

DEFAULT_LIMIT = session_catalogue.SEARCH_MAX_RESULTS
MAX_LIMIT = 200
MAX_OFFSET = 100_000
READ_YOUR_SAVES_S = 0.5
# Characters that may be Markdown: a message holding one is rendered to plain words for its snippet.
_MARKUP = re.compile(r"[*_`\[\]<>#|~\\&!]")
_FLAGS = ("1", "true", "yes", "on")


def _text(params: dict[str, Any], name: str, limit: int = 1000) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise BadRequest(f"{name} must be a string of at most {limit} characters")
    return value


def _count(params: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    value = _text(params, name, 12)
    if value is None:
        return default
    if not value.isdigit() or not low <= int(value) <= high:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}")
    return int(value)


def _moment(params: dict[str, Any], name: str) -> float | None:
    """Unix seconds, or a date (YYYY-MM-DD, its start in UTC)."""
    value = _text(params, name, 40)
    if value is None:
        return None
    try:
        return float(value) if value.replace(".", "", 1).isdigit() else _day_start(value)
    except ValueError:
        raise BadRequest(f"{name} must be unix seconds or a date (YYYY-MM-DD)") from None


def _day_start(value: str) -> float:
    day = dt.date.fromisoformat(value)
    return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()


def filters_from(params: dict[str, Any]) -> Filters:
    return Filters(
        after=_moment(params, "after"),
        before=_moment(params, "before"),
        model=_text(params, "model"),
        workspace=_text(params, "workspace", 4096),
        project_id=_text(params, "project_id") or _text(params, "project"),
        source=_text(params, "source"),
    )


def _passes(row: dict[str, Any], filters: Filters) -> bool:
    """The filters on a sidebar or agent row (what the index's SQL does for indexed sessions)."""
    source = row.get("source") if row.get("read_only") else row.get("session_source") or "webui"
    when = row.get("updated_at")
    checks = (
        (filters.model, row.get("model")),
        (filters.workspace, row.get("workspace")),
        (filters.project_id, row.get("project_id")),
        (filters.source, source),
    )
    if any(wanted is not None and wanted != value for wanted, value in checks):
        return False
    if filters.after is not None or filters.before is not None:
        if not isinstance(when, (int, float)):
            return False
        if filters.after is not None and when < filters.after:
            return False
        if filters.before is not None and when >= filters.before:
            return False
    return True


def _with_html(row: dict[str, Any], words: list[str]) -> dict[str, Any]:
    match = row.get("match")
    if isinstance(match, dict) and isinstance(match.get("snippet"), str):
        marked = search_query.mark_words(search_query.indexable(match["snippet"]), words)
        row = {**row, "match": {**match, "snippet_html": search_query.marked_html(marked)}}
    return row


def status(*, indexing: search_indexer.Indexing | None = None) -> dict[str, Any]:
    """The index's state (``ready``, ``rebuilding`` with ``progress`` 0..1, ``failed``, ``off``) of
    ``indexing`` (the caller's app's; the one in use when None)."""
    indexer = search_indexer.indexer(indexing)
    return indexer.status() if indexer is not None else {"state": "off", "progress": 0.0}


def search_sessions(
    params: dict[str, Any],
    *,
    store: models.Store | None = None,
    indexing: search_indexer.Indexing | None = None,
) -> dict[str, Any]:
    """``GET /api/sessions/search``: ``q``, ``content``, ``offset``, ``limit`` and the filters, over ``store``
    and the search index of ``indexing`` (the caller's app's; those in use when None)."""
    q = params.get("q", "")
    if not isinstance(q, str):
        raise BadRequest("q must be a string")
    q = q[: session_catalogue.SEARCH_QUERY_MAX]
    content = str(params.get("content", "")).lower() in _FLAGS
    offset = _count(params, "offset", 0, 0, MAX_OFFSET)
    limit = _count(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    filters = filters_from(params)
    query = search_query.parse(q)
    indexer = search_indexer.indexer(indexing)
    if indexer is not None and indexer.ready and indexer.index is not None:
        # A search just after a save finds it: the few updates queued are written first (briefly).
        indexer.wait_idle(READ_YOUR_SAVES_S)
        found, more = _from_index(indexer.index, q, query, filters, content, offset, limit, store)
    else:
        found, more = _from_scan(q, query, filters, content, offset, limit, store)
    return {
        "sessions": found,
        "offset": offset,
        "next_offset": offset + limit if more else None,
        "index": status(indexing=indexing),
    }


def _from_scan(
    q: str, query: Query, filters: Filters, content: bool, offset: int, limit: int, store: models.Store | None
) -> tuple[list[Any], bool]:
    rows = session_catalogue.search_sessions(q, content=content, store=store)["sessions"]
    words = query.words() or [" ".join(q.split()).lower()]
    kept = [_with_html(row, words) for row in rows if _passes(row, filters)]
    page = kept[offset : offset + limit + 1]
    return page[:limit], len(page) > limit


def _from_index(
    index: SearchIndex,
    q: str,
    query: Query,
    filters: Filters,
    content: bool,
    offset: int,
    limit: int,
    store: models.Store | None,
) -> tuple[list[Any], bool]:
    needle = " ".join(q.split()).lower()
    titled = index.titled(needle, filters, MAX_OFFSET) if needle else []
    out: list[dict[str, Any]] = []
    if offset == 0:
        for sid in titled[:limit]:
            row = models.store(store).row(sid)
            if row is not None:
                out.append(row)
    if not content or not query.wanted:
        return out, False
    words = query.words()
    hits = index.search(query, filters, skip=titled)
    page = list(itertools.islice(hits, offset, offset + limit + 1))
    for hit in page[:limit]:
        row = models.store(store).row(hit.sid)
        if row is None:
            continue  # removed since the index heard of it
        marked = _reader_snippet(hit, words)
        match = {
            "message_idx": hit.message_idx,
            "snippet": search_query.plain(marked),
            "snippet_html": search_query.marked_html(marked),
        }
        out.append({**row, "match": match})
    more = len(page) > limit
    if offset == 0 and len(out) < limit:
        out.extend(_agent_matches(query, words, filters, limit - len(out), store))
    return out, more


def _reader_snippet(hit: Hit, words: list[str]) -> str:
    """The snippet as the message reads once rendered (no Markdown marks), for a message holding markup;
    the index's own snippet when it holds none or the words only match in its source."""
    if _MARKUP.search(hit.body):
        return (
            search_query.snippet_around(search_query.indexable(render.plain_text(hit.body)), words)
            or hit.snippet
        )
    return hit.snippet


def _agent_matches(
    query: Query, words: list[str], filters: Filters, limit: int, store: models.Store | None
) -> list[dict[str, Any]]:
    """The agent's own conversations holding every wanted word (its full-text index, read-only)."""
    needle = " ".join(words)
    if not needle:
        return []
    out = []
    for found in agent_sessions.sessions_matching(needle, limit, store=store):
        messages = found.pop("messages")
        row = {**found, "session_id": found["id"], "read_only": True}
        if not _passes(row, filters):
            continue
        match = session_catalogue.find_in_messages(messages, words[0])
        if match is not None:
            out.append(_with_html({**row, "match": match}, words))
    return out
