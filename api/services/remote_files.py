"""The files panel's reads of a session in another execution environment: list a folder, preview a file
and its raw bytes, all read on that host (``api.services.environment_shell``) and shaped as the local
panel's answers (``api.services.workspace_files``).

A listing is ``find -printf`` records (a link's target resolved there with ``realpath``, so a link out of
the workspace is listed and never followed); the names git ignores are asked of git there, behind the
hidden toggle as on this machine. A file is read only when it resolves to a regular file inside the
workspace, and at most one byte over the limit crosses over (``head -c`` there).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from api.rules import remote_output
from api.rules.errors import PayloadTooLarge, UnsupportedMediaType
from api.services import environment_shell, file_preview, media
from api.services.environment_shell import NOT_FILE, NOT_FOLDER, UNREADABLE, Where

LIST_MAX = 20_000  # entries of one folder; more are cut, and the answer says so
RAW_MAX = 16 * 1024 * 1024  # bytes of a remote file downloaded: they cross the connection base64-encoded

# Each entry as ENTRY_FIELDS records; a link's last one is its target resolved there (empty when that
# fails), another entry's is empty. The first LIST_MAX * 2 entries only, hidden ones included.
_ENTRIES = (
    "find . -mindepth 1 -maxdepth 1 "
    "\\( -type l -printf '%P\\0%y\\0%Y\\0%s\\0%T@\\0' "
    '-exec sh -c \'realpath -z -m -- "$1" 2>/dev/null || printf "\\0"\' _ {} \\; \\) '
    "-o -printf '%P\\0%y\\0%Y\\0%s\\0%T@\\0\\0' "
    f"| head -z -n {LIST_MAX * 2 * remote_output.ENTRY_FIELDS}\n"
)
_IGNORED = (
    f"printf '{remote_output.IGNORED_MARK}\\0'\n"
    "if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then "
    # check-ignore exits 1 when it ignores none of them
    "find . -mindepth 1 -maxdepth 1 -printf '%P\\0' | git --no-optional-locks check-ignore --stdin -z || true; fi\n"
)


def list_folder(place: Where, relative: Any, show_hidden: bool) -> dict[str, Any]:
    """One folder's entries on that host, shaped and ordered as the local listing's."""
    folder = remote_output.checked_relative(relative, allow_root=True)
    script = environment_shell.locate(folder) + f'[ -d "$t" ] || exit {NOT_FOLDER}\n'
    script += f'cd -- "$t" || exit {UNREADABLE}\n' + _ENTRIES + ("" if show_hidden else _IGNORED)
    workspace, target, rest = environment_shell.located(environment_shell.run(place, script))
    path = remote_output.relative_to(workspace, target)
    rows, ignored = remote_output.listing(workspace, f"{path}/" if path else "", remote_output.records(rest))
    hidden = 0
    if not show_hidden:
        shown = [
            row for row in rows if not file_preview.is_hidden(row["name"]) and row["name"] not in ignored
        ]
        hidden, rows = len(rows) - len(shown), shown
    truncated = len(rows) > LIST_MAX
    rows = sorted(rows[:LIST_MAX], key=lambda row: (row["type"] != "dir", row["name"].lower()))
    return {"workspace": workspace, "path": path, "entries": rows, "hidden": hidden, "truncated": truncated}


def _read(place: Where, relative: Any, limit: int) -> tuple[str, str, int, float, bytes]:
    """``(its path in the workspace, its name, size, mtime, at most limit bytes)`` of a regular file."""
    path = remote_output.checked_relative(relative)
    script = environment_shell.locate(path)
    script += f'[ -f "$t" ] || exit {NOT_FILE}\n[ -r "$t" ] || exit {UNREADABLE}\n'
    script += "find \"$t\" -maxdepth 0 -printf '%s\\0%T@\\0'\n"
    script += f'head -c {limit} -- "$t" || exit {UNREADABLE}\n'
    workspace, target, rest = environment_shell.located(environment_shell.run(place, script))
    size, mtime, data = (rest.split(b"\0", 2) + [b"", b""])[:3]
    return (
        remote_output.relative_to(workspace, target),
        PurePosixPath(target).name,
        int(size or 0),
        float(mtime or 0),
        data,
    )


def read_file(place: Where, relative: Any) -> dict[str, Any]:
    """A file on that host for the panel, as ``file_preview.preview`` shows it (a save goes through
    ``remote_edit``)."""
    path, name, size, mtime, data = _read(place, relative, file_preview.PREVIEW_MAX + 1)
    return file_preview.preview(path, name, size, mtime, data)


def raw_file(place: Where, relative: Any) -> tuple[bytes, str, str]:
    """``(bytes, content type, file name)`` of a file on that host, at most ``RAW_MAX`` bytes."""
    _path, name, size, _mtime, data = _read(place, relative, RAW_MAX + 1)
    if size > RAW_MAX or len(data) > RAW_MAX:
        raise PayloadTooLarge(f"Files over {RAW_MAX // (1024 * 1024)} MB of another host are not served here")
    return data, file_preview.content_type(name, data), name


def read_image(place: Where, relative: Any, limit: int) -> tuple[bytes, str]:
    """``(bytes, content type)`` of an image on that host for the transcript (``media.read_media``'s rule:
    PNG, JPEG, GIF or WebP by its bytes, at most ``limit`` bytes)."""
    _path, _name, size, _mtime, data = _read(place, relative, limit + 1)
    if size > limit or len(data) > limit:
        raise PayloadTooLarge(f"the image is larger than {limit // (1024 * 1024)} MB")
    content_type = media.image_type(data[:16])
    if content_type is None:
        raise UnsupportedMediaType("only PNG, JPEG, GIF and WebP images are shown")
    return data, content_type
