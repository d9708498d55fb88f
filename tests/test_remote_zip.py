"""A remote folder's tar turned into the zip (``api.services.remote_zip``): only the files the plan named are
written, so a host that answers other names (``../``, absolute, a link) never puts them in the person's zip."""

from __future__ import annotations

import io
import tarfile
import zipfile

from api.services import remote_zip


def _tar(members: dict[str, bytes], link: str | None = None) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return out.getvalue()


def test_only_the_planned_regular_files_reach_the_zip():
    data = _tar(
        {"./a.txt": b"a", "./deep/b.txt": b"b", "../evil": b"x", "/etc/shadow": b"x"}, link="./a-link"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        remote_zip._copy_tar(archive, data, "src", {"a.txt", "deep/b.txt", "a-link"})
    with zipfile.ZipFile(io.BytesIO(out.getvalue())) as archive:
        assert sorted(archive.namelist()) == ["src/a.txt", "src/deep/b.txt"]
        assert archive.read("src/deep/b.txt") == b"b"
