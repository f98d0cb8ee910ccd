"""The URL Frontier's state in Redis, for nodes on several machines: what
:mod:`polite.frontier._store` keeps in SQLite, with the same methods, on one Redis or a Redis
Cluster.

Every key starts with the store URL's prefix and ``uf:``. A crawl's keys then carry its
crawl ID as their hash tag (``{DEFAULT}``; a brace or a percent sign in it percent-encoded,
as :mod:`polite.storage.redis_frontier` does for a host), so that in a Redis Cluster all of
a crawl's keys share one slot: each change that must not interleave with another node's is
one Lua script over that slot, and the crawls spread over the Cluster's nodes. Per crawl
(``PREFIX uf:{CRAWL}`` then): ``urls``, a hash of its URLs (url -> a JSON record: queue key,
metadata as the client's JSON text, due time or -1 when completed, known, creation date,
sequence number); ``queues``, a hash of its queues (key -> a JSON object of what was set for
it and when it last gave URLs); ``names``, a sorted set of the queues' keys (all scored 0:
in the keys' order, for ListQueues, GetStats and the rest to read a page at a time);
``turn``, the same keys by when each queue last gave URLs (0: never), GetURLs' order;
``seq``, its URLs' counter; ``delay``, its default delay (SetDelay with no key). Per
queue, after a NUL byte (which neither a crawl ID nor a key contains): ``due\\0KEY`` a
sorted set of the URLs to fetch by due time, ``lease\\0KEY`` one of the URLs handed out by
the end of their lease, ``done\\0KEY`` a set of those completed. A member of the sorted
sets is the URL after its sequence number, 15 digits, so that URLs due at the same time come
in the order they were added.

The keys of no crawl, each read or written alone: ``PREFIX uf:crawls``, the set of crawl IDs
(listed before a crawl's first URL is stored, so a crawl is never stored and unlisted),
``PREFIX uf:nodes`` (node -> its last beat) and ``PREFIX uf:nodes_off``. A GetURLs of any
crawl runs the crawls' scripts one after the other.
"""

from __future__ import annotations

import heapq
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import redis

from polite.frontier._store import MAX_TAKE, QUEUE_PAGE, Put, QueueStats, StoredURL
from polite.storage.redis_frontier import hash_tag

__all__ = ["RedisURLStore"]

# The crawls a store remembers having listed in the crawl set (more are listed again).
MAX_LISTED = 10_000

# Every script is one crawl's: KEYS[1] is its hash of URLs (``PREFIX uf:{CRAWL}urls``, what
# a Cluster routes by), and the keys it touches are that crawl's, named from KEYS[1] less
# its ``urls``. ARGV[1] is the crawl set's key on one Redis, where a script lists the crawl
# it stores to itself, or '' on a Cluster, where that key is in another slot and the
# client lists the crawl first; ARGV[2] is the crawl ID. A script's own arguments come
# after.
_LIB = """
local B, C, crawl = string.sub(KEYS[1], 1, -5), ARGV[1], ARGV[2]
local function qk(name, key) return B .. name .. '\\0' .. key end
local function member(seq, url) return string.format('%015d', seq) .. url end
local function touch(key)
  if redis.call('HSETNX', B .. 'queues', key, '{}') == 1 then
    redis.call('ZADD', B .. 'names', 0, key)
    redis.call('ZADD', B .. 'turn', 0, key)
  end
  if C ~= '' then redis.call('SADD', C, crawl) end
end
local function queue(key)
  local js = redis.call('HGET', B .. 'queues', key)
  if js then return cjson.decode(js) end
  return {}
end
local function save_queue(key, s)
  if redis.call('HSET', B .. 'queues', key, cjson.encode(s)) == 1 then
    redis.call('ZADD', B .. 'names', 0, key)
  end
  redis.call('ZADD', B .. 'turn', s.served or 0, key)
end
-- a queue's delay: its own (SetDelay), else its crawl's, else the default
local function delay_of(s, default_delay)
  if s.delay ~= nil then return s.delay end
  return tonumber(redis.call('GET', B .. 'delay') or default_delay)
end
-- what a queue's crawl limit leaves to hand out: the limit less its URLs completed and
-- those in flight at ``now`` (the time as the client wrote it)
local function left(key, limit, now)
  return limit - redis.call('SCARD', qk('done', key))
    - redis.call('ZCOUNT', qk('lease', key), '(' .. now, '+inf')
end
"""

