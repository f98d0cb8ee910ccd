"""The URL Frontier's state in Redis, for nodes on several machines: what
:mod:`polite.frontier._store` keeps in SQLite, with the same methods.

Every key starts with the store URL's prefix and ``uf:``; a crawl and a queue key are joined
by a NUL byte, which neither contains. Per crawl, a hash of its URLs (url -> a JSON record:
queue key, metadata as the client's JSON text, due time or -1 when completed, known, creation
date, sequence number) and a hash of its queues (key -> a JSON object of what was set for it
and when it last gave URLs). Per queue, a sorted set of the URLs to fetch by due time, one of
the URLs handed out by the end of their lease, and a set of those completed. A member of
the sorted sets is the URL after its sequence number, 15 digits, so that URLs due at the
same time come in the order they were added. Whatever must not interleave with another
node's change runs as one Lua script; the keys a script touches are named in it, which a
Redis Cluster would refuse (one Redis only).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis

from polite.frontier._store import MAX_TAKE, Put, QueueStats, StoredURL

__all__ = ["RedisURLStore"]

_LIB = """
local P = ARGV[1]
local function q(crawl, key) return crawl .. '\\0' .. key end
local function member(seq, url) return string.format('%015d', seq) .. url end
local function touch(crawl, key)
  redis.call('HSETNX', P .. 'queues\\0' .. crawl, key, '{}')
  redis.call('SADD', P .. 'crawls', crawl)
end
local function queue(crawl, key)
  local js = redis.call('HGET', P .. 'queues\\0' .. crawl, key)
  if js then return cjson.decode(js) end
  return {}
end
local function save_queue(crawl, key, s)
  redis.call('HSET', P .. 'queues\\0' .. crawl, key, cjson.encode(s))
end
-- what a queue's crawl limit leaves to hand out: the limit less its URLs completed and
-- those in flight at ``now`` (the time as the client wrote it)
local function left(qk, limit, now)
  return limit - redis.call('SCARD', P .. 'done\\0' .. qk)
    - redis.call('ZCOUNT', P .. 'lease\\0' .. qk, '(' .. now, '+inf')
end
"""

_PUT = _LIB + """
local now, from_return = tonumber(ARGV[2]), ARGV[3] == '1'
for i = 4, #ARGV, 6 do
  local crawl, url, key, meta = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local known, refetch = ARGV[i + 4] == '1', tonumber(ARGV[i + 5])
  local urls = P .. 'urls\\0' .. crawl
  local old = redis.call('HGET', urls, url)
  local rec = nil
  if old then rec = cjson.decode(old) end
  if not known then
    if not rec then
      local seq = redis.call('INCR', P .. 'seq')
      rec = {k = key, m = meta, d = 0, n = 0, c = math.floor(now), s = seq}
      redis.call('HSET', urls, url, cjson.encode(rec))
      redis.call('ZADD', P .. 'due\\0' .. q(crawl, key), 0, member(seq, url))
      touch(crawl, key)
    end
  else
    if rec then
      local m, oq = member(rec.s, url), q(crawl, rec.k)
      redis.call('ZREM', P .. 'due\\0' .. oq, m)
      local leased = redis.call('ZSCORE', P .. 'lease\\0' .. oq, m)
      if leased and tonumber(leased) > now and from_return then
        local s = queue(crawl, rec.k)
        s.served = now
        save_queue(crawl, rec.k, s)
      end
      redis.call('ZREM', P .. 'lease\\0' .. oq, m)
      redis.call('SREM', P .. 'done\\0' .. oq, url)
    else
      rec = {c = math.floor(now), s = redis.call('INCR', P .. 'seq')}
    end
    rec.k, rec.m, rec.n = key, meta, 1
    if refetch > 0 then
      rec.d = refetch
      redis.call('ZADD', P .. 'due\\0' .. q(crawl, key), refetch, member(rec.s, url))
    else
      rec.d = -1
      redis.call('SADD', P .. 'done\\0' .. q(crawl, key), url)
    end
    redis.call('HSET', urls, url, cjson.encode(rec))
    touch(crawl, key)
  end
end
return 1
"""

_TAKE = _LIB + """
local crawl, any, key = ARGV[2], ARGV[3] == '1', ARGV[4]
local per_queue, max_queues = tonumber(ARGV[5]), tonumber(ARGV[6])
local lease_s, now, lease = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9] == '1'
local from_return, default_delay = ARGV[10] == '1', tonumber(ARGV[11])
local most = tonumber(ARGV[12])
local crawls = {crawl}
if any then crawls = redis.call('SMEMBERS', P .. 'crawls') end
local cands = {}
for _, c in ipairs(crawls) do
  local all = redis.call('HGETALL', P .. 'queues\\0' .. c)
  for i = 1, #all, 2 do
    if key == '' or all[i] == key then
      table.insert(cands, {c, all[i], cjson.decode(all[i + 1])})
    end
  end
