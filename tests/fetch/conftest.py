"""Fixtures of the fetch tests: asyncio, and the HTTP client the fetchers use."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from polite.fetch import create_client


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with create_client() as http:
        yield http
