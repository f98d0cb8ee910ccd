"""The crawl frontier in Redis: crawl workers on several machines share one queue.

Every key of a host carries the hash tag ``{HOST}``, so that in a Redis Cluster all of a
host's keys share one slot and each operation on a host is one Lua script, atomic on the
server. Keys (``PREFIX`` as :class:`polite.storage.RedisStore`'s, ``polite:`` unless the URL
says ``?prefix=``):

- ``PREFIX fq:{HOST}`` zset short URL -> seq: queued URLs that may be taken, in queue order;
- ``PREFIX fd:{HOST}`` zset short URL -> not_before: queued URLs whose time has not come
  (moved to ``fq`` by the first lease after it);
- ``PREFIX fp:{HOST}`` zset short URL -> not_before: the URLs in ``fq`` whose not_before is
  not 0 (what :meth:`RedisFrontier.next_due` needs to know of them);
- ``PREFIX fl:{HOST}`` zset short URL -> end of the lease: leased URLs;
- ``PREFIX fi:{HOST}`` hash short URL -> packed item, for queued and leased URLs only;
- ``PREFIX fo:{HOST}`` hash short URL -> the worker holding its lease (the owner);
- ``PREFIX fs:{HOST}`` set of the URLs decided (fetched or skipped), each as the first 8
  bytes of the BLAKE2b digest of its short URL: with ``fi``, the seen set, each URL in one
  of the two;
- ``PREFIX fm:{HOST}`` hash ``seq`` (the host's queue counter) and ``state``;
- ``PREFIX f:hosts`` zset HOST -> next due time, every host with URLs queued or leased;
- ``PREFIX f:seeds`` set of the seeds' hosts (the crawl's scope);
- ``PREFIX f:counts`` hash ``q`` / ``l`` / ``f`` / ``s``: URLs queued, leased, fetched,
  skipped; ``PREFIX f:fetched`` hash HOST -> URLs fetched;
- ``PREFIX f:workers`` hash WORKER -> what it last said of itself (JSON), ``PREFIX f:beats``
  hash WORKER -> the server's time of its last heartbeat.

The seen set keeps 8-byte digests, not URLs: a decided URL costs a set member of 8 bytes
where its text was about 60 (bench/frontier_redis_memory.py). Two URLs of one host whose
digests agree would be taken for one: with ``n`` URLs decided on a host the odds of any such
pair are about ``n**2 / 2**65`` (2.7e-10 for 100,000 URLs), and over a crawl at most
``n_max * N / 2**65`` for ``N`` URLs in all (3e-6 for a billion URLs, no host over
100,000): a URL lost to a collision is never fetched, nothing else goes wrong.

Leases have owners: a frontier made with ``worker=`` writes its name on each URL it leases,
and its acknowledgement or release of a URL another worker has leased since (its own lease
ran out) changes nothing.

A *short URL* is the URL without its scheme and host, which the keys already say: ``h`` for
http or ``s`` for https, then the rest (``h/a?b``, ``s:8443/``). A *packed item* is
``seq,attempts,not_before,JSON``, the JSON array holding depth, via, hops, lastmod,
changefreq, page_type and srcloc, cut after the last one that is not the default. Queue
order is per host, so the seq counter is too.

An item's host must be its URL's host name (as :func:`polite.core.urls.split_origin` gives
it for a URL in normal form): ``done()`` is given a URL only and finds the host's keys from
it, so an item on another host is refused with :class:`InvalidURL`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, NamedTuple, cast

import redis.asyncio as aioredis

from polite.errors import ConfigError, InvalidURL
from polite.storage.frontier import NO_BATCH, Batch, FrontierCounts, FrontierItem
from polite.storage.redis import _text, client_from_url

__all__ = ["RedisFrontier", "WorkerBeat"]

# Every per-host script sees the same KEYS: the host's eight keys, then the three global
# ones; ARGV[1] is the host. The global keys are in other Cluster slots: for a Cluster the
# script must leave them alone and return the host's new due time and the counter changes,
# for the client to apply in a second call.
_PRELUDE = """
local fq, fd, fp, fl, fi, fs, fm, fo = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6],
  KEYS[7], KEYS[8]