# ARGV[5] '1': the client listed the crawl earlier, not just now; a crawl that holds no
# queue may have been deleted since (and struck off the list), so nothing is stored and -1
# tells the client to list it again first.
_PUT = _LIB + """
local now, from_return = tonumber(ARGV[3]), ARGV[4] == '1'
local urls = B .. 'urls'
if ARGV[5] == '1' and redis.call('EXISTS', B .. 'queues') == 0 then return -1 end
for i = 6, #ARGV, 5 do
  local url, key, meta = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local known, refetch = ARGV[i + 3] == '1', tonumber(ARGV[i + 4])
  local old = redis.call('HGET', urls, url)
  local rec = nil
  if old then rec = cjson.decode(old) end
  if not known then
    if not rec then
      local seq = redis.call('INCR', B .. 'seq')
      rec = {k = key, m = meta, d = 0, n = 0, c = math.floor(now), s = seq}
      redis.call('HSET', urls, url, cjson.encode(rec))
      redis.call('ZADD', qk('due', key), 0, member(seq, url))
      touch(key)
    end
  else
    if rec then
      local m = member(rec.s, url)
      redis.call('ZREM', qk('due', rec.k), m)
      local leased = redis.call('ZSCORE', qk('lease', rec.k), m)
      if leased and tonumber(leased) > now and from_return then
        local s = queue(rec.k)
        s.served = now
        save_queue(rec.k, s)
      end
      redis.call('ZREM', qk('lease', rec.k), m)
      redis.call('SREM', qk('done', rec.k), url)
    else
      rec = {c = math.floor(now), s = redis.call('INCR', B .. 'seq')}
    end
    rec.k, rec.m, rec.n = key, meta, 1
    if refetch > 0 then
      rec.d = refetch
      redis.call('ZADD', qk('due', key), refetch, member(rec.s, url))
    else
      rec.d = -1
      redis.call('SADD', qk('done', key), url)
    end
    redis.call('HSET', urls, url, cjson.encode(rec))
    touch(key)
  end
end
return 1
"""

