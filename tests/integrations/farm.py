"""The loopback farm the drop-ins are judged against: sites that set Crawl-delay,
Request-rate and Disallow lines, one that answers 429 with Retry-After; politeness measured
where it happens, at the sites (arrival times)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from tests.crawl.test_crawl_farm import chain_site, gaps, page
from tests.sites import Reply, Site, serve

__all__ = ["AGENT", "DELAY_S", "PAGES", "RATE_S", "RETRY_AFTER_S", "Site", "farm_sites", "fresh",
           "gaps", "paused", "urls_of"]

AGENT = "FarmBot"
PAGES = 4
DELAY_S = 0.4  # the delay site's Crawl-delay
RATE_S = 1 / 3  # the rate site's Request-rate: 3/1s
RETRY_AFTER_S = 1.0  # the busy site's first answer to /p0


@contextmanager
def farm_sites(prefix: str = "127.0.21") -> Iterator[dict[str, Site]]:
    """Three sites on ``prefix``.1-3; ``busy`` answers its first /p0 with 429."""
    sites = {
        "delay": chain_site(f"{prefix}.1", f"User-agent: *\nCrawl-delay: {DELAY_S}\n"
                                           "Disallow: /private/\n", pages=PAGES),
        "rate": chain_site(f"{prefix}.2", "User-agent: FarmBot\nRequest-rate: 3/1s\n"
                                          "Disallow: /private\n"
                                          "User-agent: *\nDisallow: /\n", pages=PAGES),
        # A short spacing: with none, requests granted while /p0 was on its way (Scrapy
        # sends up to eight at once to a site) could arrive just after the 429; those
        # cannot be called back, and the pause is measured from the first that could.
        "busy": chain_site(f"{prefix}.3", "User-agent: *\nCrawl-delay: 0.1\n"
                                          "Disallow: /private/\n", pages=PAGES),
    }
    with ExitStack() as stack:
        for site in sites.values():
            stack.enter_context(serve(site))
        yield sites


def fresh(sites: dict[str, Site]) -> dict[str, Site]:
    """The farm as new: nothing seen yet, the busy site's 429 to come (the servers are
    kept between tests: stopping one takes half a second)."""
    for site in sites.values():
        site.arrivals.clear()
        site.requests.clear()
        site.seen.clear()
    answers = iter([Reply(429, b"slow down", {"Retry-After": f"{RETRY_AFTER_S:g}"})])
    sites["busy"].routes["/p0"] = lambda: next(answers, page("/p1", "/private/0"))
    return sites


def urls_of(site: Site) -> list[str]:
    """What a script fetches from a site: its pages, one disallowed URL among them."""
    paths = ["/", "/p0", "/private/1", *(f"/p{i}" for i in range(1, PAGES))]
    return [site.origin + path for path in paths]


def paused(sites: dict[str, Site]) -> tuple[float, list[float]]:
    """Seconds between the busy site's 429 and its next request, and the other sites'
    arrivals meanwhile."""
    busy = sites["busy"].arrivals
    first_429 = next(at for at, path in busy if path == "/p0")
    following = [at for at, _ in busy if at > first_429]
    assert following, "the busy site was never asked again"
    pause = following[0] - first_429
    others = [at for name in ("delay", "rate") for at, _ in sites[name].arrivals
              if first_429 < at < first_429 + pause]
    return pause, others
