"""Bulk actions on a real small tmpfs: a save that fails in the middle of a bulk action (the disk fills)
is that session's outcome; it stays as its file is, in memory too, and the others are changed."""

from __future__ import annotations

import os

from api.rules import jsonio
from api.services import project_ops, session_catalogue, session_views
from api.store import models, projects
from talaria_testing import failed_saves
from talaria_testing.faults import fill
from talaria_testing.sessions import saved_session
from talaria_testing.transcripts import conversation

FREE_BYTES = 96 * 1024  # room for the small sessions' saves, not for the large one


def test_a_save_that_fails_mid_bulk_is_reported_and_leaves_that_session_whole(tmp_path):
    with failed_saves.tmpfs_sessions(tmp_path, size="4m") as (mnt, sessions):
        project = projects.create_project("Target")["project_id"]
        small = [saved_session(f"Small {i}", n=2).session_id for i in range(4)]
        large = models.Session(title="Large", messages=conversation(*["x" * 4000] * 100, start=1.0))
        large.save()
        sids = [*small[:2], large.session_id, *small[2:]]
        before = (sessions / f"{large.session_id}.json").read_bytes()
        filler = fill(mnt)
        os.truncate(filler, filler.stat().st_size - FREE_BYTES)
        try:
            done = project_ops.bulk({"action": "move", "session_ids": sids, "project_id": project})
        finally:
            filler.unlink()
        outcomes = {r["session_id"]: r for r in done["results"]}
        assert outcomes[large.session_id]["ok"] is False and outcomes[large.session_id]["status"] == 507
        assert "space" in outcomes[large.session_id]["error"]
        assert all(outcomes[sid]["ok"] for sid in small) and done["done"] == 4
        for sid in small:
            assert jsonio.loads((sessions / f"{sid}.json").read_bytes())["project_id"] == project
        assert (sessions / f"{large.session_id}.json").read_bytes() == before
        shown = session_views.get_session_payload(large.session_id)["session"]
        assert shown["project_id"] is None and len(shown["messages"]) == 100
        session_catalogue.set_flag(large.session_id, "pinned", True)  # a later save writes no failed change
        assert jsonio.loads((sessions / f"{large.session_id}.json").read_bytes())["project_id"] is None
        assert not [p.name for p in sessions.iterdir() if ".tmp." in p.name]
