"""The survey's pure side (seed 004): what is counted in robots.txt files and sitemaps."""

from __future__ import annotations

from polite.core.survey.robots_stats import (
    FileStats,
    Popular,
    agent_key,
    file_stats,
    popular_agents,
    popular_fields,
)

__all__ = ["FileStats", "Popular", "agent_key", "file_stats", "popular_agents",
           "popular_fields"]
