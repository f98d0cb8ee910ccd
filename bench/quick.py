"""A guard to run before a change lands: this tree against a base commit, in one run.

The crawl, the proxy, the robots.txt engine and the service are measured on the working tree
(uncommitted changes included) and on a base commit checked out in a temporary git worktree,
alternately, round after round, so that a noisy machine weighs on both alike. Each figure is
printed with its median on each side, the spread of its rounds and the ratio after / before
(above 1 is better for a rate, below 1 for a cost). A ratio beyond the spread of its rounds is
flagged: that is a change to look at, not noise.

Both sides run with this tree's bench scripts and this virtual environment; only the package
they import differs (``PYTHONPATH`` names the side's ``src``). A base whose code the scripts
cannot drive (an option it lacks) fails that figure, named, and the others go on.

Run: ``make bench-quick`` or ``.venv/bin/python bench/quick.py [--base REV] [--rounds N]``
(``BASE=`` in make; the default is the merge base with ``main``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
SHARED_CORPUS = ROOT.parent / "shared" / "corpus" / "robots"


@dataclass(frozen=True)
class Bench:
    name: str
    args: tuple[str, ...]
    # figure name in the script's JSON -> (label, True when higher is better)
    figures: dict[str, tuple[str, bool]]


def _robots_figures(raw: dict[str, object]) -> dict[str, float]:
    parse_s = raw["parse_s"]
    checks = raw["checks_per_s"]
    assert isinstance(parse_s, dict) and isinstance(checks, dict)
    return {"robots parse s": parse_s["polite"],
            "robots checks/s": checks["polite checker(agent)(url)"]}


BENCHES = (
    Bench("crawl", ("crawl_vs_scrapy.py", "--guard"), {
        "crawl pages/s": ("crawl: pages/s at the farm", True),
        "crawl CPU ms/page": ("crawl: CPU ms per page", False)}),
    Bench("proxy", ("proxy_vs_peers.py", "--no-peer", "--seconds", "1", "--rounds", "1"), {
        "proxy miss req/s 1 conn": ("proxy: misses, req/s at 1 connection", True),
        "proxy miss req/s 32 conns": ("proxy: misses, req/s at 32 connections", True),
        "proxy hit req/s 32 conns": ("proxy: hits, req/s at 32 connections", True),
        "proxy added latency ms": ("proxy: added latency, ms", False)}),
    Bench("robots", ("robots_vs_peers.py", "--quick"), {
        "robots parse s": ("robots.txt: parse 300 files, s", False),
        "robots checks/s": ("robots.txt: warm checks/s", True)}),
    Bench("service", ("serve_decisions.py", "--guard"), {
        "serve SQLite cold hosts/s": ("service: cold pass, hosts/s", True),
        "serve SQLite look decisions/s": ("service: look, decisions/s", True),
        "serve SQLite reserve decisions/s": ("service: reserve, decisions/s", True)}),
)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """``rev`` checked out in a temporary worktree, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="polite-base-") as folder:
        path = Path(folder) / "tree"
        git("worktree", "add", "--detach", "--quiet", str(path), rev)
        try:
            yield path
        finally:
            git("worktree", "remove", "--force", str(path))


def run_once(bench: Bench, src: Path, timeout_s: float) -> dict[str, float] | str:
    """One run of ``bench`` importing polite from ``src``: its figures, or why it failed."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "figures.json"
        args = [sys.executable, str(HERE / bench.args[0]), *bench.args[1:], "--json", str(out)]
        if bench.name == "robots":
            args += ["--corpus", str(SHARED_CORPUS)]
        env = {**os.environ, "PYTHONPATH": str(src)}
        try:
            done = subprocess.run(args, env=env, cwd=folder, capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return f"took more than {timeout_s:.0f} s"
        if done.returncode != 0 or not out.exists():
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return f"exit {done.returncode}: {last[0][:200]}"
        raw = json.loads(out.read_text())
        return _robots_figures(raw) if bench.name == "robots" else raw


def spread(values: list[float]) -> float:
    """Half the range of the rounds, relative to their median."""
    middle = statistics.median(values)
    return (max(values) - min(values)) / 2 / middle if middle else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=os.environ.get("BASE") or None,
                        help="the commit to compare with (default: the merge base with main)")
    # Two rounds a side flagged noise as regressions three times on a noisy two-core
    # machine (each gone with five rounds); three fit in the three minutes a guard may take.
    parser.add_argument("--rounds", type=int, default=3, help="runs of each bench a side")
    parser.add_argument("--only", action="append", choices=[b.name for b in BENCHES],
                        help="these benches alone (repeatable)")
    parser.add_argument("--timeout-s", type=float, default=120.0, help="per bench run")
    args = parser.parse_args()
    base = args.base or git("merge-base", "HEAD", "main")
    base_name = git("rev-parse", "--short", base)
    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--", "src") else ""
    head_name = git("rev-parse", "--short", "HEAD") + dirty
    benches = [b for b in BENCHES if not args.only or b.name in args.only]
    if not SHARED_CORPUS.exists():
        print(f"no robots.txt corpus at {SHARED_CORPUS}: the robots figures are skipped")
        benches = [b for b in benches if b.name != "robots"]
    started = time.monotonic()
    results: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    failures: list[str] = []
    with worktree(base) as base_tree:
        sides = {"before": base_tree / "src", "after": ROOT / "src"}
        for round_ in range(args.rounds):
            for bench in benches:
                # Alternate which side goes first, so that neither always runs on a machine
                # warmed (or tired) by the other.
                order = ["before", "after"] if round_ % 2 == 0 else ["after", "before"]
                for side in order:
                    got = run_once(bench, sides[side], args.timeout_s)
                    if isinstance(got, str):
                        failures.append(f"{bench.name} ({side}, round {round_ + 1}): {got}")
                        continue
                    for key in bench.figures:
                        if key in got:
                            results[side].setdefault(key, []).append(float(got[key]))
            print(f"round {round_ + 1} of {args.rounds} done, "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr)

    print(f"\nbefore = {base_name}, after = {head_name}; {args.rounds} rounds a side, "
          f"alternating; {time.monotonic() - started:.0f} s\n")
    print("| figure | before (median, ±spread) | after (median, ±spread) | after / before | |")
    print("|---|---:|---:|---:|---|")
    for bench in benches:
        for key, (label, higher_better) in bench.figures.items():
            before, after = results["before"].get(key), results["after"].get(key)
            if not before or not after:
                print(f"| {label} | {'-' if not before else ''} | {'-' if not after else ''} "
                      "| - | not measured on both sides |")
                continue
            b, a = statistics.median(before), statistics.median(after)
            ratio = a / b if b else float("nan")
            noise = spread(before) + spread(after)
            better = (ratio > 1) == higher_better
            if len(before) < 2 or len(after) < 2:
                note = "one round: no spread to judge by"
            elif abs(ratio - 1) > max(noise, 0.03):
                note = ("better" if better else "WORSE") + " beyond the spread"
            else:
                note = ""
            print(f"| {label} | {b:,.3g} ±{spread(before):.0%} | {a:,.3g} ±{spread(after):.0%} "
                  f"| {ratio:.2f} | {note} |")
    for failure in failures:
        print(f"failed: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
