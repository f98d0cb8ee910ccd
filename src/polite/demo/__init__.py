"""Demonstration sites served on a real socket (``polite demo``): seed 000's news website
for the REGP experiments of its section 5. Standard library only."""

from __future__ import annotations

from polite.demo.regp_site import RegpSite, Request, TableRow, start_site, visit_time_value

__all__ = ["RegpSite", "Request", "TableRow", "start_site", "visit_time_value"]
