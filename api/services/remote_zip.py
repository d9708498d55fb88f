"""A folder of a remote session's workspace downloaded as a zip: planned there (its files and folders listed
with ``find``, links never followed, hidden ones left out unless asked for, the total checked against the
bounds before a byte is sent), then its files fetched in one ``tar`` there and written into the zip here.

The files cross the connection base64-encoded in the worker's answer, so a remote folder's zip holds at most
``remote_files.RAW_MAX`` (16 MB) of files, as one remote download does; the tar there is cut one block past
that, so a file that grew after the plan never brings more."""

from __future__ import annotations

import base64
import io
import posixpath
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from typing import IO, Any

from api.rules import remote_output, zip_entries
from api.rules.errors import ApiError, PayloadTooLarge
from api.services import environment_shell, file_preview, remote_files
from api.services.environment_shell import NOT_FOLDER, UNREADABLE, Where

ZIP_MAX = remote_files.RAW_MAX
_TAR_SLACK = 512 * 4  # a tar's headers and end blocks, per file and at its end


@dataclass(frozen=True)
class Listed:
    kind: str  # "f" a regular file, "d" a folder
    size: int
    path: str  # relative to the downloaded folder
    mtime: float


def _listed(records: list[str]) -> list[Listed]:
    rows = []
    for kind, size, mtime, path in zip(
        records[0::4], records[1::4], records[2::4], records[3::4], strict=False
    ):
        if kind in ("f", "d") and size.isdigit() and path:
            try:
                rows.append(Listed(kind, int(size), path, float(mtime)))
            except ValueError:
                continue
    return rows


def _shown(row: Listed, show_hidden: bool) -> bool:
    return show_hidden or not any(file_preview.is_hidden(part) for part in row.path.split("/"))


@dataclass
class RemoteFolderZip:
    """A remote folder planned for download: its file name, what the plan counted, and ``write``."""

    place: Where
    relative: str
    name: str
    folders: list[Listed]
    files: list[Listed]
    total_bytes: int

    def write(self, out: IO[bytes]) -> None:
        wanted = b"".join(b"./" + row.path.encode("utf-8", "surrogateescape") + b"\0" for row in self.files)
        script = environment_shell.locate(self.relative) + f'cd -- "$t" || exit {UNREADABLE}\n'
        script += "base64 -d | tar --null --no-recursion -T - -cf - 2>/dev/null"
        script += f" | head -c {self.total_bytes + _TAR_SLACK * (len(self.files) + 2)}\n"
        data = b""
        if self.files:
            found = environment_shell.run(self.place, script, stdin=base64.b64encode(wanted).decode("ascii"))
            data = environment_shell.located(found)[2]
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            archive.writestr(zip_entries.folder(zip_entries.name_in_zip(self.name), 0), b"")
            for row in self.folders:
                name = zip_entries.name_in_zip(f"{self.name}/{row.path}")
                archive.writestr(zip_entries.folder(name, row.mtime), b"")
            if data:
                _copy_tar(archive, data, self.name, {row.path for row in self.files})


def _copy_tar(archive: zipfile.ZipFile, data: bytes, prefix: str, planned: set[str]) -> None:
    """Each regular file of the tar that the plan named into the zip under ``prefix`` (a name the host added,
    ``../`` or absolute, is never written); a tar cut short ends the zip there (the response is then cut, so
    it never looks whole)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                path = posixpath.normpath(member.name)
                if not member.isreg() or path not in planned:
                    continue
                source = tar.extractfile(member)
                if source is None:
                    continue
                entry = zipfile.ZipInfo(
                    zip_entries.name_in_zip(f"{prefix}/{path}"), zip_entries.zip_time(member.mtime)
                )
                entry.compress_type = zipfile.ZIP_DEFLATED
                entry.external_attr = (stat.S_IFREG | (member.mode & 0o777)) << 16
                archive.writestr(entry, source.read())
    except tarfile.TarError as exc:
        raise ApiError("The folder's files were cut short on their way from the host", status=502) from exc


def folder_zip(
    place: Where, relative: Any, show_hidden: bool, limit: int, entries_max: int
) -> RemoteFolderZip:
    """Plan the download of a folder there; 413 when it holds more than the bounds allow."""
    path = remote_output.checked_relative(relative, allow_root=True)
    script = (
        environment_shell.locate(path)
        + f'[ -d "$t" ] || exit {NOT_FOLDER}\ncd -- "$t" || exit {UNREADABLE}\n'
    )
    script += (
        "find . -mindepth 1 \\( -type f -o -type d \\) -printf '%y\\0%s\\0%T@\\0%P\\0' "
        f"| head -z -n {4 * (entries_max + 1)}\n"
    )
    workspace, target, rest = environment_shell.located(environment_shell.run(place, script))
    rows = [row for row in _listed(remote_output.records(rest)) if _shown(row, show_hidden)]
    bound = min(limit, ZIP_MAX)
    files = [row for row in rows if row.kind == "f"]
    total = sum(row.size for row in files)
    if total > bound:
        raise PayloadTooLarge(
            f"This folder holds more than {bound // (1024 * 1024)} MB of files; a folder on another host is "
            "downloaded up to that size: download smaller folders",
            limit=bound,
        )
    if len(rows) + 1 > entries_max:
        raise PayloadTooLarge(f"This folder holds more than {entries_max:,} files and folders")
    folders = [row for row in rows if row.kind == "d"]
    name = (
        posixpath.basename(target) if target != workspace else (posixpath.basename(workspace) or "workspace")
    )
    return RemoteFolderZip(place, path, name, folders, files, total)