# Returns {key, url, record} of each URL given, at most ARGV[11] of them. The queues are
# read ARGV[12] at a time in ``turn``'s order (the one that gave longest ago first); those
# that gave move to the end of it once the pages are read.
_TAKE = _LIB + """
local key, per_queue, max_queues = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local lease_s, now, lease = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8] == '1'
local from_return, default_delay = ARGV[9] == '1', tonumber(ARGV[10])
local most, page = tonumber(ARGV[11]), tonumber(ARGV[12])
local urls = B .. 'urls'
local out, served, gave = {}, 0, {}
local function full()
  return (max_queues > 0 and served >= max_queues) or #out >= most
end
local function visit(k, s)
  local lapsed = redis.call('ZRANGEBYSCORE', qk('lease', k), '-inf', now)
  for _, m in ipairs(lapsed) do
    redis.call('ZREM', qk('lease', k), m)
    local js = redis.call('HGET', urls, string.sub(m, 16))
    if js then
      local rec = cjson.decode(js)
      if rec.d >= 0 then redis.call('ZADD', qk('due', k), rec.d, m) end
    end
  end
  local ok = (s.blocked or 0) <= now and (s.held or 0) <= now
  local served_at = s.served or 0
  local spacing = math.max(delay_of(s, default_delay), s.interval or 0)
  if ok and served_at > 0 and now < served_at + spacing then ok = false end
  -- with a spacing, one URL in flight (the lapsed leases were given back above)
  if ok and from_return and spacing > 0 and redis.call('ZCARD', qk('lease', k)) > 0 then
    ok = false
  end
  local room = most - #out
  if per_queue > 0 and per_queue < room then room = per_queue end
  if from_return and spacing > 0 then room = 1 end
  if ok and (s.limit or 0) > 0 then
    local rest = left(k, s.limit, ARGV[7])
    if rest <= 0 then ok = false
    elseif rest < room then room = rest end
  end
  if not ok then return end
  local ms = redis.call('ZRANGEBYSCORE', qk('due', k), '-inf', now, 'LIMIT', 0, room)
  if #ms == 0 then return end
  served = served + 1
  for _, m in ipairs(ms) do
    local url = string.sub(m, 16)
    if lease then
      redis.call('ZREM', qk('due', k), m)
      redis.call('ZADD', qk('lease', k), now + lease_s, m)
    end
    table.insert(out, {k, url, redis.call('HGET', urls, url)})
  end
  if lease then
    s.served = now
    table.insert(gave, {k, s})
  end
end
if key ~= '' then
  local js = redis.call('HGET', B .. 'queues', key)
  if js then visit(key, cjson.decode(js)) end
else
  local at = 0
  while not full() do
    local keys = redis.call('ZRANGE', B .. 'turn', at, at + page - 1)
    if #keys == 0 then break end
    at = at + #keys
    for _, k in ipairs(keys) do
      if full() then break end
      local js = redis.call('HGET', B .. 'queues', k)
      if js then visit(k, cjson.decode(js)) end
    end
  end
end
for _, g in ipairs(gave) do save_queue(g[1], g[2]) end
return out
"""

_LEASE = _LIB + """
local url, lease_s = ARGV[3], tonumber(ARGV[4])
local now, interval = tonumber(ARGV[5]), tonumber(ARGV[6])
local from_return, default_delay = ARGV[7] == '1', tonumber(ARGV[8])
local js = redis.call('HGET', B .. 'urls', url)
if not js then return 0 end
local rec = cjson.decode(js)
local m = member(rec.s, url)
local due = redis.call('ZSCORE', qk('due', rec.k), m)
if not due or tonumber(due) > now then return 0 end
local s = queue(rec.k)
-- with a spacing, one URL in flight; and never past the queue's crawl limit
if from_return and math.max(delay_of(s, default_delay), interval) > 0
    and redis.call('ZCOUNT', qk('lease', rec.k), '(' .. ARGV[5], '+inf') > 0 then
  return 0
end
if (s.limit or 0) > 0 and left(rec.k, s.limit, ARGV[5]) <= 0 then return 0 end
redis.call('ZREM', qk('due', rec.k), m)
redis.call('ZADD', qk('lease', rec.k), now + lease_s, m)
s.served, s.interval = now, interval
save_queue(rec.k, s)
return 1
"""

_REMOVE = _LIB + """
-- ARGV[3] url, ARGV[4] '' to delete it, else its metadata as completed
local url = ARGV[3]
local urls = B .. 'urls'
local js = redis.call('HGET', urls, url)
if not js then return 0 end
local rec = cjson.decode(js)
local m = member(rec.s, url)
redis.call('ZREM', qk('due', rec.k), m)
redis.call('ZREM', qk('lease', rec.k), m)
if ARGV[4] == '' then
  redis.call('SREM', qk('done', rec.k), url)
  redis.call('HDEL', urls, url)
else
  redis.call('SADD', qk('done', rec.k), url)
  rec.d, rec.m = -1, ARGV[4]
  redis.call('HSET', urls, url, cjson.encode(rec))
end
return 1
"""

_DELETE_QUEUE = _LIB + """
local key = ARGV[3]
local urls = B .. 'urls'
local gone = 0
for _, name in ipairs({'due', 'lease'}) do
  for _, m in ipairs(redis.call('ZRANGE', qk(name, key), 0, -1)) do
    redis.call('HDEL', urls, string.sub(m, 16))
    gone = gone + 1
  end
end
for _, url in ipairs(redis.call('SMEMBERS', qk('done', key))) do
  redis.call('HDEL', urls, url)
  gone = gone + 1
end
redis.call('DEL', qk('due', key), qk('lease', key), qk('done', key))
redis.call('HDEL', B .. 'queues', key)
redis.call('ZREM', B .. 'names', key)
redis.call('ZREM', B .. 'turn', key)
return gone
"""

