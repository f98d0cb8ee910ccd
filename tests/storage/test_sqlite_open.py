"""Opening one new SQLite file from many processes at once: setting the journal mode and
applying the schema wait within the busy timeout like any other write, so no process fails
with "database is locked" because another was opening the same file at the same moment."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PROCESSES = 8
TRIALS = 50

# One process: for each trial, wait until every process is ready (a pipe from the test
# carries one "go" line per trial), then open the store and the frontier on that trial's
# new file, and print "ok" or the error.
_OPENER = textwrap.dedent("""
    import asyncio, sys, time
    from polite.storage import SQLiteStore
    from polite.storage.frontier import SQLiteFrontier

    folder = sys.argv[1]
    print("ready", flush=True)
    for trial in range(int(sys.argv[2])):
        if sys.stdin.readline() != "go\\n":
            break
        path = f"{folder}/{trial}.sqlite"
        try:
            store = SQLiteStore(path, time.time)
            frontier = SQLiteFrontier(path)
        except Exception as exc:
            print(f"failed {trial}: {type(exc).__name__}: {exc}", flush=True)
        else:
            asyncio.run(frontier.close())
            asyncio.run(store.close())
            print("ok", flush=True)
""")


def test_many_processes_open_one_new_file_together(tmp_path: Path) -> None:
    openers = [subprocess.Popen([sys.executable, "-c", _OPENER, str(tmp_path), str(TRIALS)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for _ in range(PROCESSES)]
    answers: list[str] = []
    try:
        for opener in openers:
            assert opener.stdout is not None
            assert opener.stdout.readline() == "ready\n"
        for _ in range(TRIALS):
            # the barrier: every process is blocked on its pipe; one write each lets them go
            for opener in openers:
                assert opener.stdin is not None
                opener.stdin.write("go\n")
                opener.stdin.flush()
            for opener in openers:
                assert opener.stdout is not None
                answers.append(opener.stdout.readline().strip())
    finally:
        for opener in openers:
            assert opener.stdin is not None
            opener.stdin.close()
        for opener in openers:
            opener.wait(timeout=60)
            assert opener.stdout is not None
            opener.stdout.close()
    failed = [answer for answer in answers if answer != "ok"]
    assert not failed, f"{len(failed)} of {len(answers)} opens failed: {failed[:3]}"
    assert len(answers) == PROCESSES * TRIALS
