"""``GET /metrics``: what the node did, as Prometheus text. A module of its own, imported at
the first ``/metrics`` and not when ``polite serve`` starts: ``prometheus_client`` brings
``http.server``, ``urllib.request`` and ``wsgiref`` with it, a twentieth of a start's
instructions for a page most runs are never asked for."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from polite.fetch.activity import Activity
from polite.fetch.cache import PageCache
from polite.fetch.politeness import Politeness

__all__ = ["Exposition"]


class Exposition:
    """The node's metrics, each read from what keeps it when ``/metrics`` is asked."""

    media_type = CONTENT_TYPE_LATEST

    def __init__(self, politeness: Politeness, activity: Activity, answered: Counter[str],
                 decided: Counter[str], cache: PageCache | None) -> None:
        self._registry = registry = CollectorRegistry()
        registry.register(_DecisionCollector(decided))
        registry.register(_RobotsCollector(politeness))
        registry.register(_CollectorObjects())
        registry.register(_ActivityCollector(activity, answered))
        if cache is not None:
            registry.register(_CacheCollector(cache))

    def text(self) -> bytes:
        return generate_latest(self._registry)


class _DecisionCollector:
    """The REST API's answers by result, ``allowed`` or ``refused``
    (``polite_decisions_total``)."""

    def __init__(self, decided: Counter[str]) -> None:
        self._decided = decided

    def collect(self) -> Iterator[Metric]:
        decisions = CounterMetricFamily("polite_decisions", "URLs answered",
                                        labels=["result"])
        for result, count in sorted(self._decided.items()):
            decisions.add_metric([result], count)
        yield decisions


class _CacheCollector:
    """The page cache's counters, read when /metrics is asked."""

    def __init__(self, cache: PageCache) -> None:
        self._cache = cache

    def collect(self) -> Iterator[Metric]:
        stats = self._cache.stats
        for name, value, text in (
                ("hits", stats.hits, "requests answered from the cache"),
                ("misses", stats.misses, "cacheable requests sent to the origin"),
                ("revalidations", stats.revalidated, "stored responses the origin confirmed "
                 "with 304"),
                ("stores", stats.stored, "responses stored")):
            yield CounterMetricFamily(f"polite_cache_{name}", text, value=value)
        yield GaugeMetricFamily("polite_cache_hit_ratio", "(hits + revalidations) / lookups",
                                value=stats.ratio)


class _RobotsCollector:
    """robots.txt requests sent so far: a counter (``polite_robots_fetches_total``)."""

    def __init__(self, politeness: Politeness) -> None:
        self._politeness = politeness

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily("polite_robots_fetches", "robots.txt requests sent",
                                  value=self._politeness.robots_fetches)


class _CollectorObjects:
    """What a full pass of the garbage collector walks, and what it no longer walks
    (``polite serve`` freezes what start-up made): a gauge with a label, ``tracked`` or
    ``frozen``. A full pass runs on the event loop, every request waiting meanwhile, for a
    time in proportion to the tracked objects."""

    def collect(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily("polite_gc_objects", "objects the garbage collector "
                                    "tracks (a full pass walks them) or was told to "
                                    "leave (frozen at start-up)", labels=["state"])
        objects.add_metric(["tracked"], len(gc.get_objects()))
        objects.add_metric(["frozen"], gc.get_freeze_count())
        yield objects


class _ActivityCollector:
    """What the node saw, node-wide (the dashboard holds the per-host detail, so that
    Prometheus gets no label per host). The activity counts the REST API's decisions with
    the proxy's (the dashboard shows both per host); ``answered`` holds the API's, so that
    each gets a series of its own."""

    def __init__(self, activity: Activity, answered: Counter[str]) -> None:
        self._activity = activity
        self._answered = answered

    def collect(self) -> Iterator[Metric]:
        activity = self._activity
        requests = CounterMetricFamily("polite_proxy_requests", "proxied requests by what "
                                       "became of them", labels=["decision"])
        for decision, count in sorted((Counter(activity.totals) - self._answered).items()):
            requests.add_metric([decision], count)
        yield requests
        answered = CounterMetricFamily("polite_api_decisions", "URLs the REST API decided "
                                       "(POST /politeness, /politeness/verbose, GET "
                                       "/politeness) by what became of them",
                                       labels=["decision"])
        for decision, count in sorted(self._answered.items()):
            answered.add_metric([decision], count)
        yield answered
        statuses = CounterMetricFamily("polite_proxy_responses", "proxied requests by the "
                                       "status class answered (refused: polite's 403/429)",
                                       labels=["class"])
        for kind, count in sorted(activity.statuses.items()):
            statuses.add_metric([kind], count)
        yield statuses
        yield GaugeMetricFamily("polite_proxy_queued", "requests held for their host's slot",
                                value=sum(activity.queued.values()))
        yield GaugeMetricFamily("polite_proxy_in_flight", "requests on their way to an origin",
                                value=sum(activity.in_flight.values()))
