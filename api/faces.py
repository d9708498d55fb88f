"""hermes-webui's module names (``api.config``, ``api.models``, ``api.routes``, ``api.session_ops``,
``api.session_recovery``) as faces over the modules that hold the code, in one place.

Programs and tests written for hermes-webui import these names and patch them (``monkeypatch.setattr(
api.models, "SESSION_DIR", folder)``). A face holds nothing of its own: reading a name reads it from the
module behind, and setting or deleting one sets or deletes it there, where the code looks it up. Its store
names (``SESSION_DIR``, ``SESSION_INDEX_FILE``, ``SESSIONS``, ``LOCK``, ``_get_session_agent_lock`` and
``api.models.STATE_DIR``) are not module globals anywhere: they read the store in use
(``api.store.models.store()``), and setting one changes that store.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path
from typing import Any

_OWN = frozenset(
    {
        "__name__",
        "__doc__",
        "__file__",
        "__loader__",
        "__package__",
        "__spec__",
        "__path__",
        "__builtins__",
        "__cached__",
        "__annotations__",
        "__dict__",
        "__class__",
        "_face_home",
    }
)


class Face(types.ModuleType):
    """A module whose names are those of the module behind it (``_face_home``)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_face_home"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN or isinstance(getattr(type(self), name, None), property):
            super().__setattr__(name, value)  # the face's own names and its properties' setters
        else:
            setattr(self.__dict__["_face_home"], name, value)

    def __delattr__(self, name: str) -> None:
        if isinstance(getattr(type(self), name, None), property):
            super().__delattr__(name)
        else:
            delattr(self.__dict__["_face_home"], name)

    def __dir__(self) -> list[str]:
        return dir(self.__dict__["_face_home"])


def _store() -> Any:
    from api.store import models

    return models.store()


class StoreNames(Face):
    """hermes-webui's module-level store names, on ``api.models`` and ``api.config``."""

    @property
    def SESSION_DIR(self) -> Path:  # noqa: N802 - hermes-webui's name
        return Path(_store().session_dir)

    @SESSION_DIR.setter
    def SESSION_DIR(self, folder: Path) -> None:  # noqa: N802
        _store().point_at(Path(folder))

    @property
    def SESSION_INDEX_FILE(self) -> Path:  # noqa: N802
        return Path(_store().index_file)

    @SESSION_INDEX_FILE.setter
    def SESSION_INDEX_FILE(self, path: Path) -> None:  # noqa: N802
        _store().index_file = Path(path)

    @property
    def SESSIONS(self) -> Any:  # noqa: N802
        return _store().sessions

    @SESSIONS.setter
    def SESSIONS(self, cache: Any) -> None:  # noqa: N802
        _store().sessions = cache

    @property
    def LOCK(self) -> Any:  # noqa: N802
        return _store().cache_lock

    @LOCK.setter
    def LOCK(self, lock: Any) -> None:  # noqa: N802
        _store().cache_lock = lock

    @property
    def _get_session_agent_lock(self) -> Any:
        return _store().lock_for

    @_get_session_agent_lock.setter
    def _get_session_agent_lock(self, lock_for: Any) -> None:
        _store().lock_for = lock_for


class ModelsNames(StoreNames):
    @property
    def STATE_DIR(self) -> Path:  # noqa: N802 - hermes-webui's name; the settings' folder
        from api.store import config

        return Path(config.STATE_DIR)

    @STATE_DIR.setter
    def STATE_DIR(self, folder: Path) -> None:  # noqa: N802
        from api.store import config

        config.STATE_DIR = Path(folder)


_BASES: dict[str, type[Face]] = {"api.models": ModelsNames, "api.config": StoreNames}


def _passed_through(name: str) -> property:
    """A name of the face that reads, sets and deletes the name of the module behind it.

    Properties, not only ``__getattr__``: ``monkeypatch`` restores what it finds in a module's own
    ``__dict__`` unless the name is a data descriptor of the module's type, and a face's ``__dict__`` is
    empty, so without them undoing a patch would delete the name behind the face.
    """
    return property(
        lambda face: getattr(face.__dict__["_face_home"], name),
        lambda face, value: setattr(face.__dict__["_face_home"], name, value),
        lambda face: delattr(face.__dict__["_face_home"], name),
    )


def face(name: str, home: str) -> None:
    """Make the module ``name`` a face over the module ``home``."""
    module = sys.modules[name]
    target = importlib.import_module(home)
    base = _BASES.get(name, Face)
    taken = {n for cls in base.__mro__ for n in vars(cls)}
    names = {n for n in vars(target) if not (n.startswith("__") and n.endswith("__"))} - taken
    face_type = type(
        f"Face_{home.replace('.', '_')}", (base,), {n: _passed_through(n) for n in sorted(names)}
    )
    module.__dict__.pop("face", None)
    module.__dict__["_face_home"] = target
    module.__class__ = face_type