local hosts, counts, fetched = KEYS[9], KEYS[10], KEYS[11]
local host = ARGV[1]

local function unpack_item(packed)
  return string.match(packed, '^(%d+),(%d+),([^,]*),(.*)$')
end

-- nb is the not_before as the client wrote it (a string: Lua would round it on the way back)
local function enqueue(url, seq, nb)
  if tonumber(nb) > 0 then
    redis.call('ZADD', fd, nb, url)
  else
    redis.call('ZADD', fq, seq, url)
    if tonumber(nb) ~= 0 then redis.call('ZADD', fp, nb, url) end
  end
end

local function first_score(key)
  local top = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if top[2] then return tonumber(top[2]) end
  return nil
end

-- The host's earliest queued or leased URL is due at its not_before or the end of its lease.
local function reindex()
  local due = nil
  local function consider(at)
    if at ~= nil and (due == nil or at < due) then due = at end
  end
  if redis.call('ZCARD', fq) > redis.call('ZCARD', fp) then consider(0) end
  consider(first_score(fp))
  consider(first_score(fd))
  consider(first_score(fl))
  if due == nil then
    redis.call('ZREM', hosts, host)
  else
    redis.call('ZADD', hosts, string.format('%.17g', due), host)
  end
end

local function count(field, n)
  if n ~= 0 then redis.call('HINCRBY', counts, field, n) end
end

-- Whether ``url`` is leased, and to ``owner`` when one is named (a worker whose lease ran
-- out and was taken by another may no longer decide the URL).
local function holds(url, owner)
  if redis.call('ZSCORE', fl, url) == false then return false end
  return owner == '' or redis.call('HGET', fo, url) == owner
