"""Small error classes that carry an HTTP status; ``http_io`` turns them into ``{"error": ...}``."""

from __future__ import annotations

import re
from typing import Any

_PATH_LIKE = re.compile(r"(?<![\w/.~-])(?:~|[A-Za-z]:)?(?:[\\/][^\s'\"<>|,;:()\[\]{}\\/]+)+[\\/]?")


def redact_paths(text: str) -> str:
    """Replace file-system paths in an error message with ``<path>`` (messages reach the browser)."""
    return _PATH_LIKE.sub("<path>", text)


class ApiError(Exception):
    status = 400

    def __init__(self, message: str, status: int | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.extra = extra

    def payload(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class PayloadTooLarge(ApiError):
    status = 413


class UnsupportedMediaType(ApiError):
    status = 415


class TooManyRequests(ApiError):
    status = 429


class ServiceUnavailable(ApiError):
    status = 503


class MisdirectedRequest(ApiError):
    status = 421
