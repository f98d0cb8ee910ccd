"""Running a coroutine where one that never ends fails its test rather than hanging it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any


def run_apart(trials: Callable[[], Coroutine[Any, Any, None]], timeout_s: float,
              what: str) -> None:
    """Run ``trials()`` in an event loop of its own, in a thread of its own: an assertion
    when it has not ended within ``timeout_s`` (``what`` says what went on), and whatever
    it raised raised here."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(trials())
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), what
    if failed:
        raise failed[0]
