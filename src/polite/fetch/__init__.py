"""The fetch layer: one HTTP client for every request to a site, robots.txt and sitemaps
loading, and the politeness driver over them."""

from __future__ import annotations

from polite.fetch.robots import RobotsFetcher, create_client, is_public_host, origin_of

__all__ = ["RobotsFetcher", "create_client", "is_public_host", "origin_of"]
