"""The crawl frontier in Redis: crawl workers on several machines share one queue.

Every key of a host carries the hash tag ``{HOST}``, so that in a Redis Cluster all of a
host's keys share one slot and each operation on a host is one Lua script, atomic on the
server (a host with a brace or a percent sign in it, ``}evil.test``, which a lenient URL
parser lets through, stands there percent-encoded, ``{%7Devil.test}``: its brace would end
the tag early and scatter its keys over several slots); the crawl-wide keys carry the tag
``{f}`` and share another. No script touches both: a host's script returns the host's state
(a version, its due time, its counts), the client holds the newest state of each host and
applies it to the crawl-wide keys (``_APPLY``) in the pipeline of its next call, or within
:data:`APPLY_S`; ``_APPLY`` takes a state only if it is newer than the one it has and moves
the counts by the difference from the host's last state. A page's changes (its links, its
acknowledgement, its host's next lease: :meth:`RedisFrontier.settle`) are one round trip.

Keys (``PREFIX`` as :class:`polite.storage.RedisStore`'s, ``polite:`` unless the URL says
``?prefix=``):

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
- ``PREFIX fm:{HOST}`` hash ``seq`` (the host's queue counter), ``state``, the host's
  counts ``q`` / ``l`` / ``f`` / ``s`` (URLs queued, leased, fetched, skipped) and ``v``
  (the version of its state, one more at each change);
- ``PREFIX {f}:hosts`` zset HOST -> next due time, every host with URLs queued or leased
  (read a bounded slice at a time by :meth:`RedisFrontier.due_hosts`);
- ``PREFIX {f}:counts`` hash ``q`` / ``l`` / ``f`` / ``s``, the sums of the hosts' counts;
  ``PREFIX {f}:fetched`` hash HOST -> URLs fetched; ``PREFIX {f}:applied`` hash HOST -> the
  last state applied (``version,q,l,f,s``);
- ``PREFIX f:seeds`` set of the seeds' hosts (the crawl's scope);
- ``PREFIX {f}:workers`` hash WORKER -> what it last said of itself (JSON),
  ``PREFIX {f}:beats`` hash WORKER -> the server's time of its last heartbeat.

A worker killed with states held (sent by a host's script, not yet applied) leaves the
crawl-wide keys behind for those hosts, never ahead: the host's next change carries its whole state;
a host queued for the first time is put in the index before its script runs (no later than
its true due time); and a host still in the index whose URLs are all decided comes up due,
where the lease that finds nothing sends its state. So the queued and leased counts (which
say when the crawl is over) are exact again once a dead worker's leases end; a skipped
count of a host whose URLs were only marked seen, and never queued since, may stay behind.

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

from polite.errors import ConfigError, InvalidURL
from polite.storage.frontier import NO_BATCH, Batch, FrontierCounts, FrontierItem, Settled
from polite.storage.redis import (
    UNREACHABLE,
    AnyRedis,
    _Call,
    _is_cluster,
    _Later,
    _Lua,
    _Step,
    _text,
    client_from_url,
    pipeline,
)
from polite.storage.url import StoreURL

__all__ = ["APPLY_S", "RedisFrontier", "WorkerBeat", "hash_tag"]

# Every per-host script sees the same KEYS, the host's eight keys (one Cluster slot, by the
# hash tag), and no other: the crawl-wide index and counts are in another slot, written by
# _APPLY in a second call. ARGV[1] is the host. Each script returns {its answer, the host's
# state}: the state is {version, due ("" none), queued, leased, fetched, skipped}, or
# false when nothing changed (a version is taken only by a change).
_PRELUDE = """
local fq, fd, fp, fl, fi, fs, fm, fo = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6],
  KEYS[7], KEYS[8]
local host = ARGV[1]
local changed = false

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
local function due_at()
  local due = nil
  local function consider(at)
    if at ~= nil and (due == nil or at < due) then due = at end
  end
  if redis.call('ZCARD', fq) > redis.call('ZCARD', fp) then consider(0) end
  consider(first_score(fp))
  consider(first_score(fd))
  consider(first_score(fl))
  if due == nil then return '' end
  return string.format('%.17g', due)
end

local function count(field, n)
  if n ~= 0 then
    redis.call('HINCRBY', fm, field, n)
    changed = true
  end
end

