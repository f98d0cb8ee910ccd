"""The site-metadata survey (Roy 2008): harvest robots.txt and sitemaps of many sites,
keep them, and count what they hold.

``Survey(folder).table(name)`` gives each of the report's tables as a pandas DataFrame
(``Survey(folder).names`` lists them); ``write_report`` writes the report.
"""

from __future__ import annotations

from polite.survey.offline import import_robots_dir
from polite.survey.report import require_extra, write_report
from polite.survey.store import SitemapRecord, SiteRecord, SurveyStore
from polite.survey.tables import DEFAULT_AGENTS, TABLES, KeptUrl, Survey, Table
from polite.survey.warc import import_robots_warc

__all__ = ["DEFAULT_AGENTS", "TABLES", "KeptUrl", "SiteRecord", "SitemapRecord", "Survey",
           "SurveyStore", "Table", "import_robots_dir", "import_robots_warc", "require_extra",
           "write_report"]
