"""polite's robots.txt engine against its peers, in one run, reported as ratios.

Measures, on the real-world corpus in ../shared/corpus/robots (3,832 files and a
191,600-URL workload):

* parse: the whole corpus parsed by each contender (bytes already in memory);
* checks per second over the workload, every file parsed beforehand, after one warm-up
  pass; polite's cold first pass (which builds its per-agent indexes) is shown too;
* docs.oracle.com (31,843 rules): the cost of one check, the file read whole;
* a pathological pattern (``/*a*a*...*b`` against a 5,000-character path);
* how often the verdicts agree.

Every contender runs once per round, the rounds interleaved, so that a noisy machine slows
them alike, and each is timed by the CPU time it took (user and system), which another
process's load moves less than the clock; each table gives the best time and, for the
ratios, both the ratio of the best times and the median of the per-round ratios. Machines
are noisy, so read the ratios. ``--quick`` takes 300 files spread over the corpus (every
twelfth), a sample whose ratios are the whole corpus's: the first 300 by name held
docs.oracle.com, a file where one of texting_robots's checks takes 100 µs (polite's, 1 µs),
a third of its time over that sample, against 3 % over the corpus. Each contender's check
of each URL is bound beforehand, so that a round times the calls, not finding each file's
object. Run: ``make bench`` or ``.venv/bin/python bench/robots_vs_peers.py [--quick]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
import urllib.robotparser
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polite.robots import parse

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "robots"

try:
    import texting_robots
except ImportError:  # pragma: no cover - reported in the output
    texting_robots = None
try:
    from protego import Protego
except ImportError:  # pragma: no cover - reported in the output
    Protego = None


# CPU time of this process (it runs one thread): what another process's load moves less than
# the clock (a contender's time on a core it waited for is not counted).
clock = time.process_time


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        started = clock()
        fn()
        best = min(best, clock() - started)
    return best


def interleaved(contenders: dict[str, Callable[[], object]], rounds: int
                ) -> dict[str, list[float]]:
    """Seconds per round for each contender; in each round every contender runs once."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            gc.collect()
            started = clock()
            fn()
            times[name].append(clock() - started)
    return times


def ratios(times: dict[str, list[float]], top: str, bottom: str) -> tuple[float, float]:
    """``top`` / ``bottom`` as (ratio of the best times, median of the per-round ratios)."""
    per_round = [a / b for a, b in zip(times[top], times[bottom], strict=True)]
    return min(times[top]) / min(times[bottom]), statistics.median(per_round)