_SET_QUEUE = _LIB + """
-- ARGV[3] key, ARGV[4] field, ARGV[5] value, ARGV[6] '1': only if the queue exists
local key = ARGV[3]
if ARGV[6] == '1' and redis.call('HEXISTS', B .. 'queues', key) == 0 then
  return 0
end
local s = queue(key)
s[ARGV[4]] = tonumber(ARGV[5])
save_queue(key, s)
if C ~= '' then redis.call('SADD', C, crawl) end
return 1
"""

_HOLD = _LIB + """
-- ARGV[3], ARGV[4]...: a key, until when it is passed over; a queue gone is left so
for i = 3, #ARGV, 2 do
  if redis.call('HEXISTS', B .. 'queues', ARGV[i]) == 1 then
    local s = queue(ARGV[i])
    s.held = tonumber(ARGV[i + 1])
    save_queue(ARGV[i], s)
  end
end
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisURLStore:
    """The frontier's URLs and queues in one Redis database or a Redis Cluster
    (``prefix`` before each key)."""

    def __init__(self, client: redis.Redis | redis.RedisCluster, prefix: str, *,
                 default_delay_s: float, spacing_from_return: bool = False,
                 page: int = QUEUE_PAGE) -> None:
        """``page``: the queues a call reads at a time (a script, or one round trip)."""
        self._r = client
        self._p = prefix + "uf:"
        self._cluster = isinstance(client, redis.RedisCluster)
        self._crawls = self._p + "crawls"
        self._default_delay_s = default_delay_s
        self._from_return = spacing_from_return
        self._page = page
        # Both used from the service's store threads at once (redis-py's clients are safe to
        # share): a race only changes which crawl goes first, or lists a crawl once more.
        self._turn = 0  # which crawl a GetURLs of any crawl asks first
        self._listed: set[str] = set()  # on a Cluster, the crawls this store listed
        self._put = client.register_script(_PUT)
        self._take_script = client.register_script(_TAKE)
        self._lease = client.register_script(_LEASE)
        self._remove = client.register_script(_REMOVE)
        self._delete_queue = client.register_script(_DELETE_QUEUE)
        self._set_queue = client.register_script(_SET_QUEUE)
        self._hold = client.register_script(_HOLD)

    def close(self) -> None:
        self._r.close()

    def _base(self, crawl: str) -> str:
        """What each key of ``crawl`` starts with: the prefix and its hash tag."""
        return f"{self._p}{{{hash_tag(crawl)}}}"

    def _run(self, script: Any, crawl: str, *args: Any, stores: bool = False) -> Any:
        """``script`` on ``crawl``'s keys; ``stores``: it may store the crawl's first URL or
        queue, which on a Cluster is listed in the crawl set first."""
        base = self._base(crawl)
        if stores and self._cluster:
            self._r.sadd(self._crawls, crawl)
            if len(self._listed) >= MAX_LISTED:
                self._listed.clear()
            self._listed.add(crawl)
        return script(keys=[base + "urls"],
                      args=["" if self._cluster else self._crawls, crawl, *args])

    # -- writing ---------------------------------------------------------------------------

    def put(self, items: Sequence[Put], now: float) -> None:
        by_crawl: dict[str, list[Any]] = defaultdict(list)
        for item in items:
            by_crawl[item.crawl] += [item.url, item.key,
                                     json.dumps(item.metadata, separators=(",", ":")),
                                     "1" if item.known else "0", repr(item.refetch_at)]
        for crawl, args in by_crawl.items():
            # on a Cluster, a crawl is listed (a round trip to the crawl set's node) before
            # this process first stores to it, and again only when it was deleted since
            earlier = self._cluster and crawl in self._listed
            if self._run(self._put, crawl, repr(now), "1" if self._from_return else "0",
                         "1" if earlier else "0", *args, stores=not earlier) == -1:
                self._run(self._put, crawl, repr(now), "1" if self._from_return else "0",
                          "0", *args, stores=True)

    def take(self, crawl: str | None, key: str, *, per_queue: int, queues: int,
             lease_s: float, now: float) -> list[StoredURL]:
        return self._take(crawl, key, per_queue, queues, lease_s, now, lease=True)

    def heads(self, crawl: str | None, key: str, *, per_queue: int, queues: int, now: float
              ) -> list[StoredURL]:
        return self._take(crawl, key, per_queue, queues, 0.0, now, lease=False)

    def _take(self, crawl: str | None, key: str, per_queue: int, queues: int,
              lease_s: float, now: float, *, lease: bool) -> list[StoredURL]:
        """Each crawl's queues by one script, those of any crawl one crawl after the other
        (each crawl's script in its slot), from a crawl one further each call."""
        crawls = [crawl] if crawl is not None else self._every_crawl()
        taken: list[StoredURL] = []
        served = 0
        for name in crawls:
            if (queues and served >= queues) or len(taken) >= MAX_TAKE:
                break
            rows = self._run(self._take_script, name, key, per_queue,
                             queues - served if queues else 0, repr(lease_s), repr(now),
                             "1" if lease else "0", "1" if self._from_return else "0",
                             repr(self._default_delay_s), MAX_TAKE - len(taken), self._page)
            served += len({_text(k) for k, _, _ in rows})
            taken += [self._stored(name, _text(url), json.loads(_text(record)))
                      for _, url, record in rows if record is not None]
        return taken

    @staticmethod
    def _stored(crawl: str, url: str, record: dict[str, Any]) -> StoredURL:
        due = float(record["d"])
        return StoredURL(crawl, url, str(record["k"]), json.loads(record["m"]),
                         None if due < 0 else due, bool(record["n"]), int(record["c"]))

    def lease(self, crawl: str, url: str, lease_s: float, now: float, *,
              interval_s: float = 0.0) -> bool:
        return bool(self._run(self._lease, crawl, url, repr(lease_s), repr(now),
                              repr(interval_s), "1" if self._from_return else "0",
                              repr(self._default_delay_s)))

    def refuse(self, crawl: str, url: str, why: dict[str, list[str]]) -> None:
        found = self.status(crawl, url, "")
        if found is None:
            return
        meta = {**found.metadata, **why}
        self._run(self._remove, crawl, url, json.dumps(meta, separators=(",", ":")))

    def delete_queue(self, crawl: str, key: str) -> int:
        return int(self._run(self._delete_queue, crawl, key))

    def delete_crawl(self, crawl: str) -> int:
        gone = 0
        base = self._base(crawl)
        while keys := self._r.zrange(base + "names", 0, self._page - 1):
            for key in keys:
                gone += self.delete_queue(crawl, _text(key))
        self._r.delete(base + "urls", base + "queues", base + "names", base + "turn",
                       base + "seq", base + "delay")
        self._r.srem(self._crawls, crawl)
        self._listed.discard(crawl)
        return gone

    def purge(self, crawl: str, key: str, before: float) -> int:
        gone = 0
        for url, record in self._records(crawl):
            if record["c"] < before and (not key or record["k"] == key):
                gone += int(self._run(self._remove, crawl, url, ""))
        return gone

    def set_delay(self, crawl: str, key: str, delay_s: float) -> None:
        if key:
            self._run(self._set_queue, crawl, key, "delay", repr(delay_s), "0", stores=True)
        else:
            self._r.set(self._base(crawl) + "delay", repr(delay_s))

    def block(self, crawl: str, key: str, until: float) -> None:
        self._run(self._set_queue, crawl, key, "blocked", repr(until), "1")

    def set_limit(self, crawl: str, key: str, limit: int) -> None:
        self._run(self._set_queue, crawl, key, "limit", str(limit), "0", stores=True)

    def hold(self, queues: Sequence[tuple[str, str, float]]) -> None:
        by_crawl: dict[str, list[str]] = defaultdict(list)
        for crawl, key, until in queues:
            by_crawl[crawl] += [key, repr(until)]
        for crawl, args in by_crawl.items():
            self._run(self._hold, crawl, *args)

    # -- the nodes sharing the database -----------------------------------------------------

    def beat(self, node: str, now: float) -> None:
        self._r.hset(self._p + "nodes", node, repr(now))

    def leave(self, node: str) -> None:
        self._r.hdel(self._p + "nodes", node)
        self._r.hdel(self._p + "nodes_off", node)

    def nodes(self, since: float) -> list[str]:
        seen = self._r.hgetall(self._p + "nodes")
        return sorted(_text(n) for n, at in seen.items() if float(_text(at)) >= since)

    def set_active(self, node: str | None, active: bool) -> None:
        names = [node] if node is not None else [
            _text(n) for n in self._r.hkeys(self._p + "nodes")]
        for name in names:
            if active:
                self._r.hdel(self._p + "nodes_off", name)
            else:
                self._r.hset(self._p + "nodes_off", name, "1")

    def active(self, node: str | None, since: float) -> bool:
        if node is not None:
            return not self._r.hexists(self._p + "nodes_off", node)
        return not any(self._r.hexists(self._p + "nodes_off", name)
                       for name in self.nodes(since))

    # -- reading ---------------------------------------------------------------------------

    def _crawl_pages(self) -> Iterator[list[str]]:
        """The crawl set a page at a time (SSCAN: a crawl may come twice while the set
        grows)."""
        cursor = 0
        while True:
            cursor, found = self._r.sscan(self._crawls, cursor, count=self._page)
            if found:
                yield [_text(c) for c in found]
            if not cursor:
                return

    def _every_crawl(self) -> Iterator[str]:
        """The crawls for a GetURLs of any crawl, from one further each call: those after
        the first ``turn`` of the set's order, then those, read a page at a time."""
        count = int(self._r.scard(self._crawls))
        if not count:
            return
        self._turn = (self._turn + 1) % count
        turn, seen = self._turn, 0
        for page in self._crawl_pages():
            if seen + len(page) <= turn:  # wholly before the turn: read again at the end
                seen += len(page)
                continue
            yield from page[max(turn - seen, 0):]
            seen += len(page)
        seen = 0
        for page in self._crawl_pages():
            if seen >= turn:
                return
            yield from page[:turn - seen]
            seen += len(page)

    def crawls(self) -> list[str]:
        """The crawls holding queues: the crawl set, each crawl's queues counted in one
        pipeline a page of crawls (on a Cluster, one round trip to each node holding some).
        The list is whole: ListCrawls answers with every crawl."""
        listed: set[str] = set()
        for found in self._crawl_pages():
            pipe = self._r.pipeline(transaction=False)
            for crawl in found:
                pipe.hlen(self._base(crawl) + "queues")
            listed.update(c for c, n in zip(found, pipe.execute(), strict=True) if n)
        return sorted(listed)

    def _pages(self, crawl: str, start: int = 0) -> Iterator[list[str]]:
        """The crawl's queue keys in order, a page at a time, from the ``start``-th."""
        names = self._base(crawl) + "names"
        while keys := self._r.zrange(names, start, start + self._page - 1):
            yield [_text(k) for k in keys]
            start += len(keys)

    def _counts(self, crawl: str, keys: list[str], now: float
                ) -> list[tuple[int, int, int, int, float]]:
        """(due, lapsed, in flight, completed, blocked until) of each queue (one round trip;
        a queue gone meanwhile has 0 of each)."""
        base = self._base(crawl)
        pipe = self._r.pipeline(transaction=False)
        for key in keys:
            pipe.zcard(f"{base}due\0{key}")
            pipe.zcount(f"{base}lease\0{key}", "-inf", now)
            pipe.zcount(f"{base}lease\0{key}", f"({now!r}", "+inf")
            pipe.scard(f"{base}done\0{key}")
            pipe.hget(base + "queues", key)
        found = pipe.execute()
        return [(*found[i:i + 4], float(json.loads(_text(found[i + 4])).get("blocked", 0))
                 if found[i + 4] is not None else 0.0) for i in range(0, len(found), 5)]

    def queues(self, crawl: str, *, include_inactive: bool, start: int, size: int,
               now: float) -> list[str]:
        """A page of the crawl's queue keys in their order; the active ones (holding URLs
        not completed, not blocked) are found a page of queues at a time from the first,
        the inactive ones counted and passed over."""
        if include_inactive:
            names = self._base(crawl) + "names"
            return [_text(k) for k in self._r.zrange(names, start, start + size - 1)]
        found: list[str] = []
        passed = 0
        for keys in self._pages(crawl):
            for key, (due, lapsed, flying, _, blocked) in zip(
                    keys, self._counts(crawl, keys, now), strict=True):
                if not due + lapsed + flying or blocked > now:
                    continue
                if passed < start:
                    passed += 1
                    continue
                found.append(key)
                if len(found) >= size:
                    return found
        return found

    def _counted(self, crawl: str, key: str, now: float
                 ) -> Iterator[list[tuple[str, tuple[int, int, int, int, float]]]]:
        """Each queue's counts (one queue's with ``key``), a page of queues at a time."""
        if key:
            if self._r.hexists(self._base(crawl) + "queues", key):
                yield [(key, self._counts(crawl, [key], now)[0])]
            return
        for keys in self._pages(crawl):
            yield list(zip(keys, self._counts(crawl, keys, now), strict=True))

    def stats(self, crawl: str, key: str, now: float) -> QueueStats:
        size = in_process = completed = active = queues = 0
        for page in self._counted(crawl, key, now):
            for _, (due, lapsed, flying, done, _) in page:
                size += due + lapsed
                in_process += flying
                completed += done
                active += 1 if due + lapsed + flying else 0
                queues += 1
        return QueueStats(size, in_process, completed, active, queues)

    def queue_counts(self, crawl: str, limit: int, now: float
                     ) -> list[tuple[str, int, int, int]]:
        best: list[tuple[str, int, int, int]] = []
        for page in self._counted(crawl, "", now):
            rows = [(k, d + lapsed, f, c) for k, (d, lapsed, f, c, _) in page]
            best = heapq.nsmallest(limit, best + rows, key=lambda row: (-(row[1] + row[2]),
                                                                         row[0]))
        return best

    def _records(self, crawl: str) -> list[tuple[str, dict[str, Any]]]:
        return [(_text(url), json.loads(_text(record))) for url, record
                in self._r.hscan_iter(self._base(crawl) + "urls", count=1000)]

    def status(self, crawl: str, url: str, key: str) -> StoredURL | None:
        js = self._r.hget(self._base(crawl) + "urls", url)
        if js is None:
            return None
        record = json.loads(_text(js))
        if key and record["k"] != key:
            return None
        return self._stored(crawl, url, record)

    def _filtered(self, crawl: str, key: str, contains: str | None, ignore_case: bool
                  ) -> list[tuple[str, dict[str, Any]]]:
        found = []
        needle = (contains or "").lower() if ignore_case else contains
        for url, record in self._records(crawl):
            if key and record["k"] != key:
                continue
            if needle and needle not in (url.lower() if ignore_case else url):
                continue
            found.append((url, record))
        found.sort(key=lambda pair: pair[1]["s"])
        return found

    def urls(self, crawl: str, key: str, *, start: int, size: int, contains: str | None,
             ignore_case: bool) -> list[StoredURL]:
        found = self._filtered(crawl, key, contains, ignore_case)[start:start + size]
        return [self._stored(crawl, url, record) for url, record in found]

    def count(self, crawl: str, key: str, *, contains: str | None, ignore_case: bool) -> int:
        return len(self._filtered(crawl, key, contains, ignore_case))
