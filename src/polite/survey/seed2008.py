"""The values seed 004 (Roy, "Web Site Metadata", UC Berkeley, 2008) reports, which the
report shows beside a new survey's. Alexa's top 100,000 domains; section numbers are the
seed's."""

from __future__ import annotations

__all__ = ["AGENTS", "FACTS", "FIELDS", "LEVELS", "SITEMAPS_PER_DOMAIN", "SUMMARIES",
           "URIS_PER_DOMAIN"]

# Single figures stated in the text (section 3).
FACTS: dict[str, float] = {
    "sites": 100_000,
    "files": 44_832,                      # robots.txt files (3.2)
    "robots_share": 0.451,                # Fig. 4, overall
    "sitemaps_share": 0.063,              # Fig. 4, overall
    "largest_file_lines": 380_000,        # cityweekend.com.cn, 12.3 MB (3.2)
    "sections_total": 202_332,            # Fig. 7
    "sections_without_disallow": 33_589,  # 16.6 %
    "sections_with_one_disallow": 138_695,  # 68.5 %
    "largest_section_disallows": 153_540,
    "agent_lines": 225_304,               # Table 3, all User-agent fields
    "distinct_agents": 4_483,             # Fig. 8
    "files_with_sitemap_lines": 6_268,    # 14 % of the files (3.4)
    "sitemap_lines_total": 10_029,
    "files_with_one_sitemap_line": 5_710,  # 91 %
    "most_sitemap_lines": 530,
    "sitemap_downloads": 70_984,          # successful downloads (3.5)
    "sitemap_distinct_files": 60_321,
    "sitemap_forbidden": 111,
    "sitemap_domains": 5_303,             # Fig. 11
    "domains_with_one_sitemap": 3_880,    # 73.2 %
    "sitemap_uris": 836_260_857,          # Fig. 13
    "tree_sites_read": 5_374,             # 4.1: sites with sitemap files downloaded
    "tree_sites": 2_941,                  # of which had URIs
    "tree_roots": 7_271,
    "tree_max_depth": 402,
}

# Mean, σ and median where the seed states them (3.3).
SUMMARIES: dict[str, tuple[float, float, float]] = {
    "robots_lines": (29.8, 293.4, 7),
    "sections_per_file": (6, 29.5, 2),
}

# Table 2: field, files, fields, fields per file.
FIELDS = [
    ("User-Agent", 42_578, 225_428, 5.29), ("Disallow", 39_928, 947_892, 23.74),
    ("Sitemap", 6_765, 10_979, 1.62), ("Allow", 3_832, 23_177, 6.05),
    ("Crawl-Delay", 2_987, 4_537, 1.52), ("Noindex", 905, 2_151, 2.38),
    ("Host", 728, 758, 1.04), ("Request-Rate", 121, 127, 1.05),
    ("Visit-Time", 89, 102, 1.15), ("ACAP-Crawler", 71, 234, 3.30),
]

# Table 3: agent, occurrences, share of all User-agent fields.
AGENTS = [
    ("*", 46_645, 0.2070), ("Mediapartners-Google", 3_825, 0.0170), ("wget", 3_787, 0.0168),
    ("WebZIP", 3_014, 0.0134), ("Mozilla", 2_696, 0.0120), ("GoogleBot", 2_694, 0.0120),
    ("Microsoft URL Control", 2_647, 0.0117), ("WebBandit", 2_271, 0.0101),
    ("lwp-trivial", 2_227, 0.0099), ("MIIxpc", 2_180, 0.0097),
]

# Table 4: sitemap files by indirection level.
LEVELS = [(0, 9_081), (1, 90_512), (2, 43_044), (3, 533), (4, 510)]

# Table 5: the amazon domains' sitemaps and URIs (amazon.de: "many download errors").
URIS_PER_DOMAIN = [
    ("amazon.com", 4_945, 119_346_271), ("amazon.ca", 2_980, 96_476_534),
    ("amazon.co.jp", 2_933, 54_487_651), ("amazon.co.uk", 3_177, 44_668_202),
    ("amazon.fr", 378, 15_571_351), ("amazon.de", 3_108, 226),
]

# Table 6: the ten domains with the most sitemap files.
SITEMAPS_PER_DOMAIN = [
    ("pricecheck.co.za", 5_006), ("ricardo.ch", 5_000), ("amazon.com", 4_945),
    ("mailonsunday.co.uk", 3_395), ("amazon.co.uk", 3_177), ("amazon.de", 3_108),
    ("amazon.ca", 2_980), ("amazon.co.jp", 2_933), ("alacrastore.com", 1_644),
    ("motofakty.pl", 1_505),
]
