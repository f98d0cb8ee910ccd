"""The REST politeness service of Riemer 2017, as a Starlette app."""

from __future__ import annotations

from polite.api.app import MAX_URLS_PER_CALL, create_app

__all__ = ["MAX_URLS_PER_CALL", "create_app"]