end
"""

# ARGV: host, "1" to mark seen ("0" to queue), then per item: short URL, its digest,
# attempts, not_before, JSON. Returns 1 or 0 per item: whether it was new.
_ADD = _PRELUDE + """
local mark = ARGV[2] == '1'
local out = {}
local new = 0
for i = 3, #ARGV, 5 do
  local url = ARGV[i]
  if redis.call('HEXISTS', fi, url) == 0 and redis.call('SISMEMBER', fs, ARGV[i + 1]) == 0
  then
    new = new + 1
    out[#out + 1] = 1
    if mark then
      redis.call('SADD', fs, ARGV[i + 1])
    else
      local seq = string.format('%d', redis.call('HINCRBY', fm, 'seq', 1))
      redis.call('HSET', fi, url, seq .. ',' .. ARGV[i + 2] .. ',' .. ARGV[i + 3] .. ','
                 .. ARGV[i + 4])
      enqueue(url, seq, ARGV[i + 3])
    end
  else
    out[#out + 1] = 0
  end
end
if mark then
  count('s', new)
elseif new > 0 then
  count('q', new)
  reindex()
end
return out
"""

# ARGV: host, now, the lease's end, the worker ("" none). Returns the short URL and its
# packed item, or nil.
_LEASE = _PRELUDE + """
local url = nil
local expired = redis.call('ZRANGEBYSCORE', fl, '-inf', ARGV[2])
if #expired > 0 then
  local oldest = nil
  for _, candidate in ipairs(expired) do
    local seq = tonumber((unpack_item(redis.call('HGET', fi, candidate))))
    if oldest == nil or seq < oldest then oldest, url = seq, candidate end
  end
else
  -- every URL whose time came takes its queue place now (each is moved once)
  local due = redis.call('ZRANGEBYSCORE', fd, '-inf', ARGV[2], 'WITHSCORES')
  for j = 1, #due, 2 do
    local seq = unpack_item(redis.call('HGET', fi, due[j]))
    redis.call('ZREM', fd, due[j])
    redis.call('ZADD', fq, seq, due[j])
    redis.call('ZADD', fp, due[j + 1], due[j])
  end
  url = redis.call('ZRANGE', fq, 0, 0)[1]
  if url == nil then return nil end
  redis.call('ZREM', fq, url)
  redis.call('ZREM', fp, url)
  count('q', -1)
  count('l', 1)
end
redis.call('ZADD', fl, ARGV[3], url)
if ARGV[4] ~= '' then redis.call('HSET', fo, url, ARGV[4]) end
reindex()
return {url, redis.call('HGET', fi, url)}
"""

# ARGV: host, short URL, "1" if fetched, the revisit time or "", the URL's digest, the
# worker ("" any). Returns 1 if it was leased (to the worker).
_DONE = _PRELUDE + """
local url = ARGV[2]
if not holds(url, ARGV[6]) then return 0 end
redis.call('ZREM', fl, url)
redis.call('HDEL', fo, url)
count('l', -1)
if ARGV[4] ~= '' then
  local _, _, _, rest = unpack_item(redis.call('HGET', fi, url))
  local seq = string.format('%d', redis.call('HINCRBY', fm, 'seq', 1))
  redis.call('HSET', fi, url, seq .. ',0,' .. ARGV[4] .. ',' .. rest)
  enqueue(url, seq, ARGV[4])
  count('q', 1)
else
  redis.call('HDEL', fi, url)
  redis.call('SADD', fs, ARGV[5])
  if ARGV[3] == '1' then
    count('f', 1)
    redis.call('HINCRBY', fetched, host, 1)
  else
    count('s', 1)
  end
end
reindex()
return 1
"""

# ARGV: host, short URL, attempts, not_before, the worker ("" any). Returns 1 if it was
# leased (to the worker).
_RELEASE = _PRELUDE + """
local url = ARGV[2]
if not holds(url, ARGV[5]) then return 0 end
redis.call('ZREM', fl, url)
redis.call('HDEL', fo, url)
local seq, _, _, rest = unpack_item(redis.call('HGET', fi, url))
redis.call('HSET', fi, url, seq .. ',' .. ARGV[3] .. ',' .. ARGV[4] .. ',' .. rest)
enqueue(url, seq, ARGV[4])
count('l', -1)
count('q', 1)
reindex()
return 1
"""

# ARGV: host. Every lease of the host given back; returns how many.
_REQUEUE = _PRELUDE + """
local leased = redis.call('ZRANGE', fl, 0, -1)
for _, url in ipairs(leased) do
  local seq, _, nb = unpack_item(redis.call('HGET', fi, url))
  enqueue(url, seq, nb)
end
if #leased > 0 then
  redis.call('DEL', fl, fo)
  count('l', -#leased)
  count('q', #leased)
  reindex()
end
return #leased
"""

# KEYS: the workers' hash, the heartbeats' hash. ARGV: the worker, what it says (JSON).
# Returns the server's time.
_BEAT = """
local t = redis.call('TIME')
local now = string.format('%d.%06d', t[1], t[2])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], now)
return now
"""

# ARGV: host, the leases' new end, the worker, then short URLs. Each URL still leased to
# the worker is held until the new end; returns how many were.
_RENEW = _PRELUDE + """
local kept = 0
for i = 4, #ARGV do
  if holds(ARGV[i], ARGV[3]) then
    redis.call('ZADD', fl, ARGV[2], ARGV[i])
    kept = kept + 1
  end
end
if kept > 0 then reindex() end
return kept
"""

_DEFAULTS: tuple[Any, ...] = (0, "seed", 0, None, None, None, None)
_REQUEUE_BATCH = 500  # hosts per round trip


def _split(url: str) -> tuple[str, str]:
    """``(host, short URL)`` of an http(s) URL, from its text (it is in normal form)."""
    if url.startswith("https://"):
        tag, rest = "s", url[8:]
    elif url.startswith("http://"):
        tag, rest = "h", url[7:]
    else:
        raise InvalidURL(f"the frontier URL {url!r} is not an http(s) URL")
    if rest.startswith("["):  # an IPv6 address
        end = rest.find("]") + 1
        host = rest[1:end - 1] if end else ""
    else:
        end = next((i for i, c in enumerate(rest) if c in ":/?#"), len(rest))
        host = rest[:end]
    if not host:
        raise InvalidURL(f"the frontier URL {url!r} has no host")
    return host, tag + rest[end:]


def _digest(short: str) -> bytes:
    """A short URL's member of the seen set (see the module's notes on collisions)."""
    return hashlib.blake2b(short.encode(), digest_size=8).digest()


def _long(host: str, short: str) -> str:
    named = f"[{host}]" if ":" in host else host
    return f"{'https' if short[0] == 's' else 'http'}://{named}{short[1:]}"


def _number(value: float) -> str:
    return "0" if value == 0 else repr(float(value))


def _pack_rest(item: FrontierItem) -> str:
    """The JSON part of a packed item, its trailing defaults cut."""
    fields = [item.depth, item.via, item.hops, item.lastmod, item.changefreq, item.page_type,
              item.srcloc]
    while fields and fields[-1] == _DEFAULTS[len(fields) - 1]:
        fields.pop()
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False)


def _unpack(host: str, short: str, packed: str) -> FrontierItem:
    _, attempts, not_before, rest = packed.split(",", 3)
    fields: list[Any] = json.loads(rest)
    fields.extend(_DEFAULTS[len(fields):])
    depth, via, hops, lastmod, changefreq, page_type, srcloc = fields
    return FrontierItem(_long(host, short), host, depth=depth, via=via, srcloc=srcloc,
                        page_type=page_type, changefreq=changefreq,
                        lastmod=None if lastmod is None else float(lastmod), hops=hops,
                        attempts=int(attempts), not_before=float(not_before))


class RedisFrontier:
    """The frontier in a Redis database: every change one script, atomic on the server.

    What survives a Redis restart is what the server's persistence keeps, as for
    :class:`polite.storage.RedisStore`.
    """

    def __init__(self, client: aioredis.Redis, *, prefix: str = "polite:",
                 worker: str = "") -> None:
        self._redis = client
        self._prefix = prefix
        self.worker = worker
        self._beat = client.register_script(_BEAT)
        self._renew = client.register_script(_RENEW)
        self._held: dict[str, set[str]] = {}  # host -> short URLs this worker leased
        self._add = client.register_script(_ADD)
        self._lease = client.register_script(_LEASE)
        self._done = client.register_script(_DONE)
        self._release = client.register_script(_RELEASE)
        self._requeue = client.register_script(_REQUEUE)

    @classmethod
    def from_url(cls, url: str, *, worker: str = "") -> RedisFrontier:
        """``redis://[:PASSWORD@]HOST:PORT/DB[?prefix=P]`` (``rediss://`` for TLS); the
        prefix names the crawl, so that several crawls share one Redis."""
        client, prefix = client_from_url(url)
        return cls(client, prefix=prefix, worker=worker)

    def batch(self) -> Batch:
        return NO_BATCH  # each change is a script of its own, atomic on the server

    def _keys(self, host: str) -> list[str]:
        p = self._prefix
        return [f"{p}{name}:{{{host}}}" for name in ("fq", "fd", "fp", "fl", "fi", "fs", "fm",
                                                         "fo")
                ] + [f"{p}f:hosts", f"{p}f:counts", f"{p}f:fetched"]

    async def _insert(self, items: Sequence[FrontierItem], mark: bool) -> list[FrontierItem]:
        by_host: dict[str, list[tuple[int, str]]] = {}
        for at, item in enumerate(items):
            host, short = _split(item.url)
            if host != item.host:
                raise InvalidURL(f"the frontier URL {item.url!r} is not on the host "
                                 f"{item.host!r}")
            by_host.setdefault(host, []).append((at, short))
        # One script per host, all in one round trip: each host's change is atomic, the
        # batch as a whole is not (nor need it be: a URL belongs to one host).
        async with self._redis.pipeline(transaction=False) as pipe:
            for host, shorts in by_host.items():
                args: list[str | int | bytes] = [host, "1" if mark else "0"]
                for at, short in shorts:
                    item = items[at]
                    args += [short, _digest(short), item.attempts, _number(item.not_before),
                             _pack_rest(item)]
                await self._add(keys=self._keys(host), args=args, client=pipe)
            replies = await pipe.execute()
        new = sorted(at for (_, shorts), flags in zip(by_host.items(), replies, strict=True)
                     for (at, _), flag in zip(shorts, flags, strict=True) if flag)
        return [items[at] for at in new]

    async def add(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        return await self._insert(items, False)

    async def mark_seen(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        return await self._insert(items, True)

    async def lease(self, host: str, now: float, lease_s: float) -> FrontierItem | None:
        reply = cast(list[bytes] | None, await self._lease(
            keys=self._keys(host),
            args=[host, repr(float(now)), repr(float(now + lease_s)), self.worker]))
        if reply is None:
            return None
        short, packed = reply
        if self.worker:
            self._held.setdefault(host, set()).add(short.decode())
        return _unpack(host, short.decode(), packed.decode())

    async def done(self, url: str, *, fetched: bool, revisit_at: float | None = None) -> None:
        try:
            host, short = _split(url)
        except InvalidURL:
            return  # never queued, so never leased
        self._let_go(host, short)
        await self._done(keys=self._keys(host),
                         args=[host, short, "1" if fetched else "0",
                               "" if revisit_at is None else _number(revisit_at),
                               _digest(short), self.worker])

    async def release(self, item: FrontierItem) -> None:
        try:
            host, short = _split(item.url)
        except InvalidURL:
            return
        self._let_go(host, short)
        await self._release(keys=self._keys(host),
                            args=[host, short, item.attempts, _number(item.not_before),
                                  self.worker])

    def _let_go(self, host: str, short: str) -> None:
        held = self._held.get(host)
        if held is not None:
            held.discard(short)
            if not held:
                del self._held[host]

    async def renew(self, until: float) -> int:
        """Hold every URL this worker leased (and has not decided) until ``until``: a live
        worker's leases do not run out while its URLs wait for their slots. Returns how many
        were still its own."""
        kept = 0
        hosts = list(self._held.items())
        for start in range(0, len(hosts), _REQUEUE_BATCH):
            async with self._redis.pipeline(transaction=False) as pipe:
                for host, shorts in hosts[start:start + _REQUEUE_BATCH]:
                    await self._renew(keys=self._keys(host),
                                      args=[host, repr(float(until)), self.worker, *shorts],
                                      client=pipe)
                kept += sum(int(n) for n in await pipe.execute())
        return kept

    async def next_due(self, host: str) -> float | None:
        due = await self._redis.zscore(f"{self._prefix}f:hosts", host)
        return None if due is None else float(due)

    async def due_hosts(self, now: float, limit: int) -> list[str]:
        """At most ``limit`` hosts with a URL due by ``now``, the longest due first: one
        bounded read of the index, whatever the crawl's size."""
        found = cast(list[bytes], await self._redis.zrangebyscore(
            f"{self._prefix}f:hosts", "-inf", repr(float(now)), start=0, num=limit))
        return [host.decode() for host in found]

    async def hosts(self) -> list[tuple[str, float]]:
        found = cast(list[tuple[bytes, float]], await self._redis.zrange(
            f"{self._prefix}f:hosts", 0, -1, withscores=True))
        return [(host.decode(), float(due)) for host, due in found]

    async def host_fetched(self) -> dict[str, int]:
        counts = await self._redis.hgetall(f"{self._prefix}f:fetched")
        return {_text(host): int(n) for host, n in counts.items()}

    async def get_host_state(self, host: str) -> str | None:
        state = await self._redis.hget(f"{self._prefix}fm:{{{host}}}", "state")
        return None if state is None else _text(state)

    async def set_host_state(self, host: str, state: str) -> None:
        await self._redis.hset(f"{self._prefix}fm:{{{host}}}", "state", state)

    async def add_seed_hosts(self, hosts: Sequence[str]) -> None:
        if hosts:
            await self._redis.sadd(f"{self._prefix}f:seeds", *hosts)

    async def seed_hosts(self) -> set[str]:
        return {_text(host) for host in await self._redis.smembers(f"{self._prefix}f:seeds")}

    async def requeue_leased(self) -> int:
        hosts = [host for host, _ in await self.hosts()]
        total = 0
        for start in range(0, len(hosts), _REQUEUE_BATCH):
            async with self._redis.pipeline(transaction=False) as pipe:
                for host in hosts[start:start + _REQUEUE_BATCH]:
                    await self._requeue(keys=self._keys(host), args=[host], client=pipe)
                total += sum(int(n) for n in await pipe.execute())
        return total

    async def counts(self) -> FrontierCounts:
        values = await self._redis.hmget(f"{self._prefix}f:counts", ["q", "l", "f", "s"])
        return FrontierCounts(*(int(v or 0) for v in values))

    # -- the workers sharing the crawl ------------------------------------------------------

    async def heartbeat(self, about: dict[str, Any]) -> float:
        """Say this worker is alive, and what it has done (shown by :meth:`workers`);
        returns the server's time."""
        if not self.worker:
            raise ConfigError("a heartbeat needs the frontier's worker name")
        p = self._prefix
        now = await self._beat(keys=[f"{p}f:workers", f"{p}f:beats"],
                               args=[self.worker, json.dumps(about, separators=(",", ":"))])
        return float(now)

    async def workers(self) -> tuple[float, list[WorkerBeat]]:
        """The server's time, and every worker that ever beat, the latest first."""
        p = self._prefix
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.time()
            pipe.hgetall(f"{p}f:workers")
            pipe.hgetall(f"{p}f:beats")
            (secs, micros), said, beats = await pipe.execute()
        found = [WorkerBeat(_text(name), float(beats.get(name, 0)), json.loads(about))
                 for name, about in said.items()]
        found.sort(key=lambda beat: -beat.at)
        return secs + micros / 1e6, found

    @contextlib.asynccontextmanager
    async def holding(self, lease_s: float, about: Callable[[bool], dict[str, Any]], *,
                      beat_s: float = 1.0) -> AsyncIterator[None]:
        """While the block runs: a heartbeat every ``beat_s`` saying ``about(False)``, and
        every lease this worker holds renewed every third of ``lease_s``, so that a live
        worker's leases never run out and a dead one's come back within ``lease_s``; a last
        beat says ``about(True)``. Redis unreachable for a while is ridden out (the leases
        may then run out, and other workers take the URLs: the cost of a partition)."""
        async def beat() -> None:
            renewed = time.time()
            while True:
                with contextlib.suppress(OSError, ConnectionError, TimeoutError):
                    await self.heartbeat(about(False))
                    if time.time() - renewed >= lease_s / 3:
                        renewed = time.time()
                        await self.renew(renewed + lease_s)
                await asyncio.sleep(min(beat_s, lease_s / 3))

        ticker = asyncio.create_task(beat())
        try:
            yield
        finally:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker
            with contextlib.suppress(OSError, ConnectionError, TimeoutError):
                await self.heartbeat(about(True))

    async def forget_worker(self) -> None:
        """Take this worker off the list (it ended its part of the crawl)."""
        p = self._prefix
        await self._redis.hdel(f"{p}f:workers", self.worker)
        await self._redis.hdel(f"{p}f:beats", self.worker)

    async def host_count(self) -> tuple[int, int]:
        """Hosts with URLs queued or leased, and hosts with a page fetched."""
        p = self._prefix
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcard(f"{p}f:hosts")
            pipe.hlen(f"{p}f:fetched")
            waiting, fetched = await pipe.execute()
        return int(waiting), int(fetched)

    async def close(self) -> None:
        await self._redis.aclose()


class WorkerBeat(NamedTuple):
    """A worker as its last heartbeat left it."""

    worker: str
    at: float  # the server's time of the beat
    about: dict[str, Any]