-- The host's state for the crawl-wide index and counts; forced: also when unchanged (a
-- lease that found nothing tells the index what is true, mending a lost _APPLY).
local function state(forced)
  if not changed and not forced then return false end
  local v = redis.call('HINCRBY', fm, 'v', 1)
  local c = redis.call('HMGET', fm, 'q', 'l', 'f', 's')
  return {v, due_at(), tonumber(c[1] or 0), tonumber(c[2] or 0), tonumber(c[3] or 0),
          tonumber(c[4] or 0)}
end

-- Whether ``url`` is leased, and to ``owner`` when one is named (a worker whose lease ran
-- out and was taken by another may no longer decide the URL).
local function holds(url, owner)
  if redis.call('ZSCORE', fl, url) == false then return false end
  return owner == '' or redis.call('HGET', fo, url) == owner
end
"""

# KEYS: the crawl-wide index (zset HOST -> due), counts (hash), fetched per host (hash) and
# each host's last state applied (hash HOST -> "version,q,l,f,s"), all of one slot. ARGV:
# the host and its state as a per-host script returned it. A state older than the one
# applied changes nothing, so states may arrive late, twice or out of order; the counts move
# by the difference from the host's last state, so they are exact once each host's latest
# state is applied, whatever was lost to a kill before.
_APPLY = """
local hosts, counts, fetched, applied = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local host, v = ARGV[1], tonumber(ARGV[2])
local old = {0, 0, 0, 0, 0}
local last = redis.call('HGET', applied, host)
if last then
  local i = 1
  for n in string.gmatch(last, '[^,]+') do old[i] = tonumber(n); i = i + 1 end
end
if v <= old[1] then return 0 end
local fields = {'q', 'l', 'f', 's'}
for i = 1, 4 do
  local delta = tonumber(ARGV[3 + i]) - old[i + 1]
  if delta ~= 0 then redis.call('HINCRBY', counts, fields[i], delta) end
end
if tonumber(ARGV[6]) > 0 then redis.call('HSET', fetched, host, ARGV[6]) end
if ARGV[3] == '' then
  redis.call('ZREM', hosts, host)
else
  redis.call('ZADD', hosts, ARGV[3], host)
end
redis.call('HSET', applied, host, table.concat({ARGV[2], ARGV[4], ARGV[5], ARGV[6], ARGV[7]},
                                               ','))
return 1
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
if mark then count('s', new) else count('q', new) end
-- queueing, the client put the host in the index first, maybe earlier than true: the state
-- is sent whatever changed, to set it right
return {out, state(not mark)}
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
  if url == nil then return {false, state(true)} end
  redis.call('ZREM', fq, url)
  redis.call('ZREM', fp, url)
  count('q', -1)
  count('l', 1)
end
redis.call('ZADD', fl, ARGV[3], url)
if ARGV[4] ~= '' then redis.call('HSET', fo, url, ARGV[4]) end
changed = true  -- the host's due time moved
return {{url, redis.call('HGET', fi, url)}, state(false)}
"""

# ARGV: host, short URL, "1" if fetched, the revisit time or "", the URL's digest, the
# worker ("" any). Returns 1 if it was leased (to the worker).
_DONE = _PRELUDE + """
local url = ARGV[2]
if not holds(url, ARGV[6]) then return {0, false} end
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
  if ARGV[3] == '1' then count('f', 1) else count('s', 1) end
