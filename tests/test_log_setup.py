"""Logging: Talaria's lines at the chosen level, the agent's INFO chatter only at DEBUG, a rotating file."""

from __future__ import annotations

import logging
import logging.handlers

import pytest

from api.server import log_setup


@pytest.mark.parametrize(
    "name,level,shown",
    [
        ("talaria.server", logging.INFO, logging.INFO),
        ("api.services.streaming", logging.WARNING, logging.WARNING),
        ("run_agent", logging.INFO, logging.WARNING),
        ("agent.conversation_loop", logging.ERROR, logging.ERROR),
        ("hermes_cli.plugins", logging.DEBUG, logging.DEBUG),
    ],
)
def test_shown_level_quietens_the_agent_unless_debugging(name, level, shown):
    assert log_setup.shown_level(name, level) == shown


@pytest.fixture
def root_handlers():
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in before:
            root.removeHandler(handler)
            handler.close()
    root.setLevel(level)


def test_the_log_file_gets_talarias_lines_and_the_agents_warnings_only(tmp_path, root_handlers):
    path = log_setup.configure_logging("info", tmp_path)
    assert path == tmp_path / "logs" / "talaria.log"
    logging.getLogger("talaria.server").info("own info")
    logging.getLogger("run_agent").info("agent chatter")
    logging.getLogger("run_agent").warning("agent warning")
    text = path.read_text(encoding="utf-8")
    assert "own info" in text and "agent warning" in text and "agent chatter" not in text
    rotating = [
        h for h in logging.getLogger().handlers if isinstance(h, logging.handlers.RotatingFileHandler)
    ]
    assert [(h.maxBytes, h.backupCount) for h in rotating if h.baseFilename == str(path)] == [
        (log_setup.LOG_FILE_BYTES, log_setup.LOG_FILE_BACKUPS)
    ]


def test_configuring_twice_keeps_one_set_of_handlers(tmp_path, root_handlers):
    log_setup.configure_logging("INFO", tmp_path)
    log_setup.configure_logging("DEBUG", tmp_path)
    ours = [h for h in logging.getLogger().handlers if getattr(h, "_talaria", False)]
    assert len(ours) == 2


def test_an_unwritable_log_folder_leaves_the_terminal(tmp_path, root_handlers, capsys):
    (tmp_path / "logs").write_text("a file where the folder goes")
    assert log_setup.configure_logging("INFO", tmp_path) is None
    assert "cannot write the log file" in capsys.readouterr().err