end
table.sort(cands, function(a, b)
  local sa, sb = a[3].served or 0, b[3].served or 0
  if sa ~= sb then return sa < sb end
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[2] < b[2]
end)
local out, served = {}, 0
for _, cand in ipairs(cands) do
  if (max_queues > 0 and served >= max_queues) or #out >= most then break end
  local c, k, s = cand[1], cand[2], cand[3]
  local qk = q(c, k)
  local urls = P .. 'urls\\0' .. c
  local lapsed = redis.call('ZRANGEBYSCORE', P .. 'lease\\0' .. qk, '-inf', now)
  for _, m in ipairs(lapsed) do
    redis.call('ZREM', P .. 'lease\\0' .. qk, m)
    local js = redis.call('HGET', urls, string.sub(m, 16))
    if js then
      local rec = cjson.decode(js)
      if rec.d >= 0 then redis.call('ZADD', P .. 'due\\0' .. qk, rec.d, m) end
    end
  end
  local ok = (s.blocked or 0) <= now and (s.held or 0) <= now
  local delay = s.delay
  if delay == nil then
    delay = tonumber(redis.call('HGET', P .. 'crawl_delays', c) or default_delay)
  end
  local served_at = s.served or 0
  local spacing = math.max(delay, s.interval or 0)
  if ok and served_at > 0 and now < served_at + spacing then ok = false end
  -- with a spacing, one URL in flight (the lapsed leases were given back above)
  if ok and from_return and spacing > 0
      and redis.call('ZCARD', P .. 'lease\\0' .. qk) > 0 then
    ok = false
  end
  local room = most - #out
  if per_queue > 0 and per_queue < room then room = per_queue end
  if from_return and spacing > 0 then room = 1 end
  if ok and (s.limit or 0) > 0 then
    local rest = left(qk, s.limit, ARGV[8])
    if rest <= 0 then ok = false
    elseif rest < room then room = rest end
  end
  if ok then
    local ms = redis.call('ZRANGEBYSCORE', P .. 'due\\0' .. qk, '-inf', now, 'LIMIT', 0, room)
    if #ms > 0 then
      served = served + 1
      for _, m in ipairs(ms) do
        local url = string.sub(m, 16)
        if lease then
          redis.call('ZREM', P .. 'due\\0' .. qk, m)
          redis.call('ZADD', P .. 'lease\\0' .. qk, now + lease_s, m)
        end
        table.insert(out, {c, k, url, redis.call('HGET', urls, url)})
      end
      if lease then
        s.served = now
        save_queue(c, k, s)
      end
    end
  end
end
return out
"""

_LEASE = _LIB + """
local crawl, url, lease_s = ARGV[2], ARGV[3], tonumber(ARGV[4])
local now, interval = tonumber(ARGV[5]), tonumber(ARGV[6])
local from_return, default_delay = ARGV[7] == '1', tonumber(ARGV[8])
local js = redis.call('HGET', P .. 'urls\\0' .. crawl, url)
if not js then return 0 end
local rec = cjson.decode(js)
local m, qk = member(rec.s, url), q(crawl, rec.k)
local due = redis.call('ZSCORE', P .. 'due\\0' .. qk, m)
if not due or tonumber(due) > now then return 0 end
local s = queue(crawl, rec.k)
local delay = s.delay
if delay == nil then
  delay = tonumber(redis.call('HGET', P .. 'crawl_delays', crawl) or default_delay)
end
-- with a spacing, one URL in flight; and never past the queue's crawl limit
if from_return and math.max(delay, interval) > 0
    and redis.call('ZCOUNT', P .. 'lease\\0' .. qk, '(' .. ARGV[5], '+inf') > 0 then
  return 0
end
if (s.limit or 0) > 0 and left(qk, s.limit, ARGV[5]) <= 0 then return 0 end
redis.call('ZREM', P .. 'due\\0' .. qk, m)
redis.call('ZADD', P .. 'lease\\0' .. qk, now + lease_s, m)
s.served, s.interval = now, interval
save_queue(crawl, rec.k, s)
return 1
"""

_REMOVE = _LIB + """
-- ARGV[2] crawl, ARGV[3] url, ARGV[4] '' to delete it, else its metadata as completed
local crawl, url = ARGV[2], ARGV[3]
local urls = P .. 'urls\\0' .. crawl
local js = redis.call('HGET', urls, url)
if not js then return 0 end
local rec = cjson.decode(js)
local m, qk = member(rec.s, url), q(crawl, rec.k)
redis.call('ZREM', P .. 'due\\0' .. qk, m)
redis.call('ZREM', P .. 'lease\\0' .. qk, m)
if ARGV[4] == '' then
  redis.call('SREM', P .. 'done\\0' .. qk, url)
  redis.call('HDEL', urls, url)
