"""The shared store: one Redis database that several ``polite serve`` nodes use together.

A slot is claimed by a Lua script, so the read, the arithmetic and the write happen in one
step on the server, and the time it judges by is the server's own (``TIME``), so nodes whose
clocks disagree still hand each slot out once. The script is the twin of
:func:`polite.core.politeness.rules.claim_slot`; the contract suite runs both.

Keys (``PREFIX`` is ``polite:`` unless the URL says ``?prefix=``):

- ``PREFIX slot:HOST`` hash ``last`` / ``backoff`` / ``lease`` (when the lease of its request
  in flight ends); expires a day after it stops mattering;
- ``PREFIX delays`` hash DOMAIN -> seconds; ``PREFIX robots_delays`` hash HOST -> the
  seconds its robots.txt last asked for;
- ``PREFIX response_times`` hash HOST -> running average of response times, seconds;
- ``PREFIX robots:ORIGIN`` hash of a :class:`RobotsRecord`; ``PREFIX robots_fetch:ORIGIN``
  the claim of the process fetching it (the others wait for the record), expiring;
- ``PREFIX activity:FIELD`` hash HOST -> a dashboard counter (added to with HINCRBY by
  every node) or the latest fact (see :class:`HostActivity`);
- ``PREFIX node:NAME`` a node's heartbeat (its JSON summary, expiring unless renewed);
  ``PREFIX nodes`` the set of names to look for;
- ``PREFIX page:URL`` the cached responses of a URL (in a Redis Cluster every key of the
  cache starts ``PREFIX {pages}``, one slot); ``PREFIX pages:used`` zset URL -> last
  use, ``PREFIX pages:size`` hash URL -> bytes, ``PREFIX pages:total`` bytes in all.

What survives a Redis restart is what the server's own persistence keeps (``appendonly
yes`` for nothing lost); see the README.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, TypeAlias, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import (
    ClusterDownError,
    NoScriptError,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.typing import EncodableT, FieldT

from polite.core.politeness.rules import (
    LEASE_RECHECK_S,
    RESPONSE_TIME_WEIGHT,
    HostClaim,
    SlotClaim,
)
from polite.errors import ConfigError, SettingError
from polite.storage.base import (
    COUNTERS,
    FACTS,
    HostActivity,
    HostFacts,
    RobotsRecord,
    raise_if_cancelled,
)
from polite.storage.url import Kind, StoreURL, read_store_url

__all__ = ["UNREACHABLE", "AnyRedis", "RedisStore", "client_from_url"]

_T = TypeVar("_T")

# What says the server does not answer (down, restarting, loading its files, a Cluster
# without a quorum) rather than that a request was wrong: a client may wait and ask again.
UNREACHABLE: tuple[type[BaseException], ...] = (
    RedisConnectionError, RedisTimeoutError, ClusterDownError, TryAgainError, OSError)

# The scripts' clock: the time a caller gave (seconds), or the server's own when it gave ""
# (so that nodes whose clocks disagree are judged by one).
_CLOCK = """
local function clock(given)
  if given == '' then
    local t = redis.call('TIME')
    return tonumber(t[1]) + tonumber(t[2]) / 1000000
  end
  return tonumber(given)
end
"""

# KEYS[1] the slot hash. ARGV: interval (s), now (s, or "" for the server's TIME),
# "1" to take the slot ("0" to look), how long (s) an idle slot key is kept.
_CLAIM = _CLOCK + """
local now = clock(ARGV[2])
local held = redis.call('HMGET', KEYS[1], 'last', 'backoff')
local earliest = now
if held[1] then earliest = math.max(now, tonumber(held[1]) + tonumber(ARGV[1])) end
if held[2] and tonumber(held[2]) > earliest then earliest = tonumber(held[2]) end
local stamp = string.format('%.17g', now)
if earliest <= now then
  if ARGV[3] == '1' then
    redis.call('HSET', KEYS[1], 'last', stamp)
    redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1]) + tonumber(ARGV[4])))
  end
  return {1, stamp, stamp}
