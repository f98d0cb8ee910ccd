"""The loopback farm every drop-in test crawls, measured at its sites."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integrations.farm import Site, farm_sites, fresh


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Site]]:
    with farm_sites() as sites:
        yield sites


@pytest.fixture
def farm(servers: dict[str, Site]) -> dict[str, Site]:
    """The farm with its sites' records of earlier tests cleared."""
    return fresh(servers)