else
  redis.call('SADD', P .. 'done\\0' .. qk, url)
  rec.d, rec.m = -1, ARGV[4]
  redis.call('HSET', urls, url, cjson.encode(rec))
end
return 1
"""

_DELETE_QUEUE = _LIB + """
local crawl, key = ARGV[2], ARGV[3]
local qk = q(crawl, key)
local urls = P .. 'urls\\0' .. crawl
local gone = 0
for _, name in ipairs({'due', 'lease'}) do
  for _, m in ipairs(redis.call('ZRANGE', P .. name .. '\\0' .. qk, 0, -1)) do
    redis.call('HDEL', urls, string.sub(m, 16))
    gone = gone + 1
  end
end
for _, url in ipairs(redis.call('SMEMBERS', P .. 'done\\0' .. qk)) do
  redis.call('HDEL', urls, url)
  gone = gone + 1
end
redis.call('DEL', P .. 'due\\0' .. qk, P .. 'lease\\0' .. qk, P .. 'done\\0' .. qk)
redis.call('HDEL', P .. 'queues\\0' .. crawl, key)
return gone
"""

_SET_QUEUE = _LIB + """
-- ARGV[2] crawl, ARGV[3] key, ARGV[4] field, ARGV[5] value, ARGV[6] '1': only if it exists
local crawl, key = ARGV[2], ARGV[3]
if ARGV[6] == '1' and redis.call('HEXISTS', P .. 'queues\\0' .. crawl, key) == 0 then
  return 0
