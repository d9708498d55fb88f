"""The worker's own temp folder (``api.server.agent_worker.socket_temp_base``): the agent's SSH master socket
under it must fit a Unix socket's path, so a deep temp folder gives way to a short one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from api.server.agent_worker import (
    _SOCKET_UNDER_TEMP,
    _TEMP_FOLDER_CHARS,
    SOCKET_PATH_MAX,
    socket_temp_base,
)


def test_a_short_temp_folder_is_kept_and_a_deep_one_like_macos_gives_gives_way(tmp_path):
    assert socket_temp_base("/tmp", fallback=str(tmp_path)) == "/tmp"
    deep = "/var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T"  # macOS's per-user TMPDIR
    assert socket_temp_base(deep, fallback=str(tmp_path)) == str(tmp_path)


def test_a_missing_fallback_keeps_the_temp_folder_it_was_given(tmp_path):
    deep = str(tmp_path / ("d" * 80))
    assert socket_temp_base(deep, fallback=str(tmp_path / "missing")) == deep


@given(st.text(alphabet="abc/é", min_size=1, max_size=120))
def test_what_it_keeps_always_leaves_room_for_the_socket(base):
    chosen = socket_temp_base("/" + base, fallback="/tmp")
    if chosen != "/tmp":
        assert len(chosen.encode()) + _TEMP_FOLDER_CHARS + _SOCKET_UNDER_TEMP <= SOCKET_PATH_MAX
