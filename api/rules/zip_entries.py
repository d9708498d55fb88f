"""What a zip entry may carry: a name that is valid UTF-8, a time no older than 1980, and a folder's entry."""

from __future__ import annotations

import stat
import time
import zipfile

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # the oldest time a zip entry can carry


def name_in_zip(name: str) -> str:
    """A name the zip can carry: bytes that are not UTF-8 (kept by ``os.fsdecode``) become U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def zip_time(mtime: float) -> tuple[int, int, int, int, int, int]:
    found = time.localtime(mtime)[:6]
    return max(found, _ZIP_EPOCH)


def folder(prefix: str, mtime: float) -> zipfile.ZipInfo:
    """The entry of a folder named ``prefix`` (already a zip name)."""
    info = zipfile.ZipInfo(prefix.rstrip("/") + "/", zip_time(mtime))
    info.external_attr = (stat.S_IFDIR | 0o755) << 16 | 0x10
    return info
