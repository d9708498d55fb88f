"""The server harness runs exactly one server per ``ServerProc`` and leaves none behind."""

from __future__ import annotations

import pytest

from talaria_testing import process_leaks
from talaria_testing.server_proc import ServerProc


def test_with_start_runs_one_server_and_stops_it(tmp_path):
    before = set(process_leaks.live_descendants())
    srv = ServerProc(tmp_path)
    with srv.start():
        started = process_leaks.leaked_since(before, grace_s=0)
        parents = process_leaks.live_descendants()
        # The server's own children (its cron scheduler) are part of that one server.
        servers = [pid for pid in started if parents.get(pid) != srv.proc.pid]
        assert servers == [srv.proc.pid], f"expected one server, found {started}"
        with pytest.raises(RuntimeError, match="already running"):
            srv.start()
    assert not process_leaks.leaked_since(before), "the server outlived its with-block"
