"""The application: the settings in force, the session store, login, and what follows each save.

``App()`` is built once where the server is made (``api.cli.main``) and handed to the server, whose request
handler passes it to the routes. Building it wires, explicitly, what used to be registered at import: the
sidebar feed and the search indexer hear every change of the store's index. The app's store becomes the
store in use, the one hermes-webui's module-level names (``api.models.SESSION_DIR``...) act on.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from api import config, models, search_indexer, session_feed
from api import store as _store
from api.auth import AuthManager


class App:
    """One running Talaria: its settings, its store, its login and its startup's recovery summary."""

    def __init__(
        self, settings: Mapping[str, Any] | None = None, *, store: _store.Store[models.Session] | None = None
    ) -> None:
        if settings is not None:
            config.configure(settings)
        self.settings = config.SETTINGS_VALUES
        self.store = store if store is not None else _store.Store(config.sessions_folder(), models.Session)
        self.auth: AuthManager | None = None  # None: login is off
        self.startup_recovery: dict[str, Any] | None = None
        self.started_at = time.time()
        self.store.index.add_listener(session_feed.CHANGES.record, session_feed.CHANGES.reset)
        self.store.index.add_listener(search_indexer.note_changed, search_indexer.note_reset)
        _store.use(self.store)

    def close(self) -> None:
        """Keep what memory holds that the files lack (the sidebar index), at shutdown."""
        self.store.close()