def load(corpus: Path, quick: bool) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    files = sorted(p for p in corpus.glob("*.txt") if p.name != "urls.txt")
    if quick:  # spread over the corpus, not its first 300 names (see the module's text)
        files = files[::max(1, len(files) // 300)][:300]
    bodies = {p.name[:-4]: p.read_bytes() for p in files}
    workload = []
    with (corpus / "urls.txt").open(encoding="utf-8") as lines:
        for line in lines:
            domain, url = line.rstrip("\n").split("\t", 1)
            if domain in bodies:
                workload.append((domain, url))
    return bodies, workload


def one_file(corpus: Path, domain: str) -> tuple[bytes | None, list[str]]:
    """The corpus's file of ``domain`` and the workload's URLs of it."""
    path = corpus / f"{domain}.txt"
    if not path.exists():
        return None, []
    with (corpus / "urls.txt").open(encoding="utf-8") as lines:
        urls = [url for d, url in (line.rstrip("\n").split("\t", 1) for line in lines)
                if d == domain]
    return path.read_bytes(), urls


def stdlib_parser(text: str) -> urllib.robotparser.RobotFileParser:
    parser = urllib.robotparser.RobotFileParser()
    parser.parse(text.splitlines())
    return parser


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    options.add_argument("--agent", default="examplebot")
    options.add_argument("--quick", action="store_true", help="300 files, fewer repetitions")
    options.add_argument("--json", type=Path, help="also write the figures here")
    args = options.parse_args()
    if not (args.corpus / "urls.txt").exists():
        print(f"no corpus at {args.corpus}: pass --corpus DIR (the shared robots corpus)")
        return 2
    repeats = 2 if args.quick else 7
    agent = args.agent
    bodies, workload = load(args.corpus, args.quick)
    texts = {d: b.decode("utf-8", "replace") for d, b in bodies.items()}
    # The corpus itself is not what is measured: keep the collector from walking it again
    # and again while each contender allocates (the same for every contender).
    gc.collect()
    gc.freeze()
    print(f"{len(bodies)} files, {len(workload)} checks, agent {agent!r}\n")
    if texting_robots is None:
        print("texting_robots is not installed (pip install texting-robots-py): skipped")
    if Protego is None:
        print("protego is not installed: skipped")

    figures: dict[str, Any] = {"files": len(bodies), "checks": len(workload)}

    # -- parse ----------------------------------------------------------------------------
    parsers: dict[str, Callable[[], object]] = {
        "polite": lambda: [parse(b) for b in bodies.values()],
        "stdlib": lambda: [stdlib_parser(t) for t in texts.values()],
    }
    failures: dict[str, int] = {}
    if Protego is not None:
        parsers["protego"] = lambda: [Protego.parse(t) for t in texts.values()]
    if texting_robots is not None:
        def texting_parse_all() -> None:
            bad = 0
            for body in bodies.values():
                try:
                    texting_robots.Robot(agent, body)
                except Exception:
                    bad += 1
            failures["texting_robots"] = bad
        parsers["texting_robots"] = texting_parse_all
    parse_times = interleaved(parsers, repeats)
    parse_s = {name: min(times) for name, times in parse_times.items()}
    parse_ratio = {name: ratios(parse_times, "polite", name) for name in parse_times}
    figures["parse_s"] = parse_s
    figures["parse_ratio_best_median"] = parse_ratio

    # -- checks ---------------------------------------------------------------------------
    # Each contender's check of each URL bound beforehand (its file's object found once):
    # what a round times is the calls themselves, the loop the same for every contender.
    polite = {d: parse(b) for d, b in bodies.items()}
    allowed = [(polite[d].allowed, u) for d, u in workload]
    cold_s = best_of(1, lambda: [check(u, agent) for check, u in allowed])
    checks = [(polite[d].checker(agent), u) for d, u in workload]
    contenders: dict[str, Callable[[], object]] = {
        "polite allowed(url, agent)": lambda: [check(u, agent) for check, u in allowed],
        "polite checker(agent)(url)": lambda: [check(u) for check, u in checks],
    }
    texting: dict[str, Any] = {}
    if texting_robots is not None:
        for d, b in bodies.items():
            try:
                texting[d] = texting_robots.Robot(agent, b)
            except Exception:
                continue
        # The files it refused are left out beforehand, so that the loop costs it nothing.
        texting_calls = [(texting[d].allowed, u) for d, u in workload if d in texting]
        contenders["texting_robots"] = lambda: [check(u) for check, u in texting_calls]
    protego: dict[str, Any] = {}
    if Protego is not None:
        protego = {d: Protego.parse(t) for d, t in texts.items()}
        protego_calls = [(protego[d].can_fetch, u) for d, u in workload]
        contenders["protego"] = lambda: [check(u, agent) for check, u in protego_calls]
    stdlib = {d: stdlib_parser(t) for d, t in texts.items()}
    stdlib_calls = [(stdlib[d].can_fetch, u) for d, u in workload]
    contenders["stdlib"] = lambda: [check(agent, u) for check, u in stdlib_calls]
    for fn in contenders.values():
        fn()  # warm-up
    check_times = interleaved(contenders, repeats)
    texting_checks = sum(1 for d, _ in workload if d in texting)
    counts = {name: texting_checks if name == "texting_robots" else len(workload)
              for name in check_times}
    per_round = {name: [counts[name] / s for s in times] for name, times in check_times.items()}
    per_s = {name: max(rates) for name, rates in per_round.items()}
    check_ratio = ({name: ratios(per_round, name, "texting_robots") for name in per_round}
                   if "texting_robots" in per_round else {})
    per_s["polite cold first pass"] = len(workload) / cold_s
    figures["checks_per_s"] = per_s
    figures["checks_ratio_best_median"] = check_ratio

    # -- docs.oracle.com --------------------------------------------------------------------
    oracle: dict[str, float] = {}
    body, urls = one_file(args.corpus, "docs.oracle.com")  # in --quick's sample or not
    if body is not None:
        urls *= 20
        whole = parse(body, max_bytes=len(body))  # all 31,843 rules, past the 500 KiB cap
        whole.allowed(urls[0], agent)
        one: dict[str, Callable[[], object]] = {
            "polite": lambda: [whole.allowed(u, agent) for u in urls]}
        if texting_robots is not None:
            robot = texting_robots.Robot(agent, body)
            one["texting_robots"] = lambda: [robot.allowed(u) for u in urls]
        if Protego is not None:
            rp = Protego.parse(body.decode("utf-8", "replace"))
            one["protego"] = lambda: [rp.can_fetch(u, agent) for u in urls]
        oracle_times = interleaved(one, repeats)
        oracle = {name: min(times) / len(urls) * 1e6 for name, times in oracle_times.items()}
        oracle_ratio = ({name: ratios(oracle_times, name, "texting_robots") for name in one}
                        if "texting_robots" in one else {})
        figures["oracle_us_per_check"] = oracle
        figures["oracle_ratio_best_median"] = oracle_ratio

    # -- pathological pattern ---------------------------------------------------------------
    nasty = parse("User-agent: *\nDisallow: /*a*a*a*a*a*a*a*a*a*a*a*a*b\n")
    long_url = "https://example.com/" + "a" * 5000
    nasty_ms = best_of(repeats, lambda: nasty.allowed(long_url, agent)) * 1e3
    figures["pathological_ms"] = nasty_ms

    # -- agreement --------------------------------------------------------------------------
    google = {d: parse(b, "google") for d, b in bodies.items()}
    agree: dict[str, tuple[int, int]] = {}
    mine = [polite[d].allowed(u, agent) for d, u in workload]
    if texting:
        pairs = [(i, d, u) for i, (d, u) in enumerate(workload) if d in texting]
        agree["rfc9309 vs texting_robots"] = (
            sum(mine[i] == texting[d].allowed(u) for i, d, u in pairs), len(pairs))
        agree["google vs texting_robots"] = (
            sum(google[d].allowed(u, agent) == texting[d].allowed(u) for _, d, u in pairs),
            len(pairs))
    if protego:
        agree["rfc9309 vs protego"] = (
            sum(m == protego[d].can_fetch(u, agent) for m, (d, u) in zip(mine, workload,
                                                                           strict=True)),
            len(workload))
    figures["agreement"] = agree

    # -- report -----------------------------------------------------------------------------
    print(f"best of {repeats} interleaved rounds; ratios as best / median of the rounds\n")
    print(f"| parse, {len(bodies):,} files | seconds | polite / this | median |")
    print("|---|---:|---:|---:|")
    for name, s in sorted(parse_s.items(), key=lambda kv: kv[1]):
        best, median = parse_ratio[name]
        print(f"| {name} | {s:.3f} | {best:.2f} | {median:.2f} |")
    if failures.get("texting_robots"):
        print(f"\ntexting_robots refused {failures['texting_robots']} files")
    print("\n| checks, warm | checks/s | this / texting_robots | median |")
    print("|---|---:|---:|---:|")
    base = per_s.get("texting_robots")
    for name, rate in sorted(per_s.items(), key=lambda kv: -kv[1]):
        ratio = f"{rate / base:.2f}" if base else "-"
        median = f"{check_ratio[name][1]:.2f}" if name in check_ratio else "-"
        print(f"| {name} | {rate:,.0f} | {ratio} | {median} |")
    if oracle:
        print("\n| docs.oracle.com, one check | µs | this / texting_robots | median |")
        print("|---|---:|---:|---:|")
        for name, us in sorted(oracle.items(), key=lambda kv: kv[1]):
            if name in oracle_ratio:
                best, median = oracle_ratio[name]
                print(f"| {name} | {us:.2f} | {best:.3f} | {median:.3f} |")
            else:
                print(f"| {name} | {us:.2f} | - | - |")
    print(f"\npathological /*a*a*...*b on a 5,000-character path: {nasty_ms:.2f} ms per check")
    print("\n| verdicts | agree | of |")
    print("|---|---:|---:|")
    for name, (same, total) in agree.items():
        print(f"| {name} | {same:,} | {total:,} |")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
