"""The frame a remote command's bytes travel in, the path rule and the listing records
(``api.rules.remote_output``): whatever surrounds a frame, and whatever bytes a name holds, what comes out
is what went in."""

from __future__ import annotations

import base64
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.rules import remote_output
from api.rules.errors import BadRequest, Forbidden

NOISE = st.text(alphabet=st.characters(blacklist_characters="_"), max_size=80)


def _frame(data: bytes, code: int) -> str:
    return f"{remote_output.BEGIN}{base64.b64encode(data).decode()}{remote_output.END}{code}\n"


@given(st.binary(max_size=2000), st.integers(0, 255), NOISE, NOISE)
def test_a_frame_gives_back_its_bytes_and_exit_code_whatever_is_printed_around_it(data, code, before, after):
    assert remote_output.unframed(before + _frame(data, code) + after) == (data, code)


@pytest.mark.parametrize(
    "output",
    ["", "ssh: connect to host 127.0.0.1 port 22: Connection refused", "__TALARIA_OUT__!!__TALARIA_END__0"],
)
def test_output_without_a_whole_frame_is_no_answer(output):
    assert remote_output.unframed(output) is None


def test_the_framed_command_run_by_bash_frames_its_output_and_exit_code():
    script = "printf 'a\\0b\\n'; printf 'lost' >&2; exit 7"
    done = subprocess.run(
        ["bash", "-c", remote_output.framed(script)], capture_output=True, text=True, check=False
    )
    assert remote_output.unframed(done.stdout) == (b"a\0b\n", 7)


@pytest.mark.parametrize("path", ["/etc/passwd", "~", "~/x", "~root/x", "\\x", "../x", "a/../../x", "a/.."])
def test_paths_that_leave_the_workspace_are_refused(path):
    with pytest.raises(Forbidden):
        remote_output.checked_relative(path)


@pytest.mark.parametrize("path", [None, "", " ", "a\0b", "a" * 5000, 3])
def test_paths_that_are_not_paths_are_bad_requests(path):
    with pytest.raises(BadRequest):
        remote_output.checked_relative(path)


@given(st.text(alphabet=st.characters(blacklist_characters="/\0"), min_size=1, max_size=40))
def test_a_plain_name_is_kept_as_it_is(name):
    if name.strip() and name != ".." and not name.startswith(("~", "\\")):
        assert remote_output.checked_relative(f"sub/{name}") == f"sub/{name}"


def test_the_root_is_the_empty_path_only_where_allowed():
    assert remote_output.checked_relative("", allow_root=True) == ""
    assert remote_output.checked_relative(".", allow_root=True) == ""


NAMES = st.text(alphabet=st.characters(blacklist_characters="/\0", blacklist_categories=("Cs",)), min_size=1)


@given(st.lists(NAMES, max_size=8, unique=True), st.lists(NAMES, max_size=4))
def test_listing_records_give_back_every_entry_and_the_ignored_names(names, ignored):
    fields: list[str] = []
    for name in names:
        fields += [name, "f", "f", "12", "1700000000.5", ""]
    data = ("\0".join([*fields, remote_output.IGNORED_MARK, *ignored]) + "\0").encode()
    rows, found = remote_output.listing("/w", "sub/", remote_output.records(data))
    assert [row["name"] for row in rows] == names
    assert all(row == {"name": row["name"], "path": "sub/" + row["name"], "type": "file", "size": 12,
                       "mtime": 1700000000.5} for row in rows)  # fmt: skip
    assert found == {name.rstrip("/") for name in ignored if name}


def test_links_say_where_they_point_and_an_entry_cut_short_is_dropped():
    fields = ["in", "l", "d", "4", "1.0", "/w/sub", "out", "l", "d", "4", "1.0", "/etc", "gone", "l", "N", "4",
              "1.0", "", "fifo", "p", "p", "0", "1.0", "", "cut", "f"]  # fmt: skip
    rows, ignored = remote_output.listing("/w", "", fields)
    assert rows == [
        {"name": "in", "path": "in", "link": "inside", "type": "dir"},
        {"name": "out", "path": "out", "link": "outside", "type": "link"},
        {"name": "gone", "path": "gone", "link": "outside", "type": "link"},
        {"name": "fifo", "path": "fifo", "type": "special"},
    ]
    assert ignored == set()


def test_a_name_that_is_not_utf8_goes_back_as_the_same_bytes():
    (name,) = remote_output.records(b"caf\xe9\0")
    assert name.encode("utf-8", "surrogateescape") == b"caf\xe9"


def test_inside_and_relative_to_compare_whole_path_parts():
    assert remote_output.inside("/w", "/w") and remote_output.inside("/w", "/w/a")
    assert not remote_output.inside("/w", "/wx/a") and not remote_output.inside("/w", "/")
    assert remote_output.relative_to("/w", "/w") == "" and remote_output.relative_to("/w", "/w/a/b") == "a/b"