end
return {1, state(false)}
"""

# ARGV: host, short URL, attempts, not_before, the worker ("" any). Returns 1 if it was
# leased (to the worker).
_RELEASE = _PRELUDE + """
local url = ARGV[2]
if not holds(url, ARGV[5]) then return {0, false} end
redis.call('ZREM', fl, url)
redis.call('HDEL', fo, url)
local seq, _, _, rest = unpack_item(redis.call('HGET', fi, url))
redis.call('HSET', fi, url, seq .. ',' .. ARGV[3] .. ',' .. ARGV[4] .. ',' .. rest)
enqueue(url, seq, ARGV[4])
count('l', -1)
count('q', 1)
changed = true  -- the host's due time moved
return {1, state(false)}
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
end
return {#leased, state(false)}
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
    changed = true  -- the host's due time moved
  end
end
return {kept, state(false)}
"""

# KEYS: the seeds' set. ARGV: how many seeds the worker knows. Returns false when that is
# still the count (seeds are only ever added), else every seed: a poll reads the set only
# when it grew.
_SEEDS = """
if redis.call('SCARD', KEYS[1]) == tonumber(ARGV[1]) then return false end
return redis.call('SMEMBERS', KEYS[1])
"""

_DEFAULTS: tuple[Any, ...] = (0, "seed", 0, None, None, None, None)
_REQUEUE_BATCH = 500  # hosts per round trip
APPLY_S = 0.005  # the longest a host's state waits to be applied to the crawl-wide keys




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


def hash_tag(host: str) -> str:
    """``host`` (or the frontier service's crawl ID) as its keys' hash tag: as it is,
    unless it holds a brace (which would end the tag, or leave it empty, and scatter the
    host's keys over the Cluster's slots) or a percent sign; those three are
    percent-encoded, so no two hosts share a tag and every host without them keeps the keys
    it always had."""
    if "{" in host or "}" in host or "%" in host:
        return host.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return host


class RedisFrontier:
    """The frontier in a Redis database (one server, or a Redis Cluster): every change of a
    host one script, atomic on the server.

    A change costs one round trip: the host's script answers with the host's state, which
    is held here and applied to the crawl-wide keys in the pipeline of this frontier's next
    call, or within :data:`APPLY_S` when none comes (:meth:`flush` at once). The crawl-wide
    keys are thus at most a few milliseconds behind a worker, never ahead; a worker's own
    reads (counts, due hosts) carry its held states first, so it reads its own changes.

    What survives a Redis restart is what the server's persistence keeps, as for
    :class:`polite.storage.RedisStore`.
    """

    def __init__(self, client: AnyRedis, *, prefix: str = "polite:", worker: str = "",
                 cluster: bool = False) -> None:
        self._redis = client
        self._prefix = prefix
        self.worker = worker
        self._cluster = cluster
        self._beat = _Lua(_BEAT)
        self._renew = _Lua(_RENEW)
        self._held: dict[str, set[str]] = {}  # host -> short URLs this worker leased
        self._add = _Lua(_ADD)
        self._lease = _Lua(_LEASE)
        self._done = _Lua(_DONE)
        self._release = _Lua(_RELEASE)
        self._requeue = _Lua(_REQUEUE)
        self._apply = _Lua(_APPLY)
        self._seeds_lua = _Lua(_SEEDS)
        self._time = _Lua("return redis.call('TIME')")
        g = f"{prefix}{{f}}:"  # the crawl-wide keys: one Cluster slot by their hash tag
        self._index, self._counts, self._fetched = f"{g}hosts", f"{g}counts", f"{g}fetched"
        self._applied = f"{g}applied"
        self._workers, self._beats = f"{g}workers", f"{g}beats"
        self._apply_keys = [self._index, self._counts, self._fetched, self._applied]
        self._seeds_key = f"{prefix}f:seeds"
        self._seeds: set[str] = set()
        # host -> its latest state not yet applied, in the order of the hosts' last changes
        # (so that a flush moves the totals in the order the changes happened)
        self._states: dict[str, list[Any]] = {}
        self._later = _Later(self.flush, APPLY_S)

    @classmethod
    def from_url(cls, url: str | StoreURL, *, worker: str = "", knob: str = "store="
                 ) -> RedisFrontier:
        """``redis://[:PASSWORD@]HOST:PORT/DB[?prefix=P]`` (``rediss://`` for TLS,
        ``unix:///SOCKET?db=DB`` for a Unix socket, ``&cluster=1`` for a Redis Cluster); the
        prefix names the crawl, so that several crawls share one Redis. ``knob`` names the
        setting in errors (``--store``)."""
        client, prefix = client_from_url(url, knob=knob)
        return cls(client, prefix=prefix, worker=worker, cluster=_is_cluster(client))

    @property
    def client(self) -> AnyRedis:
        """The connection, for keys of the same crawl kept beside the frontier's."""
        return self._redis

    @property
    def prefix(self) -> str:
        return self._prefix

    def batch(self) -> Batch:
        return NO_BATCH  # each change is a script of its own, atomic on the server

    def _keys(self, host: str) -> list[str]:
        return [self._key(name, host) for name in ("fq", "fd", "fp", "fl", "fi", "fs", "fm",
                                                   "fo")]

    def _key(self, name: str, host: str) -> str:
        return f"{self._prefix}{name}:{{{hash_tag(host)}}}"

    # -- the round trips --------------------------------------------------------------------

    async def _pipeline(self, steps: Sequence[_Step]) -> list[Any]:
        return await pipeline(self._redis, steps)

    async def _send(self, steps: Sequence[_Step]) -> list[Any]:
        """The held states' applications, then ``steps``, in one round trip; the host
        states the steps' scripts return are held in turn. Returns the steps' replies."""
        states = list(self._states.items())
        self._states.clear()
        applies = [_Call(self._apply, self._apply_keys, [host, *state])
                   for host, state in states]
        try:
            replies = await self._pipeline([*applies, *steps])
        except BaseException:
            self._hold(states, again=True)
            raise
        return replies[len(applies):]

    def _hold(self, states: Sequence[tuple[str, list[Any]]], *, again: bool = False) -> None:
        """Keep each host's newest state for the next round trip (``again``: states sent in
        one that failed, older than any held since)."""
        for host, state in states:
            held = self._states.get(host)
            if held is not None and int(held[0]) >= int(state[0]):
                continue
            if held is not None and not again:
                del self._states[host]  # to the end: the order of the last changes
            self._states[host] = state
        if self._states:
            self._later.arm()

    async def flush(self) -> None:
        """Apply every held host state to the crawl-wide keys now."""
        if self._states:
            await self._send([])

    async def _run(self, calls: Sequence[tuple[_Lua, str, list[Any]]],
                   before: Sequence[_Step] = ()) -> list[Any]:
        """Per-host scripts ``(script, host, args)`` (after the plain steps ``before``) in
        one round trip with the held states; returns the scripts' answers. A worker killed
        before its held states are sent leaves the index and counts behind for those hosts:
        the next change of the host brings them up to date (its state carries everything),
        and a host left in the index comes up due, where a lease that finds nothing sends
        its state."""
        replies = (await self._send([*before, *(
            _Call(script, self._keys(host), args) for script, host, args in calls)]))[
            len(before):]
        self._hold([(host, reply[1]) for (_, host, _), reply in zip(calls, replies,
                                                                     strict=True) if reply[1]])
        return [reply[0] for reply in replies]

    async def _one(self, script: _Lua, host: str, args: list[Any]) -> Any:
        return (await self._run([(script, host, args)]))[0]

    async def _script(self, script: _Lua, host: str, args: list[Any]) -> Any:
        """One host's script alone, its state not applied (what a worker killed at once
        after it leaves behind)."""
        return (await self._pipeline([_Call(script, self._keys(host), args)]))[0]

    # -- queueing ---------------------------------------------------------------------------

    def _inserts(self, items: Sequence[FrontierItem], mark: bool
                 ) -> tuple[list[tuple[_Lua, str, list[Any]]], list[list[int]], dict[str, float]]:
        """The per-host scripts that queue (or mark seen) ``items``, the items' positions
        per script, and the earliest not_before per host."""
        by_host: dict[str, list[tuple[int, str]]] = {}
        for at, item in enumerate(items):
            host, short = _split(item.url)
            if host != item.host:
                raise InvalidURL(f"the frontier URL {item.url!r} is not on the host "
                                 f"{item.host!r}")
            by_host.setdefault(host, []).append((at, short))
        # One script per host, all in one round trip: each host's change is atomic, the
        # batch as a whole is not (nor need it be: a URL belongs to one host).
        calls: list[tuple[_Lua, str, list[Any]]] = []
        for host, shorts in by_host.items():
            args: list[str | int | bytes] = [host, "1" if mark else "0"]
            for at, short in shorts:
                item = items[at]
                args += [short, _digest(short), item.attempts, _number(item.not_before),
                         _pack_rest(item)]
            calls.append((self._add, host, args))
        earliest = {host: min(items[at].not_before for at, _ in shorts)
                    for host, shorts in by_host.items()}
        return calls, [[at for at, _ in shorts] for shorts in by_host.values()], earliest

    def _index_first(self, earliest: dict[str, float]) -> _Step:
        """A new host is in the index before its URLs are queued (never later than its true
        due time, whatever is lost to a kill); the host's state then sets the true one. It
        goes first in the round trip: one connection keeps the order (in a Cluster, the
        index's node is written to first)."""
        index = self._index

        def step(pipe: Any) -> None:
            pipe.zadd(index, earliest, lt=True)
        return step

    async def _insert(self, items: Sequence[FrontierItem], mark: bool) -> list[FrontierItem]:
        calls, positions, earliest = self._inserts(items, mark)
        if not calls:
            return []
        before = [] if mark else [self._index_first(earliest)]
        replies = await self._run(calls, before)
        return [items[at] for at in sorted(
            at for ats, flags in zip(positions, replies, strict=True)
            for at, flag in zip(ats, flags, strict=True) if flag)]

    async def add(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        return await self._insert(items, False)

    async def mark_seen(self, items: Sequence[FrontierItem]) -> list[FrontierItem]:
        return await self._insert(items, True)

    # -- leases -----------------------------------------------------------------------------

    def _lease_call(self, host: str, now: float, lease_s: float
                    ) -> tuple[_Lua, str, list[Any]]:
        return (self._lease, host,
                [host, repr(float(now)), repr(float(now + lease_s)), self.worker])

    def _leased(self, host: str, reply: Any) -> FrontierItem | None:
        if reply is None:
            return None
        short, packed = cast(list[bytes], reply)
        if self.worker:
            self._held.setdefault(host, set()).add(short.decode())
        return _unpack(host, short.decode(), packed.decode())

    async def lease(self, host: str, now: float, lease_s: float) -> FrontierItem | None:
        return self._leased(host, await self._one(*self._lease_call(host, now, lease_s)))

    def _done_call(self, url: str, fetched: bool, revisit_at: float | None
                   ) -> tuple[_Lua, str, list[Any]] | None:
        try:
            host, short = _split(url)
        except InvalidURL:
            return None  # never queued, so never leased
        self._let_go(host, short)
        return (self._done, host, [host, short, "1" if fetched else "0",
                                   "" if revisit_at is None else _number(revisit_at),
                                   _digest(short), self.worker])

    async def done(self, url: str, *, fetched: bool, revisit_at: float | None = None) -> None:
        call = self._done_call(url, fetched, revisit_at)
        if call is not None:
            await self._one(*call)

    async def settle(self, url: str, *, fetched: bool, revisit_at: float | None = None,
                     add: Sequence[FrontierItem] = (), mark: Sequence[FrontierItem] = (),
                     lease: tuple[str, float, float] | None = None) -> Settled:
        """A page decided, in one round trip: ``mark`` marked seen, ``add`` queued, ``url``
        acknowledged (as :meth:`done`), then ``lease`` (host, now, lease_s) taken, each
        host's change one script as when made one by one, in that order."""
        marks, mark_at, _ = self._inserts(mark, True)
        adds, add_at, earliest = self._inserts(add, False)
        calls = [*marks, *adds]
        done = self._done_call(url, fetched, revisit_at)
        if done is not None:
            calls.append(done)
        if lease is not None:
            calls.append(self._lease_call(*lease))
        replies = await self._run(calls, [self._index_first(earliest)] if adds else [])

        def new(items: Sequence[FrontierItem], positions: list[list[int]],
                flags: Sequence[Any]) -> list[FrontierItem]:
            return [items[at] for at in sorted(
                at for ats, got in zip(positions, flags, strict=True)
                for at, flag in zip(ats, got, strict=True) if flag)]

        return Settled(new(add, add_at, replies[len(marks):len(marks) + len(adds)]),
                       new(mark, mark_at, replies[:len(marks)]),
                       None if lease is None else self._leased(lease[0], replies[-1]))

    async def release(self, item: FrontierItem) -> None:
        try:
            host, short = _split(item.url)
        except InvalidURL:
            return
        self._let_go(host, short)
        await self._one(self._release, host,
                        [host, short, item.attempts, _number(item.not_before), self.worker])

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
            kept += sum(int(n) for n in await self._run([
                (self._renew, host, [host, repr(float(until)), self.worker, *shorts])
                for host, shorts in hosts[start:start + _REQUEUE_BATCH]]))
        return kept

    # -- reading the crawl-wide keys (after this worker's held states) -----------------------

    async def _read(self, step: Callable[[Any], object]) -> Any:
        return (await self._send([step]))[0]

    async def next_due(self, host: str) -> float | None:
        due = await self._read(lambda pipe: pipe.zscore(self._index, host))
        return None if due is None else float(due)

    async def due_hosts(self, now: float, limit: int) -> list[tuple[str, float]]:
        # one bounded read of the index (ZRANGEBYSCORE ... LIMIT), whatever the crawl's size
        found = cast(list[tuple[bytes, float]], await self._read(
            lambda pipe: pipe.zrangebyscore(self._index, "-inf", repr(float(now)), start=0,
                                            num=limit, withscores=True)))
        return [(host.decode(), float(due)) for host, due in found]

    async def hosts(self) -> list[tuple[str, float]]:
        found = cast(list[tuple[bytes, float]], await self._read(
            lambda pipe: pipe.zrange(self._index, 0, -1, withscores=True)))
        return [(host.decode(), float(due)) for host, due in found]

    async def host_fetched(self) -> dict[str, int]:
        counts = await self._read(lambda pipe: pipe.hgetall(self._fetched))
        return {_text(host): int(n) for host, n in counts.items()}

    async def get_host_state(self, host: str) -> str | None:
        state = await self._redis.hget(self._key("fm", host), "state")
        return None if state is None else _text(state)

    async def set_host_state(self, host: str, state: str) -> None:
        await self._redis.hset(self._key("fm", host), "state", state)

    async def add_seed_hosts(self, hosts: Sequence[str]) -> None:
        if hosts:
            await self._redis.sadd(self._seeds_key, *hosts)

    async def seed_hosts(self) -> set[str]:
        """The seeds' hosts; the set itself is read only when it grew since this frontier
        last read it (a poll of a crawl of a million seeds reads a number)."""
        found = (await self._pipeline([_Call(self._seeds_lua, [self._seeds_key],
                                             [len(self._seeds)])]))[0]
        if found:
            self._seeds = {_text(host) for host in found}
        return set(self._seeds)

    async def requeue_leased(self) -> int:
        hosts = [host for host, _ in await self.hosts()]
        total = 0
        for start in range(0, len(hosts), _REQUEUE_BATCH):
            total += sum(int(n) for n in await self._run([
                (self._requeue, host, [host]) for host in hosts[start:start + _REQUEUE_BATCH]]))
        return total

    async def counts(self) -> FrontierCounts:
        values = await self._read(lambda pipe: pipe.hmget(self._counts, ["q", "l", "f", "s"]))
        return FrontierCounts(*(int(v or 0) for v in values))

    # -- the workers sharing the crawl ------------------------------------------------------

    async def heartbeat(self, about: dict[str, Any]) -> float:
        """Say this worker is alive, and what it has done (shown by :meth:`workers`);
        returns the server's time."""
        if not self.worker:
            raise ConfigError("a heartbeat needs the frontier's worker name")
        (now,) = await self._send([_Call(self._beat, [self._workers, self._beats], [
            self.worker, json.dumps(about, separators=(",", ":"))])])
        return float(now)

    async def workers(self) -> tuple[float, list[WorkerBeat]]:
        """The server's time, and every worker that ever beat, the latest first."""
        # the time of the node that stamped the beats (KEYS only route the script there)
        (secs, micros), said, beats = await self._send([
            _Call(self._time, [self._beats], []), lambda pipe: pipe.hgetall(self._workers),
            lambda pipe: pipe.hgetall(self._beats)])
        secs, micros = int(secs), int(micros)
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
        # Stopped by an event, not by cancelling it: a cancel that lands in a round trip
        # can be lost in redis-py or come back as Redis away, and a heartbeat that beat on
        # kept a worker whose crawl was over waiting for good.
        ended = asyncio.Event()

        async def beat() -> None:
            renewed = time.time()
            while not ended.is_set():
                with contextlib.suppress(*UNREACHABLE):
                    await self.heartbeat(about(False))
                    if time.time() - renewed >= lease_s / 3:
                        renewed = time.time()
                        await self.renew(renewed + lease_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(ended.wait(), min(beat_s, lease_s / 3))

        ticker = asyncio.create_task(beat())
        try:
            yield
        finally:
            ended.set()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker  # its round trip under way, at most
            with contextlib.suppress(*UNREACHABLE):
                await self.heartbeat(about(True))

    async def forget_worker(self) -> None:
        """Take this worker off the list (it ended its part of the crawl)."""
        await self._send([lambda pipe: pipe.hdel(self._workers, self.worker),
                          lambda pipe: pipe.hdel(self._beats, self.worker)])

    async def host_count(self) -> tuple[int, int]:
        """Hosts with URLs queued or leased, and hosts with a page fetched."""
        waiting, fetched = await self._send([lambda pipe: pipe.zcard(self._index),
                                             lambda pipe: pipe.hlen(self._fetched)])
        return int(waiting), int(fetched)

    async def close(self) -> None:
        try:
            await self._later.finish()
        finally:
            await self._redis.aclose()


class WorkerBeat(NamedTuple):
    """A worker as its last heartbeat left it."""

    worker: str
    at: float  # the server's time of the beat
    about: dict[str, Any]
