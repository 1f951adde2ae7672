"""Cold calls through ``applyonce serve``: a fresh client process per call, beside the in-process
call, the interpreter's own start and the Codex binary.

    python3 benchmarks/bench_serve.py [--runs 3] [--calls 10] [--files 1000] [--keep DIR]
        [--no-instructions]

On a generated repository of ``--files`` files with a checkout (bytecode compiled first), each run
times ``--calls`` fresh processes of each row, interleaved (so that a shared machine's drifting
load weighs on every row alike): ``python -c pass``; ``applyonce apply`` and ``apply_patch`` of a
fresh three-file edit (a new commit) in process (``APPLYONCE_SERVE=0``) and through a running
server (``APPLYONCE_SERVE=require``); a replay through the server; and the Codex binary applying
the same kind of edit to a copy of the checkout (it writes the files only: no commit, no fsync).
Prints each row's median over all calls, the spread of the runs' medians, and the instructions one
more client process executes (valgrind; the server's worker is not counted: the row says what a
caller's process costs). Goal: a cold call through the server within 30 ms.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cold_start import instructions
from speed_setup import ENV, Edits, applyonce_command, codex_binary, machine, make_repo

GOAL_MS = 30.0


def _script(name: str) -> list[str]:
    """The console script ``name`` beside this interpreter, run by its shebang's interpreter."""
    path = Path(sys.executable).parent / name
    if path.is_file():
        return [str(path)]
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"no {name} console script next to {sys.executable} or on PATH")
    return [found]


def _run(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"") -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    wall = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    parser.add_argument("--calls", type=int, default=10, help="calls of each row a run")
    parser.add_argument("--files", type=int, default=1000, help="files in the repository")
    parser.add_argument("--keep", type=Path, help="make the repositories here")
    parser.add_argument(
        "--no-instructions", action="store_true", help="skip valgrind's instruction counts"
    )
    ns = parser.parse_args()
    print("$ python3 benchmarks/bench_serve.py " + " ".join(sys.argv[1:]))
    root = ns.keep or Path(tempfile.mkdtemp(prefix="aoserve-"))
    root.mkdir(parents=True, exist_ok=True)
    repo = make_repo(root / f"serve-{ns.files}", ns.files, checkout=True)
    codex_repo = make_repo(root / f"codex-{ns.files}", ns.files, checkout=True)
    edits, codex_edits = Edits(repo, ns.files), Edits(codex_repo, ns.files)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ENV)
    env.pop("APPLYONCE_SERVE", None)
    alone = {**env, "APPLYONCE_SERVE": "0"}
    through = {**env, "APPLYONCE_SERVE": "require"}
    applyonce, how = applyonce_command()
    apply_patch = _script("apply_patch")
    import applyonce as package

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(package.__file__).parent)], check=True
    )
    server = subprocess.Popen(
        [*applyonce, "serve", "--repo", str(repo), "--idle", "600"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert server.stderr is not None
    ready = server.stderr.readline().decode()
    if not ready.startswith("applyonce serve: listening"):
        raise SystemExit(f"the server did not start: {ready}{server.stderr.read().decode()}")
    replayed = edits.next()[0].encode()
    _run([*applyonce, "apply", "-", "-C", str(repo)], alone, repo, replayed)
    codex = codex_binary()

    def apply_row(environ: dict[str, str]) -> Callable[[], float]:
        return lambda: _run(
            [*applyonce, "apply", "-", "-C", str(repo)], environ, repo, edits.next()[0].encode()
        )

    def apply_patch_row(environ: dict[str, str]) -> Callable[[], float]:
        return lambda: _run([*apply_patch, edits.next()[0]], environ, repo)

    rows: dict[str, Callable[[], float]] = {
        "`python -c pass`": lambda: _run([sys.executable, "-c", "pass"], env, repo),
        "`applyonce apply`, a new commit, in process": apply_row(alone),
        "`applyonce apply`, a new commit, through the server": apply_row(through),
        "`applyonce apply`, a replay, through the server": lambda: _run(
            [*applyonce, "apply", "-", "-C", str(repo)], through, repo, replayed
        ),
        "`apply_patch PATCH`, a new commit, in process": apply_patch_row(alone),
        "`apply_patch PATCH`, a new commit, through the server": apply_patch_row(through),
    }
    if codex is not None:
        rows["Codex `codex --codex-run-as-apply-patch PATCH` (files only)"] = lambda: _run(
            [codex, "--codex-run-as-apply-patch", codex_edits.next()[0]], env, codex_repo
        )
    try:
        for row in rows.values():  # the page cache, the packs, the server's first fork
            row()
        runs: dict[str, list[list[float]]] = {name: [] for name in rows}
        for _ in range(ns.runs):
            times: dict[str, list[float]] = {name: [] for name in rows}
            for _ in range(ns.calls):
                for name, row in rows.items():
                    times[name].append(row())
            for name in rows:
                runs[name].append(times[name])
        client = [*applyonce, "apply", "-C", str(repo)]
        replay_file = root / "replayed.patch"
        replay_file.write_bytes(replayed)
        counted = (
            {}
            if ns.no_instructions
            else {
                "`python -c pass`": instructions([sys.executable, "-c", "pass"], env),
                "`applyonce apply`, a replay, through the server": instructions(
                    [*client, str(replay_file)], through
                ),
            }
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    for line in machine(root):
        print(line)
    print(f"applyonce: {how}; bytecode compiled; {ns.runs} runs of {ns.calls} calls a row")
    print()
    print("| what | median | spread of the runs' medians | instructions (the client) |")
    print("| --- | ---: | ---: | ---: |")
    for name, per_run in runs.items():
        every = [t for run in per_run for t in run]
        medians = [statistics.median(run) for run in per_run]
        count = counted.get(name)
        shown = f"{count / 1e6:,.0f} M" if count is not None else ""
        print(
            f"| {name} | {statistics.median(every):.1f} ms | "
            f"{min(medians):.1f} - {max(medians):.1f} ms | {shown} |"
        )
    through_ms = statistics.median(
        t for run in runs["`applyonce apply`, a new commit, through the server"] for t in run
    )
    verdict = "met" if through_ms <= GOAL_MS else "missed"
    print()
    print(
        f"goal: a cold call through the server <= {GOAL_MS:.0f} ms: {verdict} ({through_ms:.1f} ms)"
    )
    if codex is None:
        print("(no Codex binary: set APPLYONCE_CODEX_BIN)")


if __name__ == "__main__":
    main()