end
return {0, string.format('%.17g', earliest), stamp}
"""

# KEYS[1] the slot hash; ARGV[1] the back-off's end (s), ARGV[2] how long the key is kept
# after it.
_BACK_OFF = """
local held = tonumber(redis.call('HGET', KEYS[1], 'backoff') or '0')
local until_ = tonumber(ARGV[1])
if until_ > held then
  redis.call('HSET', KEYS[1], 'backoff', string.format('%.17g', until_))
end
local t = redis.call('TIME')
local now = tonumber(t[1])
local keep = math.max(until_, held) - now + tonumber(ARGV[2])
if keep > 0 then redis.call('EXPIRE', KEYS[1], math.ceil(keep)) end
return 1
"""

# The batch twin of claim_first. KEYS: one slot hash per host. ARGV: now ("" for TIME),
# "1" to take, how long (s) an idle key is kept, the lease a granted slot takes (s, "" for
# none), how often (s) a leased host is asked about again, then per host: n, then its n
# intervals. Returns now, then per host: the granted index (-1 none), the n earliest starts,
# the end of a back-off in force ("" for none) and 1 when its lease is held (else 0).
_CLAIM_BATCH = _CLOCK + """
local now = clock(ARGV[1])
local take = ARGV[2] == '1'
local keep = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local recheck = tonumber(ARGV[5])
local stamp = string.format('%.17g', now)
local out = {stamp}
local a = 6
for k = 1, #KEYS do
  local n = tonumber(ARGV[a])
  local held = redis.call('HMGET', KEYS[k], 'last', 'backoff', 'lease')
  local last = held[1] and tonumber(held[1])
  local backoff = held[2] and tonumber(held[2])
  local leased = held[3] and tonumber(held[3])
  if leased and leased <= now then leased = nil end
  local granted = -1
  local ats = {}
  for i = 1, n do
    local interval = tonumber(ARGV[a + i])
    local earliest = now
    if granted >= 0 then
      earliest = now + interval
    else
      if last then earliest = math.max(now, last + interval) end
      if backoff and backoff > earliest then earliest = backoff end
      if leased then
        earliest = math.max(earliest, math.min(leased, now + recheck))
      elseif earliest <= now then
        granted = i - 1
        if take then
          redis.call('HSET', KEYS[k], 'last', stamp)
          if lease then
            redis.call('HSET', KEYS[k], 'lease', string.format('%.17g', now + lease))
          else
            redis.call('HDEL', KEYS[k], 'lease')
          end
          redis.call('EXPIRE', KEYS[k], math.ceil(interval + keep))
        end
      end
    end
    ats[i] = string.format('%.17g', earliest)
  end
  out[#out + 1] = granted
  for i = 1, n do out[#out + 1] = ats[i] end
  if backoff and backoff > now then
    out[#out + 1] = string.format('%.17g', backoff)
  else
    out[#out + 1] = ''
  end
  out[#out + 1] = leased and 1 or 0
  a = a + n + 1
end
return out
"""

# KEYS[1] a host's slot hash; ARGV[1] seconds to move its last start by (when it has one),
# ARGV[2] now (s, or "" for the server's TIME): the twin of shifted_start.
_SHIFT_START = _CLOCK + """
if redis.call('HEXISTS', KEYS[1], 'last') == 1 then
  local now = clock(ARGV[2])
  local last = tonumber(redis.call('HGET', KEYS[1], 'last'))
  local shifted = math.max(last, math.min(last + tonumber(ARGV[1]), now))
  redis.call('HSET', KEYS[1], 'last', string.format('%.17g', shifted))
end
return 0
"""

# KEYS[1] a host's slot hash. ARGV: a pause (s, "" for none) from now, now (s, or "" for
# the server's TIME), how long the key is kept after a pause: the pause begins (never
# shortening a longer one) and the host's lease ends, in one step.
_END_LEASE = _CLOCK + """
local now = clock(ARGV[2])
if ARGV[1] ~= '' then
  local until_ = now + tonumber(ARGV[1])
  local held = tonumber(redis.call('HGET', KEYS[1], 'backoff') or '0')
  if until_ > held then
    redis.call('HSET', KEYS[1], 'backoff', string.format('%.17g', until_))
    redis.call('EXPIRE', KEYS[1], math.ceil(until_ - now + tonumber(ARGV[3])))
  end
end
redis.call('HDEL', KEYS[1], 'lease')
return 1
"""

# KEYS[1] the response-time hash; ARGV: host, the new sample (s), its weight.
_NOTE_RESPONSE = """
local previous = redis.call('HGET', KEYS[1], ARGV[1])
local sample = tonumber(ARGV[2])
if previous then
  sample = tonumber(previous) + tonumber(ARGV[3]) * (sample - tonumber(previous))
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.17g', sample))
return 1
"""

_KEEP_IDLE_S = 86_400.0
SAMPLES_S = 0.02  # the longest a response time waits to be sent
_FACTS_KEPT = 100_000  # hosts whose facts a store keeps (with facts_ttl_s)

# KEYS[1] a claim; ARGV[1] the claimer's token. The claim ends if it is still the claimer's
# (one that ran out and was taken by another is the other's).
_END_CLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


# KEYS[1] the page's blob, KEYS[2] the use-order zset, KEYS[3] the size hash, KEYS[4] the
# total. ARGV: member, blob, when (s), the byte budget, the blob key prefix. Puts the page,
# then drops the least recently used ones until the total fits (their blob keys are named
# from the prefix, which in a Redis Cluster carries the tag {pages}: every key of the cache
# in one slot, so that a script may touch them all).
_PAGE_PUT = """
local old = redis.call('HGET', KEYS[3], ARGV[1])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('SET', KEYS[1], ARGV[2])
local size = string.len(ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], size)
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local total = redis.call('INCRBY', KEYS[4], size)
while total > tonumber(ARGV[4]) do
  local victim = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not victim then break end
  local victim_size = tonumber(redis.call('HGET', KEYS[3], victim) or '0')
  redis.call('ZREM', KEYS[2], victim)
  redis.call('HDEL', KEYS[3], victim)
  redis.call('DEL', ARGV[5] .. victim)
  total = redis.call('DECRBY', KEYS[4], victim_size)
end
return total
"""

# KEYS as _PAGE_PUT's; ARGV[1] the member.
_PAGE_DELETE = """
local old = redis.call('HGET', KEYS[3], ARGV[1])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
"""


AnyRedis: TypeAlias = "aioredis.Redis | RedisCluster"

# Connections one process keeps to a Redis server, and how long a call waits for one of
# them to be free before it counts as the store being unreachable.
POOL_CONNECTIONS = 64
POOL_WAIT_S = 30.0


class _Cluster(RedisCluster):
    """redis-py's cluster client, made to learn the cluster's slots before its first command.

    Its ``execute_command`` picks a command's route before it initializes (redis-py 8.1):
    the first commands of a new client, sent at once by many tasks, go to any node, come back
    MOVED, and the client's rebuilding of its node table closes connections the other tasks
    are using (measured: a crawl worker lost a dozen hosts at its start to "Connection
    closed by server")."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self._initialize:
            await self.initialize()
        return await super().execute_command(*args, **kwargs)


# A pooled connection idle this long is asked PING before it is used again, and made anew
# when that fails: after a server restarts, the connections the pool held are dead, and a
# crawl waiting out the restart would otherwise meet each of them as a new outage.
HEALTH_CHECK_S = 1.0
# "Made anew" needs a retry: redis-py's pooled connections have none by default, so a PING
# that met a connection dead with the old server raised "Connection closed by server" to
# the command behind it (a crawl told the store was unreachable again, after it was back).
# One retry, on a new connection, for a connection that broke; never for a timeout, where
# the server may have run the command and a second run would do it twice.


class _Retry(Retry):
    """redis-py's retry, never for a task being cancelled: a cancel that redis-py raised as
    a ConnectionError (see :func:`pipeline`) is raised as the cancel it was, after the
    broken connection is closed, rather than tried again."""

    async def call_with_retry(self, do: Callable[[], Awaitable[_T]], fail: Callable[..., Any],
                              is_retryable: Callable[[Exception], bool] | None = None,
                              with_failure_count: bool = False) -> _T:
        async def failed(*args: Any) -> None:
            await fail(*args)
            raise_if_cancelled()

        return await super().call_with_retry(do, failed, is_retryable, with_failure_count)


_RETRY = _Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
_REDIS: frozenset[Kind] = frozenset({"redis"})


def client_from_url(url: str | StoreURL, *, knob: str = "store=") -> tuple[AnyRedis, str]:
    """A client and the key prefix from ``redis://[:PASSWORD@]HOST:PORT/DB[?prefix=P]``
    (``rediss://`` for TLS, ``unix:///SOCKET?db=DB`` for a Unix socket; read by
    :mod:`polite.storage.url`); the prefix is ``polite:`` unless the URL names one.

    ``cluster=1`` in the query asks for a Redis Cluster: the host and port are one node of
    it (any; the client learns the others from it), the database must be 0 (a Cluster has
    no other), and each command goes to the node holding its keys' slot. ``knob`` names the
    setting in errors (``--store``, ``POLITE_STORE``)."""
    where = url if isinstance(url, StoreURL) else read_store_url(url, knob, kinds=_REDIS)
    if where.kind != "redis":
        raise SettingError(knob, where.url, "expected redis://HOST:PORT/DB")
    try:
        client: AnyRedis
        if where.cluster:
            client = _Cluster.from_url(where.client_url, socket_timeout=5.0,
                                       socket_connect_timeout=5.0,
                                       health_check_interval=HEALTH_CHECK_S)
        else:
            # A bounded pool that makes a caller wait for a free connection: redis-py's
            # default pool refuses the 101st at once ("Too many connections"), which a
            # survey's 100 workers beside its heartbeat reached on the first due read.
            pool = aioredis.BlockingConnectionPool.from_url(
                where.client_url, max_connections=POOL_CONNECTIONS, timeout=POOL_WAIT_S,
                socket_timeout=5.0, socket_connect_timeout=5.0,
                health_check_interval=HEALTH_CHECK_S, retry=_RETRY)
            client = aioredis.Redis.from_pool(pool)
    except (ValueError, RedisError) as exc:
        raise SettingError(knob, where.url, str(exc)) from exc
    return client, where.prefix


def _is_cluster(client: AnyRedis) -> bool:
    return isinstance(client, RedisCluster)


class _Lua:
    """A script sent by its SHA1 (EVALSHA); a server that does not have it (restarted, a
    new Cluster node) is sent its text once (EVAL, which also keeps it)."""

    __slots__ = ("sha", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()


class _Call(NamedTuple):
    """A script to run: its keys (one Cluster slot) and arguments."""

    lua: _Lua
    keys: list[str]
    args: list[Any]


class _Later:
    """Calls ``flush`` (which sends what a store holds back) once ``delay_s`` after
    :meth:`arm`, unless a round trip of the store's own sent it first; a flush that fails
    (Redis unreachable) is tried again a second later."""

    def __init__(self, flush: Callable[[], Awaitable[None]], delay_s: float) -> None:
        self._flush = flush
        self._delay_s = delay_s
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._finishing = False

    def arm(self, delay_s: float | None = None) -> None:
        if self._timer is None and not self._finishing:
            with contextlib.suppress(RuntimeError):  # no loop: the next round trip sends it
                self._timer = asyncio.get_running_loop().call_later(
                    self._delay_s if delay_s is None else delay_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._flush()
        except (OSError, ConnectionError, TimeoutError, RedisError):
            self.arm(1.0)  # still held: the next round trip, or this, tries again

    async def finish(self) -> None:
        """The last flush, at once (the store closes); Redis unreachable loses what is held.
        No flush is armed after it (a failed one under way would arm its retry, a task left
        pending when the loop closes)."""
        self._finishing = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            await self._task  # a flush under way ends first (it raises nothing)
        with contextlib.suppress(OSError, ConnectionError, TimeoutError, RedisError):
            await self._flush()


# A step of a round trip: a script, or a plain command queued on the pipeline.
_Step = _Call | Callable[[Any], object]


# The scripts each client has loaded (SCRIPT LOAD: on every primary of a Cluster).
_loaded: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


async def pipeline(client: AnyRedis, steps: Sequence[_Step]) -> list[Any]:
    """The steps in one round trip (one per node of a Cluster, written to in the order of
    each node's first step), their replies in order; the first error is raised.

    A script is loaded before its first round trip, so that the steps run in their order
    (a script the server lacks is refused, and the steps after it would run before it is
    sent again). A server that lost its scripts since (restarted) is sent the scripts it
    refused again, after the round trip: then, only, they run after the steps that followed
    them (each script's own change stays atomic)."""
    loaded = _loaded.setdefault(client, set())
    for step in steps:
        if isinstance(step, _Call) and step.lua.sha not in loaded:
            await client.script_load(step.lua.text)
            loaded.add(step.lua.sha)
    try:
        async with client.pipeline(transaction=False) as pipe:
            for step in steps:
                if isinstance(step, _Call):
                    pipe.execute_command("EVALSHA", step.lua.sha, len(step.keys), *step.keys,
                                         *step.args)
                else:
                    step(pipe)
            replies = list(await pipe.execute(raise_on_error=False))
    except UNREACHABLE:
        # redis-py 8.1 raises a cancel that lands in a round trip as its own error now and
        # then: the cancel it was. (It also loses one now and then, the round trip
        # returning as if none came; that is left to the loops, which look between round
        # trips: raised here, a write that was made would be taken for one that was not.)
        raise_if_cancelled()
        raise
    for at, (step, reply) in enumerate(zip(steps, replies, strict=True)):
        if isinstance(reply, NoScriptError) and isinstance(step, _Call):
            loaded.clear()
            replies[at] = await client.execute_command(
                "EVAL", step.lua.text, len(step.keys), *step.keys, *step.args)
        elif isinstance(reply, Exception):
            raise reply
    return replies


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RedisStore:
    """``clock``, when given, replaces the server's time (tests with a fake clock); leave it
    out in production so every node judges by the same clock."""

    def __init__(self, client: AnyRedis, *, prefix: str = "polite:",
                 clock: Callable[[], float] | None = None) -> None:
        self._redis = client
        self._prefix = prefix
        # In a Redis Cluster a script's keys must share a slot: the page cache's keys carry
        # one hash tag (the cache on one node); every other script has one key.
        self._cluster = _is_cluster(client)
        self._pages = f"{prefix}{{pages}}" if self._cluster else prefix
        self._clock = clock
        self._claim = _Lua(_CLAIM)
        self._back_off = client.register_script(_BACK_OFF)
        self._claim_batch = _Lua(_CLAIM_BATCH)
        self._end_lease = _Lua(_END_LEASE)
        self._end_claim = client.register_script(_END_CLAIM)
        self._token = uuid.uuid4().hex  # this store's name on the claims it takes
        self._shift_start = client.register_script(_SHIFT_START)
        self._note_response = _Lua(_NOTE_RESPONSE)
        # response times noted and not yet sent: they go with the next round trip (a
        # claim, a look at the facts), or within SAMPLES_S
        self._samples: list[tuple[str, str]] = []
        self._later = _Later(self._send_samples, SAMPLES_S)
        # What host_facts read, kept facts_ttl_s (0: not kept): a crawl worker asks for a
        # host's facts before every request, and an operator's new delay or the response
        # times' average may then come that much later (a round trip less a request).
        self.facts_ttl_s = 0.0
        self._facts: dict[str, tuple[float, HostFacts]] = {}
        self._page_put = client.register_script(_PAGE_PUT)
        self._page_delete = client.register_script(_PAGE_DELETE)

    @classmethod
    def from_url(cls, url: str | StoreURL, *, clock: Callable[[], float] | None = None,
                 knob: str = "store=") -> RedisStore:
        """``redis://[:PASSWORD@]HOST:PORT/DB[?prefix=P]`` (``rediss://`` for TLS,
        ``unix:///SOCKET?db=DB`` for a Unix socket, ``&cluster=1`` for a Redis Cluster);
        ``knob`` as :func:`client_from_url`'s."""
        client, prefix = client_from_url(url, knob=knob)
        return cls(client, prefix=prefix, clock=clock)

    async def ping(self) -> None:
        """Raise :class:`ConfigError` when the server cannot be reached."""
        try:
            await self._redis.ping()
        except (OSError, RedisError) as exc:
            raise ConfigError(f"the Redis store does not answer: {exc}") from exc

    def _slot_key(self, host: str) -> str:
        return f"{self._prefix}slot:{host}"

    async def check(self) -> None:
        await self._redis.ping()

    async def clock(self) -> float:
        if self._clock is not None:
            return self._clock()
        seconds, micros = await self._redis.time()
        return seconds + micros / 1_000_000

    async def _run_claim(self, host: str, interval_s: float, now: float | None,
                         take: bool) -> SlotClaim:
        if now is None and self._clock is not None:
            now = self._clock()
        stamp = "" if now is None else repr(float(now))
        (granted, at, judged), = await self._with_samples([_Call(
            self._claim, [self._slot_key(host)],
            [repr(float(interval_s)), stamp, "1" if take else "0", repr(_KEEP_IDLE_S)])])
        return SlotClaim(bool(granted), float(at), float(judged))

    async def claim(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        return await self._run_claim(host, interval_s, now, True)

    async def peek(self, host: str, interval_s: float, now: float | None = None) -> SlotClaim:
        return await self._run_claim(host, interval_s, now, False)

    async def back_off(self, host: str, until: float) -> None:
        await self._back_off(keys=[self._slot_key(host)], args=[repr(float(until)),
                                                                 repr(_KEEP_IDLE_S)])

    async def shift_start(self, host: str, late_s: float) -> None:
        if late_s > 0:
            now = "" if self._clock is None else repr(float(self._clock()))
            await self._shift_start(keys=[self._slot_key(host)],
                                    args=[repr(float(late_s)), now])

    async def claim_batch(self, requests: Sequence[tuple[str, tuple[float, ...]]], *,
                          take: bool, lease_s: float | None = None) -> list[HostClaim]:
        if not requests:
            return []
        stamp = "" if self._clock is None else repr(float(self._clock()))
        head: list[str | int] = [stamp, "1" if take else "0", repr(_KEEP_IDLE_S),
                                 "" if lease_s is None else repr(float(lease_s)),
                                 repr(LEASE_RECHECK_S)]
        args = list(head)
        for _, intervals in requests:
            args.append(len(intervals))
            args.extend(repr(float(i)) for i in intervals)
        if not self._cluster or len(requests) == 1:
            replies = await self._with_samples([_Call(
                self._claim_batch, [self._slot_key(h) for h, _ in requests], args)])
        else:
            # The hosts' slot keys are on several nodes: a script a host, one round trip a
            # node (each judged by the clock of the node that holds the host's key).
            replies = await self._with_samples([_Call(
                self._claim_batch, [self._slot_key(host)],
                [*head, len(intervals), *(repr(float(i)) for i in intervals)])
                for host, intervals in requests])
        answers = []
        for reply, part in zip(replies, [requests] if len(replies) == 1 else
                               [[one] for one in requests], strict=True):
            now = float(reply[0])
            at = 1
            for _, intervals in part:
                n = len(intervals)
                held = reply[at + 1 + n]
                answers.append(HostClaim(int(reply[at]),
                                         tuple(float(x) for x in reply[at + 1:at + 1 + n]),
                                         now, float(held) if held not in (b"", "") else None,
                                         bool(int(reply[at + 2 + n]))))
                at += n + 3
        return answers

    async def host_facts(self, hosts: Sequence[str]) -> list[HostFacts]:
        if not hosts:
            return []
        if self.facts_ttl_s > 0:
            now = time.monotonic()
            kept = [self._facts.get(host) for host in hosts]
            if all(k is not None and now - k[0] < self.facts_ttl_s for k in kept):
                return [k[1] for k in kept if k is not None]
        delays, seconds = await self._with_samples([
            lambda pipe: pipe.hmget(f"{self._prefix}delays", list(hosts)),
            lambda pipe: pipe.hmget(f"{self._prefix}response_times", list(hosts))])
        facts = [HostFacts(None if d is None else float(d), None if r is None else float(r))
                 for d, r in zip(delays, seconds, strict=True)]
        if self.facts_ttl_s > 0:
            now = time.monotonic()
            for host, fact in zip(hosts, facts, strict=True):
                self._facts.pop(host, None)
                self._facts[host] = (now, fact)
            while len(self._facts) > _FACTS_KEPT:
                del self._facts[next(iter(self._facts))]
        return facts

    async def _with_samples(self, steps: Sequence[_Step]) -> list[Any]:
        """The response times held, then ``steps``, in one round trip; the steps' replies."""
        samples, self._samples = self._samples, []
        notes = [_Call(self._note_response, [f"{self._prefix}response_times"],
                       [host, elapsed, repr(RESPONSE_TIME_WEIGHT)]) for host, elapsed in samples]
        try:
            replies = await pipeline(self._redis, [*notes, *steps])
        except BaseException:
            self._samples[:0] = samples
            raise
        return replies[len(notes):]

    async def _send_samples(self) -> None:
        if self._samples:
            await self._with_samples([])

    async def note_response(self, host: str, elapsed_s: float | None,
                            pause_s: float | None, *, ends_lease: bool = False) -> None:
        if elapsed_s is not None:
            # a sample of a running average: sent with the next round trip, not one of its own
            self._samples.append((host, repr(float(elapsed_s))))
            self._later.arm()
            kept = self._facts.get(host)
            if kept is not None:
                # the facts kept move as the server's average does (_NOTE_RESPONSE), so the
                # adaptive delay follows this worker's own samples at once
                at, (configured, average) = kept
                self._facts[host] = (at, HostFacts(configured, elapsed_s if average is None
                                                   else average + RESPONSE_TIME_WEIGHT
                                                   * (elapsed_s - average)))
        if ends_lease:
            # one round trip, with the samples held: the pause and the lease's end at once
            await self._with_samples([_Call(self._end_lease, [self._slot_key(host)], [
                "" if pause_s is None else repr(float(pause_s)),
                "" if self._clock is None else repr(float(self._clock())),
                repr(_KEEP_IDLE_S)])])
        elif pause_s is not None:
            await self.back_off(host, await self.clock() + pause_s)

    async def get_delay(self, domain: str) -> float | None:
        value = await self._redis.hget(f"{self._prefix}delays", domain)
        return None if value is None else float(value)

    async def set_delay(self, domain: str, delay_s: float) -> None:
        self._facts.pop(domain, None)
        await self._redis.hset(f"{self._prefix}delays", domain, repr(float(delay_s)))

    async def delete_delay(self, domain: str) -> None:
        self._facts.pop(domain, None)
        await self._redis.hdel(f"{self._prefix}delays", domain)

    async def all_delays(self) -> dict[str, float]:
        values = await self._redis.hgetall(f"{self._prefix}delays")
        return {_text(key): float(value) for key, value in sorted(values.items())}

    async def set_robots_delay(self, host: str, delay_s: float) -> None:
        await self._redis.hset(f"{self._prefix}robots_delays", host, repr(float(delay_s)))

    async def all_robots_delays(self) -> dict[str, float]:
        values = await self._redis.hgetall(f"{self._prefix}robots_delays")
        return {_text(key): float(value) for key, value in values.items()}

    async def load_robots(self, origin: str) -> RobotsRecord | None:
        fields = await self._redis.hgetall(f"{self._prefix}robots:{origin}")
        if not fields:
            return None
        body = fields[b"body"]
        return RobotsRecord(
            origin=origin, kind=_text(fields[b"kind"]), status=int(fields[b"status"]),
            body=body if isinstance(body, bytes) else body.encode(),
            fetched_at=float(fields[b"fetched_at"]), expires_at=float(fields[b"expires_at"]),
            failures=int(fields[b"failures"]), reason=_text(fields[b"reason"]))

    async def claim_robots_fetch(self, origin: str, hold_s: float) -> bool:
        return bool(await self._redis.set(f"{self._prefix}robots_fetch:{origin}", self._token,
                                          nx=True, px=max(1, int(hold_s * 1000))))

    async def end_robots_fetch(self, origin: str) -> None:
        await self._end_claim(keys=[f"{self._prefix}robots_fetch:{origin}"],
                              args=[self._token])

    async def save_robots(self, record: RobotsRecord) -> None:
        mapping: dict[FieldT, EncodableT] = {
            "kind": record.kind, "status": record.status, "body": record.body,
            "fetched_at": repr(record.fetched_at), "expires_at": repr(record.expires_at),
            "failures": record.failures, "reason": record.reason}
        await self._redis.hset(f"{self._prefix}robots:{record.origin}", mapping=mapping)

    def _page_keys(self, key: str) -> list[str]:
        p = self._pages
        return [f"{p}page:{key}", f"{p}pages:used", f"{p}pages:size", f"{p}pages:total"]

    async def _now(self) -> float:
        return self._clock() if self._clock is not None else await self.clock()

    async def page_get(self, key: str) -> bytes | None:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.get(f"{self._pages}page:{key}")
            pipe.zadd(f"{self._pages}pages:used", {key: await self._now()}, xx=True)
            blob, _ = await pipe.execute()
        return None if blob is None else bytes(blob)

    async def page_put(self, key: str, blob: bytes, *, max_total_bytes: int) -> None:
        await self._page_put(keys=self._page_keys(key),
                             args=[key, blob, await self._now(), max_total_bytes,
                                   f"{self._pages}page:"])

    async def page_delete(self, key: str) -> None:
        await self._page_delete(keys=self._page_keys(key), args=[key])

    async def page_usage(self) -> tuple[int, int]:
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcard(f"{self._pages}pages:used")
            pipe.get(f"{self._pages}pages:total")
            count, total = await pipe.execute()
        return int(count), int(total or 0)

    async def add_activity(self, rows: Sequence[HostActivity]) -> None:
        if not rows:
            return
        p = self._prefix
        # one transaction on one server; a Cluster's counters are on several nodes
        async with self._redis.pipeline(transaction=not self._cluster) as pipe:
            for row in rows:
                for name in COUNTERS:
                    count = getattr(row, name)
                    if count:
                        pipe.hincrby(f"{p}activity:{name}", row.host, count)
                for name in FACTS:
                    value = getattr(row, name)
                    if value is not None:
                        pipe.hset(f"{p}activity:{name}", row.host,
                                  repr(value) if isinstance(value, float) else value)
                if not any(getattr(row, name) for name in COUNTERS):
                    pipe.hsetnx(f"{p}activity:allowed", row.host, 0)  # known, counts or not
            await pipe.execute()

    async def all_activity(self) -> list[HostActivity]:
        names = (*COUNTERS, *FACTS)
        async with self._redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hgetall(f"{self._prefix}activity:{name}")
            tables = await pipe.execute()
        by_host: dict[str, dict[str, object]] = {}
        for name, table in zip(names, tables, strict=True):
            for raw_host, raw in table.items():
                text = _text(raw)
                value: object = int(text) if name in COUNTERS else \
                    float(text) if name in ("last_seen", "delay_s", "next_at",
                                            "backoff_until") else text
                by_host.setdefault(_text(raw_host), {})[name] = value
        return [HostActivity(host, **values) for host, values in by_host.items()]  # type: ignore[arg-type]

    async def node_beat(self, node: str, info: str, ttl_s: float) -> None:
        async with self._redis.pipeline(transaction=not self._cluster) as pipe:
            pipe.set(f"{self._prefix}node:{node}", info, px=max(1, int(ttl_s * 1000)))
            pipe.sadd(f"{self._prefix}nodes", node)
            await pipe.execute()

    async def live_nodes(self) -> dict[str, str]:
        names = sorted(_text(n) for n in await self._redis.smembers(f"{self._prefix}nodes"))
        if not names:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:  # keys on any node
            for name in names:
                pipe.get(f"{self._prefix}node:{name}")
            infos = await pipe.execute()
        gone = [n for n, info in zip(names, infos, strict=True) if info is None]
        if gone:
            await self._redis.srem(f"{self._prefix}nodes", *gone)
        return {n: _text(info) for n, info in zip(names, infos, strict=True)
                if info is not None}

    async def close(self) -> None:
        try:
            await self._later.finish()
        finally:
            await self._redis.aclose()
