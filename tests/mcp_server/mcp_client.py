"""``polite mcp`` as a real process, driven by the MCP SDK's own client: over stdio (the
server launched by the client) or over streamable HTTP (the server launched here)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from mcp import Client

from tests.commands import command_line

# A loopback site is reached only with --allow-private (or --allow-network); no delay unless
# a test asks for one, so that tests wait only for what they test.
LOOPBACK = ("--store", "memory://", "--allow-private", "--default-delay-s", "0")


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


@asynccontextmanager
async def stdio_session(*options: str) -> AsyncIterator[Client]:
    """A client of ``polite mcp OPTIONS`` over stdio (no response caching: every call
    reaches the server)."""
    from mcp import Client, StdioServerParameters  # the SDK when used, not at collection

    command, *args = command_line("mcp", *options)
    params = StdioServerParameters(command=command, args=args, env=_environment())
    async with Client(params, cache=None, read_timeout_seconds=120) as client:
        yield client


_T = TypeVar("_T")


@contextmanager
def shared_session(*options: str) -> Iterator[Callable[[Callable[[Client], Awaitable[_T]]], _T]]:
    """One ``polite mcp OPTIONS`` over stdio for several tests (each start imports the MCP
    SDK, a second of CPU): a function that runs ``work(client)`` to its end and gives its
    result. The session lives in a task of its own on a loop of its own, entered and left
    there, and each work runs beside it on that loop."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    opened: asyncio.Future[Client] = loop.create_future()
    stop = asyncio.Event()

    async def hold() -> None:
        try:
            async with stdio_session(*options) as client:
                opened.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(exc)
            raise

    held = asyncio.run_coroutine_threadsafe(hold(), loop)

    async def session() -> Client:
        return await opened

    client = asyncio.run_coroutine_threadsafe(session(), loop).result(timeout=120)

    def run(work: Callable[[Client], Awaitable[_T]]) -> _T:
        async def job() -> _T:
            return await work(client)

        return asyncio.run_coroutine_threadsafe(job(), loop).result(timeout=300)

    try:
        yield run
    finally:
        loop.call_soon_threadsafe(stop.set)
        try:
            held.result(timeout=60)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()


@contextmanager
def http_server(*options: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``polite mcp --http 127.0.0.1:0 OPTIONS`` running; its URL once it listens."""
    with subprocess.Popen(command_line("mcp", *options),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=_environment()) as process:
        try:
            assert process.stderr is not None
            deadline = time.monotonic() + 60
            while True:
                line = process.stderr.readline()
                if "listening on " in line:
                    # the rest of its standard error is read, so that it never fills the
                    # pipe and stops the server
                    threading.Thread(target=process.stderr.read, daemon=True).start()
                    yield line.split("listening on ", 1)[1].strip(), process
                    break
                if not line and process.poll() is not None:
                    pytest.fail(f"polite mcp exited: {process.stderr.read()}")
                assert time.monotonic() < deadline, "polite mcp did not start"
        finally:
            process.terminate()
            process.wait(10)


def text(result: Any) -> str:
    """The text of a tool's result, a prompt's or a resource's."""
    if hasattr(result, "contents"):
        return "".join(c.text for c in result.contents)
    if hasattr(result, "messages"):
        return "".join(m.content.text for m in result.messages)
    return "".join(c.text for c in result.content)
