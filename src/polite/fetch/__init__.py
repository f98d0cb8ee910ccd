"""The fetch layer: async HTTP for robots.txt (and later sitemaps), run by one driver."""

from __future__ import annotations

from polite.fetch.robots import RobotsFetcher, create_client, is_public_host, origin_of

__all__ = ["RobotsFetcher", "create_client", "is_public_host", "origin_of"]
