"""Record the file-system operations a write path makes below one folder (for the crash-state checker).

While installed, :class:`FsRecorder` wraps ``os.open``, ``os.write``, ``os.fsync``, ``os.fdatasync``,
``os.close``, ``os.replace``, ``os.rename``, ``os.link``, ``os.unlink``, ``os.mkdir`` and ``os.rmdir``
(``pathlib`` goes through the same functions). Calls on paths outside the folder pass straight
through. Each recorded :class:`Op` names files by path relative to the folder and by a model inode
number, so hard links and renames keep their identity.

Writes through other channels (``open(...).write``, ``shutil``) are not seen; :func:`replay` lets a test
prove the log is complete by rebuilding the final state from it and comparing with the real folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from talaria_testing.os_patch import OsPatch

_WRAPPED = (
    "open",
    "write",
    "fsync",
    "fdatasync",
    "close",
    "replace",
    "rename",
    "link",
    "unlink",
    "mkdir",
    "rmdir",
)


@dataclass(frozen=True)
class Op:
    kind: str  # mkdir rmdir create trunc write fsync fsync_dir rename link unlink
    path: str = ""  # the (source) path, relative to the recorded folder
    dst: str = ""  # rename / link target
    ino: int = -1
    offset: int = 0
    data: bytes = b""

    def __repr__(self) -> str:
        bits = [self.kind, self.path]
        if self.dst:
            bits.append(f"-> {self.dst}")
        if self.ino >= 0:
            bits.append(f"ino={self.ino}")
        if self.kind == "write":
            bits.append(f"@{self.offset}+{len(self.data)}")
        return "Op(" + " ".join(bits) + ")"


def parent(rel: str) -> str:
    head = rel.rsplit("/", 1)
    return head[0] if len(head) == 2 else "."


class FsRecorder(OsPatch):
    """``with FsRecorder(folder) as rec: ...`` then ``rec.log``, ``rec.initial_files``, ``rec.initial_dirs``."""

    PATCHED = _WRAPPED

    def __init__(self, root: Path):
        self.root = os.path.abspath(root)
        self.log: list[Op] = []
        self.names: dict[str, int] = {}
        self.dirs: set[str] = {"."}
        self.initial_files: dict[str, bytes] = {}
        self._fds: dict[int, list] = {}  # fd -> ["file", ino, offset] | ["dir", rel]
        self._next_ino = 1
        super().__init__()
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            for d in dirnames:
                self.dirs.add(d if rel_dir == "." else f"{rel_dir}/{d}")
            for f in filenames:
                rel = f if rel_dir == "." else f"{rel_dir}/{f}"
                with open(os.path.join(dirpath, f), "rb") as fh:
                    self.initial_files[rel] = fh.read()
                self.names[rel] = self._new_ino()
        self.initial_dirs = set(self.dirs)
        self.initial_inodes = dict(self.names)

    def _new_ino(self) -> int:
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def _rel(self, path, dir_fd=None) -> str | None:
        if dir_fd is not None or isinstance(path, int):
            return None
        p = os.path.abspath(os.fsdecode(os.fspath(path)))
        if p == self.root:
            return "."
        if p.startswith(self.root + os.sep):
            return p[len(self.root) + 1 :]
        return None

    # ------------------------------------------------------------------ the wrappers

    def _open(self, path, flags, mode=0o777, *, dir_fd=None):
        fd = self._real["open"](path, flags, mode, dir_fd=dir_fd)
        rel = self._rel(path, dir_fd)
        if rel is None:
            return fd
        if rel in self.dirs:
            self._fds[fd] = ["dir", rel]
            return fd
        ino = self.names.get(rel)
        if ino is None:
            ino = self.names[rel] = self._new_ino()
            if flags & os.O_CREAT:
                self.log.append(Op("create", rel, ino=ino))
            # else: the file was made behind the recorder's back; replay() will not match the folder
        elif flags & os.O_TRUNC:
            self.log.append(Op("trunc", rel, ino=ino))
        self._fds[fd] = ["file", ino, 0]
        return fd

    def _write(self, fd, data):
        n = self._real["write"](fd, data)
        entry = self._fds.get(fd)
        if entry is not None and entry[0] == "file":
            self.log.append(Op("write", ino=entry[1], offset=entry[2], data=bytes(memoryview(data)[:n])))
            entry[2] += n
        return n

    def _fsync(self, fd):
        self._real["fsync"](fd)
        self._note_sync(fd)

    def _fdatasync(self, fd):
        self._real["fdatasync"](fd)
        self._note_sync(fd)

    def _note_sync(self, fd) -> None:
        entry = self._fds.get(fd)
        if entry is None:
            return
        if entry[0] == "dir":
            self.log.append(Op("fsync_dir", entry[1]))
        else:
            self.log.append(Op("fsync", ino=entry[1]))

    def _close(self, fd):
        self._fds.pop(fd, None)
        return self._real["close"](fd)

    def _move(self, name: str, src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        self._real[name](src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        rs, rd = self._rel(src, src_dir_fd), self._rel(dst, dst_dir_fd)
        if rs is None and rd is None:
            return
        if rs is None or rd is None or rs in self.dirs:
            raise NotImplementedError(
                f"recorder: {name} of {src} -> {dst} crosses the folder or moves a directory"
            )
        ino = self.names.pop(rs)
        self.names[rd] = ino
        self.log.append(Op("rename", rs, rd, ino=ino))

    def _replace(self, src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        self._move("replace", src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def _rename(self, src, dst, *, src_dir_fd=None, dst_dir_fd=None):
        self._move("rename", src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def _link(self, src, dst, *, src_dir_fd=None, dst_dir_fd=None, follow_symlinks=True):
        self._real["link"](
            src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=follow_symlinks
        )
        rs, rd = self._rel(src, src_dir_fd), self._rel(dst, dst_dir_fd)
        if rs is not None and rd is not None:
            self.names[rd] = self.names[rs]
            self.log.append(Op("link", rs, rd, ino=self.names[rs]))

    def _unlink(self, path, *, dir_fd=None):
        self._real["unlink"](path, dir_fd=dir_fd)
        rel = self._rel(path, dir_fd)
        if rel is not None:
            self.log.append(Op("unlink", rel, ino=self.names.pop(rel, -1)))

    def _mkdir(self, path, mode=0o777, *, dir_fd=None):
        self._real["mkdir"](path, mode, dir_fd=dir_fd)
        rel = self._rel(path, dir_fd)
        if rel is not None:
            self.dirs.add(rel)
            self.log.append(Op("mkdir", rel))

    def _rmdir(self, path, *, dir_fd=None):
        self._real["rmdir"](path, dir_fd=dir_fd)
        rel = self._rel(path, dir_fd)
        if rel is not None:
            self.dirs.discard(rel)
            self.log.append(Op("rmdir", rel))

    # ------------------------------------------------------------------ install


def replay(rec: FsRecorder) -> tuple[set[str], dict[str, bytes]]:
    """The folder after every recorded operation persisted completely: ``(dirs, {path: bytes})``."""
    names = dict(rec.initial_inodes)
    inodes = {ino: bytearray(rec.initial_files[rel]) for rel, ino in names.items()}
    return apply_all(rec.log, names, inodes, set(rec.initial_dirs))


def apply_all(log: list[Op], names: dict[str, int], inodes: dict[int, bytearray], dirs: set[str]):
    for op in log:
        if op.kind == "create":
            names[op.path] = op.ino
            inodes[op.ino] = bytearray()
        elif op.kind == "trunc":
            inodes[op.ino] = bytearray()
        elif op.kind == "write":
            buf = inodes.setdefault(op.ino, bytearray())
            end = op.offset + len(op.data)
            if len(buf) < end:
                buf.extend(b"\0" * (end - len(buf)))
            buf[op.offset : end] = op.data
        elif op.kind == "rename":
            names[op.dst] = names.pop(op.path)
        elif op.kind == "link":
            names[op.dst] = names[op.path]
        elif op.kind == "unlink":
            names.pop(op.path, None)
        elif op.kind == "mkdir":
            dirs.add(op.path)
        elif op.kind == "rmdir":
            dirs.discard(op.path)
    return dirs, {rel: bytes(inodes[ino]) for rel, ino in names.items()}
