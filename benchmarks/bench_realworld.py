"""Replay the whole pypa/packaging history through applyonce, as unified diffs and Codex patches.

    python3 benchmarks/bench_realworld.py [--bundle PATH] [--formats unified,codex] [--jobs N]
                                          [--start I] [--stop J] [--cli] [--skip-checks LIST]

Every non-merge commit C is applied at its parent with ``git diff -M P C`` and with the Codex patch
``tests/peers/realworld.py`` converts it to (see there for what is checked). Prints, per format:
commits, exact, skipped per reason, failures (commit id and error), and the wall time. Never asserts
a time; exits 1 if any commit failed, so a run can gate a change by hand.

``--as-model``: instead, each commit as the Codex patch a model writes (three context lines, an
``@@`` line naming the def or class), applied to the files it touches by applyonce's engine and by
the real Codex binary; prints what each did per commit, counted (an ambiguity refusal where Codex
reproduces the commit is ``applyonce refused (ambiguous-context), Codex exact``).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.peers.codex_differential import find_codex_binary
from tests.peers.realworld import (
    BUNDLE,
    Format,
    Result,
    non_merge_commits,
    replay,
    replay_as_model,
    run_applyonce,
)


def _run(job: tuple[str, list[str], Format, bool, tuple[str, ...]]) -> list[Result]:
    bundle, commits, fmt, cli, skip = job
    return replay(bundle, commits, fmt, cli=run_applyonce if cli else None, skip_checks=skip)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundle", default=str(BUNDLE))
    parser.add_argument("--formats", default="unified,codex")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one clone each)")
    parser.add_argument("--start", type=int, default=0, help="first commit, oldest is 0")
    parser.add_argument("--stop", type=int, default=None)
    parser.add_argument("--cli", action="store_true", help="a real 'applyonce apply' per commit")
    parser.add_argument(
        "--skip-checks",
        default="",
        help="built-in checks to turn off, comma-separated (syntax, markers; default: none)",
    )
    parser.add_argument("--show", type=int, default=40, help="failures to print per format")
    parser.add_argument("--as-model", action="store_true", help="Codex patches as a model writes")
    ns = parser.parse_args()
    if not Path(ns.bundle).exists():
        print(f"no bundle at {ns.bundle}", file=sys.stderr)
        return 2
    commits = non_merge_commits(ns.bundle)[ns.start : ns.stop]
    if ns.as_model:
        return _as_model(ns.bundle, commits, ns.show)
    failed_any = False
    for fmt in ns.formats.split(","):
        started = time.perf_counter()
        # Interleaved slices: old and new commits (small and large trees) spread over the workers.
        skip = tuple(name for name in ns.skip_checks.split(",") if name)
        jobs = [(ns.bundle, commits[k :: ns.jobs], fmt, ns.cli, skip) for k in range(ns.jobs)]
        with ProcessPoolExecutor(ns.jobs) as pool:
            parts = list(pool.map(_run, jobs))
        order = {c: i for i, c in enumerate(commits)}
        results = sorted((r for part in parts for r in part), key=lambda r: order[r.commit])
        elapsed = time.perf_counter() - started
        outcomes = Counter(r.outcome for r in results)
        skipped = Counter(r.reason for r in results if r.outcome == "skipped")
        failures = [r for r in results if r.outcome == "failed"]
        failed_any |= bool(failures)
        print(
            f"== {fmt}: {len(results)} commits, {outcomes['exact']} exact, "
            f"{outcomes['skipped']} skipped, {len(failures)} failed, {elapsed:.1f} s "
            f"({ns.jobs} jobs, checks skipped: {', '.join(skip) or 'none'})"
        )
        for reason, count in skipped.most_common():
            print(f"   skipped {count:>4}  {reason}")
        by_reason = Counter(r.reason for r in failures)
        for reason, count in by_reason.most_common():
            print(f"   failed  {count:>4}  {reason}")
        for r in failures[: ns.show]:
            print(f"   {r.line()[:400]}")
        if len(failures) > ns.show:
            print(f"   … and {len(failures) - ns.show} more")
    return 1 if failed_any else 0


def _as_model(bundle: str, commits: list[str], show: int) -> int:
    binary = find_codex_binary()
    if binary is None:
        print("no Codex binary: set APPLYONCE_CODEX_BIN or run .ci/run", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = replay_as_model(bundle, commits, binary)
    elapsed = time.perf_counter() - started
    outcomes = Counter(outcome for _, outcome, _ in results)
    print(f"== codex as a model writes it: {len(results)} commits, {elapsed:.1f} s")
    for outcome, count in outcomes.most_common():
        print(f"   {count:>4}  {outcome}")
    listed = [r for r in results if "ambiguous" in r[1] or "applyonce wrong" in r[1]]
    for commit, outcome, detail in listed[:show]:
        print(f"   {commit[:12]} {outcome}: {detail[:300]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
