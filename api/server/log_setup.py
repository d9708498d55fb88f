"""Where the server's log lines go: the terminal and a rotating file under the state dir.

Talaria's own loggers (``talaria.*``, ``api.*``) follow the ``log_level`` setting. The agent's loggers
(``run_agent``, ``agent.*``, ``hermes_cli.*``, ...) print a line for every plugin, client and API call
at INFO: they reach the terminal and Talaria's file only from WARNING, unless ``log_level`` is DEBUG.
The agent keeps its own complete log in ``$HERMES_HOME/logs/agent.log`` regardless.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

LOG_FILE_NAME = "talaria.log"
LOG_FILE_BYTES = 5 * 1024 * 1024
LOG_FILE_BACKUPS = 3
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_OWN_LOGGERS = ("talaria", "api", "__main__")


def log_file_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / "logs" / LOG_FILE_NAME


def shown_level(logger_name: str, level: int) -> int:
    """The lowest level shown for a logger: Talaria's own follow ``level``; the agent's start at WARNING
    unless ``level`` is DEBUG."""
    if logger_name.split(".", 1)[0] in _OWN_LOGGERS or level <= logging.DEBUG:
        return level
    return max(level, logging.WARNING)


class _LevelByOrigin(logging.Filter):
    def __init__(self, level: int):
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= shown_level(record.name, self.level)


def configure_logging(level_name: str, state_dir: str | Path | None) -> Path | None:
    """Install the terminal and file handlers on the root logger; the log file's path (None if it could
    not be opened: the terminal still gets every line)."""
    level = logging.getLevelName(level_name.upper())
    if not isinstance(level, int):
        level = logging.INFO
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_talaria", False):
            root.removeHandler(handler)
            handler.close()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    path: Path | None = None
    if state_dir is not None:
        path = log_file_path(state_dir)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handlers.append(
                logging.handlers.RotatingFileHandler(
                    path, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS, encoding="utf-8"
                )
            )
        except OSError as exc:
            print(f"talaria: cannot write the log file {path}: {exc}", file=sys.stderr)
            path = None
    for handler in handlers:
        handler.setFormatter(logging.Formatter(_FORMAT))
        handler.addFilter(_LevelByOrigin(level))
        handler._talaria = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    # The root passes everything the filters may want; the agent lowers it to INFO itself anyway.
    root.setLevel(min(level, logging.INFO))
    return path
