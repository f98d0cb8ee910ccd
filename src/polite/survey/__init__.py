"""The site-metadata survey (seed 004): harvest robots.txt and sitemaps of many sites,
keep them, and count what they hold."""

from __future__ import annotations

from polite.survey.offline import import_robots_dir
from polite.survey.report import write_tables
from polite.survey.store import SitemapRecord, SiteRecord, SurveyStore
from polite.survey.warc import import_robots_warc

__all__ = ["SiteRecord", "SitemapRecord", "SurveyStore", "import_robots_dir", "import_robots_warc",
           "write_tables"]
