"""Demonstration sites served on a real socket (``polite demo``): the news website of the
REGP paper (Ge & Ding 2016) for the experiments of its section 5. Standard library only."""

from __future__ import annotations

from polite.demo.regp_site import RegpSite, Request, TableRow, start_site, visit_time_value

__all__ = ["RegpSite", "Request", "TableRow", "start_site", "visit_time_value"]