end
local s = queue(crawl, key)
s[ARGV[4]] = tonumber(ARGV[5])
save_queue(crawl, key, s)
redis.call('SADD', P .. 'crawls', crawl)
return 1
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisURLStore:
    """The frontier's URLs and queues in one Redis database (``prefix`` before each key)."""

    def __init__(self, client: redis.Redis, prefix: str, *, default_delay_s: float,
                 spacing_from_return: bool = False) -> None:
        self._r = client
        self._p = prefix + "uf:"
        self._default_delay_s = default_delay_s
        self._from_return = spacing_from_return
        self._put = client.register_script(_PUT)
        self._take_script = client.register_script(_TAKE)
        self._lease = client.register_script(_LEASE)
        self._remove = client.register_script(_REMOVE)
        self._delete_queue = client.register_script(_DELETE_QUEUE)
        self._set_queue = client.register_script(_SET_QUEUE)

    def close(self) -> None:
        self._r.close()

    def _key(self, *parts: str) -> str:
        return self._p + "\0".join(parts)

    # -- writing ---------------------------------------------------------------------------

    def put(self, items: Sequence[Put], now: float) -> None:
        args: list[Any] = [self._p, repr(now), "1" if self._from_return else "0"]
        for item in items:
            args += [item.crawl, item.url, item.key,
                     json.dumps(item.metadata, separators=(",", ":")),
                     "1" if item.known else "0", repr(item.refetch_at)]
        self._put(args=args)

    def take(self, crawl: str | None, key: str, *, per_queue: int, queues: int,
             lease_s: float, now: float) -> list[StoredURL]:
        return self._take(crawl, key, per_queue, queues, lease_s, now, lease=True)

    def heads(self, crawl: str | None, key: str, *, per_queue: int, queues: int, now: float
              ) -> list[StoredURL]:
        return self._take(crawl, key, per_queue, queues, 0.0, now, lease=False)

    def _take(self, crawl: str | None, key: str, per_queue: int, queues: int,
              lease_s: float, now: float, *, lease: bool) -> list[StoredURL]:
        rows = self._take_script(args=[
            self._p, crawl or "", "1" if crawl is None else "0", key, per_queue, queues,
            repr(lease_s), repr(now), "1" if lease else "0",
            "1" if self._from_return else "0", repr(self._default_delay_s), MAX_TAKE])
        return [self._stored(_text(c), _text(url), json.loads(_text(record)))
                for c, _, url, record in rows if record is not None]

    @staticmethod
    def _stored(crawl: str, url: str, record: dict[str, Any]) -> StoredURL:
        due = float(record["d"])
        return StoredURL(crawl, url, str(record["k"]), json.loads(record["m"]),
                         None if due < 0 else due, bool(record["n"]), int(record["c"]))

    def lease(self, crawl: str, url: str, lease_s: float, now: float, *,
              interval_s: float = 0.0) -> bool:
        return bool(self._lease(args=[self._p, crawl, url, repr(lease_s), repr(now),
                                      repr(interval_s), "1" if self._from_return else "0",
                                      repr(self._default_delay_s)]))

    def refuse(self, crawl: str, url: str, why: dict[str, list[str]]) -> None:
        found = self.status(crawl, url, "")
        if found is None:
            return
        meta = {**found.metadata, **why}
        self._remove(args=[self._p, crawl, url, json.dumps(meta, separators=(",", ":"))])

    def delete_queue(self, crawl: str, key: str) -> int:
        return int(self._delete_queue(args=[self._p, crawl, key]))

    def delete_crawl(self, crawl: str) -> int:
        gone = 0
        for key in self._r.hkeys(self._key("queues", crawl)):
            gone += self.delete_queue(crawl, _text(key))
        self._r.delete(self._key("urls", crawl), self._key("queues", crawl))
        self._r.srem(self._p + "crawls", crawl)
        self._r.hdel(self._p + "crawl_delays", crawl)
        return gone

    def purge(self, crawl: str, key: str, before: float) -> int:
        gone = 0
        for url, record in self._records(crawl):
            if record["c"] < before and (not key or record["k"] == key):
                gone += int(self._remove(args=[self._p, crawl, url, ""]))
        return gone

    def set_delay(self, crawl: str, key: str, delay_s: float) -> None:
        if key:
            self._set_queue(args=[self._p, crawl, key, "delay", repr(delay_s), "0"])
        else:
            self._r.hset(self._p + "crawl_delays", crawl, repr(delay_s))

    def block(self, crawl: str, key: str, until: float) -> None:
        self._set_queue(args=[self._p, crawl, key, "blocked", repr(until), "1"])

    def set_limit(self, crawl: str, key: str, limit: int) -> None:
        self._set_queue(args=[self._p, crawl, key, "limit", str(limit), "0"])

    def hold(self, queues: Sequence[tuple[str, str, float]]) -> None:
        pipe = self._r.pipeline(transaction=False)
        for crawl, key, until in queues:
            self._set_queue(args=[self._p, crawl, key, "held", repr(until), "1"], client=pipe)
        pipe.execute()

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

    def crawls(self) -> list[str]:
        found = [_text(c) for c in self._r.smembers(self._p + "crawls")]
        return sorted(c for c in found if self._r.hlen(self._key("queues", c)))

    def _queue_keys(self, crawl: str, key: str) -> list[tuple[str, dict[str, Any]]]:
        if key:
            js = self._r.hget(self._key("queues", crawl), key)
            return [] if js is None else [(key, json.loads(_text(js)))]
        every = self._r.hgetall(self._key("queues", crawl))
        return sorted((_text(k), json.loads(_text(v))) for k, v in every.items())

    def _counts(self, crawl: str, keys: list[str], now: float
                ) -> list[tuple[int, int, int, int]]:
        """(due, lapsed, in flight, completed) of each queue."""
        pipe = self._r.pipeline(transaction=False)
        for key in keys:
            pipe.zcard(self._key("due", crawl, key))
            pipe.zcount(self._key("lease", crawl, key), "-inf", now)
            pipe.zcount(self._key("lease", crawl, key), f"({now!r}", "+inf")
            pipe.scard(self._key("done", crawl, key))
        found = pipe.execute()
        return [tuple(found[i:i + 4]) for i in range(0, len(found), 4)]

    def queues(self, crawl: str, *, include_inactive: bool, start: int, size: int,
               now: float) -> list[str]:
        listed = self._queue_keys(crawl, "")
        keys = [k for k, _ in listed]
        if not include_inactive:
            counts = self._counts(crawl, keys, now)
            keys = [k for (k, s), (due, lapsed, flying, _) in zip(listed, counts, strict=True)
                    if due + lapsed + flying and s.get("blocked", 0) <= now]
        return keys[start:start + size]

    def stats(self, crawl: str, key: str, now: float) -> QueueStats:
        keys = [k for k, _ in self._queue_keys(crawl, key)]
        counts = self._counts(crawl, keys, now)
        return QueueStats(sum(d + lapsed for d, lapsed, _, _ in counts),
                          sum(f for _, _, f, _ in counts), sum(c for *_, c in counts),
                          sum(1 for d, lapsed, f, _ in counts if d + lapsed + f), len(keys))

    def queue_counts(self, crawl: str, limit: int, now: float
                     ) -> list[tuple[str, int, int, int]]:
        keys = [k for k, _ in self._queue_keys(crawl, "")]
        rows = [(k, d + lapsed, f, c) for k, (d, lapsed, f, c)
                in zip(keys, self._counts(crawl, keys, now), strict=True)]
        rows.sort(key=lambda row: (-(row[1] + row[2]), row[0]))
        return rows[:limit]

    def _records(self, crawl: str) -> list[tuple[str, dict[str, Any]]]:
        return [(_text(url), json.loads(_text(record))) for url, record
                in self._r.hscan_iter(self._key("urls", crawl), count=1000)]

    def status(self, crawl: str, url: str, key: str) -> StoredURL | None:
        js = self._r.hget(self._key("urls", crawl), url)
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
