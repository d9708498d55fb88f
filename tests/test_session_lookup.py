"""Finding one session by id: unsafe, missing and reserved ids, links and FIFOs are not served; the file name decides."""

from __future__ import annotations

import json
import os

import pytest

from api.rules.errors import NotFound
from api.services import session_catalogue, session_views
from api.store import models
from talaria_testing.sessions import saved_session


def test_unsafe_missing_or_reserved_ids_are_404(state_dir):
    saved_session(n=1)  # the folder now holds _index.json
    session_catalogue.delete_session(saved_session(n=1).session_id)  # ... and the delete tombstone
    for sid in ("missing1", "../x", "_index", "_deleted_webui_sessions"):
        with pytest.raises(NotFound):
            session_views.get_session_payload(sid)
        with pytest.raises(NotFound):
            session_catalogue.rename_session(sid, "x")
        with pytest.raises(NotFound):
            session_catalogue.delete_session(sid)
    models.store().index.flush()
    assert (state_dir / "_index.json").is_file() and (state_dir / "_deleted_webui_sessions.json").is_file()


def test_links_and_fifos_are_not_served_and_a_misnamed_file_stays_in_its_own_file(state_dir, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"session_id": "linked", "title": "outside", "messages": []}))
    (state_dir / "linked.json").symlink_to(outside)
    os.mkfifo(state_dir / "fifo.json")
    (state_dir / "other.json").write_text(
        json.dumps({"session_id": "someone_else", "title": "x", "messages": []})
    )
    (state_dir / "weird.json").write_text(
        json.dumps({"title": ["x"], "messages": [{"role": ["user"], "content": {"a": 1}}]})
    )
    for sid in ("linked", "fifo"):
        with pytest.raises(NotFound):
            session_views.get_session_payload(sid)
    session_catalogue.rename_session("other", "renamed")  # the file name decides which session it is
    assert json.loads((state_dir / "other.json").read_text())["title"] == "renamed"
    assert not (state_dir / "someone_else.json").exists()
    weird = session_views.get_session_payload("weird")["session"]
    assert weird["messages"][0]["_idx"] == 0 and "html" not in weird["messages"][0]
