"""Speed: one markdown table of applyonce beside its floors, all measured in one run (issue 13).

    python3 benchmarks/bench_speed.py [--quick] [--rows ROW,…] [--sizes N,…] [--keep DIR]

Rows (``--rows``, default all): inproc (``Executor.apply`` per call on generated repos of 1k, 10k
and 100k files, bare and with a checkout), gitapply (``git apply --index && git commit`` on the
checkouts), codex (the Codex ``apply_patch`` binary: files only, the non-durable floor), indexwrite
(one libgit2 index write), throughput (durable calls/s beside the fsync floor), cold (a fresh
``applyonce apply`` process beside ``python -c pass``), recover (1,000 interrupted calls), audit
(10,000 trailer commits beside ``git log``), history (a call after those 10,000 vs on a fresh
repo), hunk (hunk location in a 200,000-line file of repeats). A call's patch edits one line in
each of three files in three folders, a fresh edit each call, so each call commits. Then a table
of the issue's targets.

Uses only applyonce's public API (``Executor``), its CLI and, for the hunk row, the patch engine's
``parse`` and ``apply_hunks``, so it runs unchanged against later versions. ``--quick``: fewer
runs, no 100k repos, 200 recover calls, 1,000 audit commits. ``--keep DIR``: generated repos stay
there and are reused (the audit repo's 10,000 calls are the slowest setup; ``--audit-calls N``
makes N instead). Never asserted in
tests: timings on a shared machine are only indicative.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed_setup import (
    ENV,
    Edits,
    applyonce_command,
    codex_binary,
    default_root,
    git,
    machine,
    make_repo,
    timed,
)

ROWS = ("inproc", "gitapply", "codex", "indexwrite", "throughput")
ROWS += ("cold", "recover", "audit", "history", "hunk")
SETUP = str(Path(__file__).resolve().parent / "speed_setup.py")


@dataclass
class Row:
    what: str
    values: list[float]
    unit: str  # "ms", "s" or "calls/s"
    command: str
    key: str


@dataclass
class Bench:
    root: Path
    quick: bool
    audit_calls: int = 0  # 0: 10,000 (1,000 with --quick)
    row: str = ""  # the --rows name being measured
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def runs(self, full: int, quick: int) -> int:
        return quick if self.quick else full

    def history(self) -> int:
        return self.audit_calls or self.runs(10_000, 1_000)

    def add(
        self, key: str, what: str, values: list[float], unit: str = "ms", size: int = 0
    ) -> None:
        command = "python3 benchmarks/bench_speed.py" + " --quick" * self.quick
        command += f" --rows {self.row}" + (f" --sizes {size}" if size else "")
        if self.audit_calls and self.row in ("audit", "history"):
            command += f" --audit-calls {self.audit_calls}"
        self.rows.append(Row(what, values, unit, f"`{command}`", key))
        print(f"  {what}: {_fmt(statistics.median(values), unit)}", file=sys.stderr, flush=True)

    def value(self, key: str) -> float | None:
        return next((statistics.median(r.values) for r in self.rows if r.key == key), None)


def _label(files: int) -> str:
    return f"{files // 1000}k" if files >= 1000 else str(files)


def _commit(ex: object, text: str, tool_call_id: str) -> None:
    receipt = ex.apply(text, tool_call_id=tool_call_id)  # type: ignore[attr-defined]
    assert receipt.status == "committed", receipt.status


# ------------------------------------------------------------------------------------------ rows


def rows_inproc(b: Bench, sizes: list[int]) -> None:
    from applyonce.executor import Executor

    # One long-lived Executor a repo, their calls taken in turn, so that the load of a shared
    # machine drifting during the row weighs on every size alike (the targets are ratios).
    repos = [(files, kind) for files in sizes for kind in ("bare", "ck")]
    edits, executors, ms = {}, {}, {}
    for files, kind in repos:
        repo = make_repo(b.root / f"{kind}-{files}", files, checkout=kind == "ck")
        edits[files, kind], executors[files, kind], ms[files, kind] = (
            Edits(repo, files),
            Executor(repo),
            [],
        )
    tag = time.time_ns()
    for turn in range(3 + b.runs(30, 8)):
        for key in repos:
            if turn >= 3 + b.runs(30 if key[0] < 100_000 else 20, 8):
                continue
            start = time.perf_counter()
            _commit(executors[key], edits[key].next()[0], f"bench-{tag}-{edits[key].count}")
            if turn >= 3:  # the first three are the warm-up
                ms[key].append((time.perf_counter() - start) * 1000)
    for files, kind in repos:
        executors[files, kind].close()
        where = "checkout synced" if kind == "ck" else "bare, no checkout"
        what = f"in-process `Executor(repo).apply(patch)`, {_label(files)} files, {where}"
        b.add(f"inproc-{kind}-{files}", what, ms[files, kind], size=files)


def rows_gitapply(b: Bench, sizes: list[int]) -> None:
    patch_file = b.root / "patch.diff"
    for files in sizes:
        repo = make_repo(b.root / f"ck-{files}", files, checkout=True)
        edits = Edits(repo, files)

        def call(edits: Edits = edits, repo: Path = repo) -> None:
            patch_file.write_text(edits.next()[1])
            git("apply", "--index", patch_file, cwd=repo)
            git("commit", "-q", "-m", "bench", cwd=repo)

        ms = timed(call, b.runs(20 if files < 100_000 else 15, 6), warmup=2)
        what = f"`git apply --index P && git commit -q -m M`, {_label(files)} files, checkout"
        b.add(f"gitapply-{files}", what, ms, size=files)


def rows_codex(b: Bench, sizes: list[int]) -> None:
    binary = codex_binary()
    if binary is None:
        b.notes.append("codex: no Codex binary (set APPLYONCE_CODEX_BIN or run .ci/run): skipped.")
        return
    for files in sizes:
        repo = make_repo(b.root / f"ck-{files}", files, checkout=True)
        edits = Edits(repo, files)

        def call(edits: Edits = edits, repo: Path = repo) -> None:
            argv = [binary, "--codex-run-as-apply-patch", edits.next()[0]]
            subprocess.run(argv, cwd=repo, check=True, capture_output=True)

        ms = timed(call, b.runs(20, 6), warmup=2)
        git("checkout", "HEAD", "--", *edits.paths(), cwd=repo)  # Codex wrote only the files
        what = f"Codex `codex --codex-run-as-apply-patch PATCH`, {_label(files)} files, checkout"
        b.add(
            f"codex-{files}", what + ": writes the files only (no commit, no fsync)", ms, size=files
        )
    b.notes.append(f"codex: {binary.split('/node_modules/')[0].rsplit('/', 1)[-1]} binary.")


def rows_indexwrite(b: Bench, sizes: list[int]) -> None:
    import pygit2

    for files in sizes:
        repo = make_repo(b.root / f"ck-{files}", files, checkout=True)
        copy = repo / ".git" / "index.bench-copy"
        shutil.copyfile(repo / ".git" / "index", copy)
        index = pygit2.Index(str(copy))  # read once

        def durable(index: pygit2.Index = index, copy: Path = copy) -> None:
            index.write()
            fd = os.open(copy, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)

        for plus, fn, key in (("", index.write, "index"), (" + fsync", durable, "index-fsync")):
            what = (
                f"one libgit2 index write{plus}: `Index(copy).write()`{plus}, {_label(files)} files"
            )
            b.add(f"{key}-{files}", what, timed(fn, b.runs(15, 5), warmup=1), size=files)
        copy.unlink()
    b.notes.append(
        "indexwrite: pygit2 reads the checkout's index once, from a copy in the same .git; each "
        "run times git_index_write of it (lock file, write, rename: libgit2 does not fsync an "
        "index, enable_fsync_gitdir or not), then the same plus a fsync of the written file."
    )


def rows_throughput(b: Bench) -> None:
    from applyonce.executor import Executor

    repo = make_repo(b.root / "ck-1000", 1000, checkout=True)
    edits, ex, tag = Edits(repo, 1000), Executor(repo), time.time_ns()
    for k in range(3):
        _commit(ex, edits.next()[0], f"warm-{tag}-{k}")
    batches, size = 5, b.runs(40, 10)
    rates = []
    for batch in range(batches):
        start = time.perf_counter()
        for k in range(size):
            _commit(ex, edits.next()[0], f"tp-{tag}-{batch}-{k}")
        rates.append(size / (time.perf_counter() - start))
    ex.close()
    what = "durable calls/s, one branch, one process, 1k files, checkout synced"
    b.add("throughput", f"{what} ({batches} batches of {size} calls)", rates, "calls/s")
    # The floor: how many small writes per second this file system makes durable.
    probe = b.root / "fsync-probe"
    probe.mkdir(exist_ok=True)
    dir_fd, floor = os.open(probe, os.O_RDONLY), []
    try:
        for _ in range(batches):
            start = time.perf_counter()
            for k in range(2 * size):
                fd = os.open(probe / f"f{k % 4}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.write(fd, b"x" * 100)
                os.fsync(fd)
                os.close(fd)
                os.fsync(dir_fd)
            floor.append(2 * size / (time.perf_counter() - start))
    finally:
        os.close(dir_fd)
    what = "fsync floor: write 100 B to a file + fsync it + fsync its folder, per second"
    b.add("fsync", what + ", same file system", floor, "calls/s")


def rows_cold(b: Bench) -> None:
    repo = make_repo(b.root / "ck-1000", 1000, checkout=True)
    edits, patch_file = Edits(repo, 1000), b.root / "patch.txt"
    command, how = applyonce_command()
    runs = b.runs(15, 5)
    # As installed: the modules' bytecode is there (pip compiles a wheel's modules). An
    # environment with PYTHONDONTWRITEBYTECODE would compile every module of every run instead.
    import applyonce

    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(applyonce.__file__).parent)],
        check=True,
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def apply() -> None:
        patch_file.write_text(edits.next()[0])
        argv = [*command, "apply", "--json", "-C", str(repo), str(patch_file)]
        proc = subprocess.run(argv, capture_output=True, env=env)
        assert proc.returncode == 0, proc.stderr

    what = "cold `applyonce apply --json -C REPO PATCH`, a fresh process, 1k files, checkout"
    b.add("cold", what, timed(apply, runs, warmup=2))
    for code in ("pass", "import pygit2"):
        argv = [sys.executable, "-c", code]
        ms = timed(lambda argv=argv: subprocess.run(argv, check=True, env=env), runs, warmup=1)
        b.add(f"python-{code}", f"floor: `python -c '{code}'`", ms)
    pythonpath = "set" if os.environ.get("PYTHONPATH") else "unset"
    b.notes.append(
        f"cold: applyonce is {how}; python is {sys.executable}; PYTHONPATH {pythonpath};"
        " bytecode compiled first (compileall), PYTHONDONTWRITEBYTECODE unset."
    )


def rows_recover(b: Bench) -> None:
    calls, repo = b.runs(1000, 200), b.root / "recover"
    shutil.rmtree(repo, ignore_errors=True)  # recover settles the calls: rebuilt each run
    make_repo(repo, 100, checkout=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, SETUP, "interrupt", str(repo), str(calls)], check=True)
    built = time.perf_counter() - start
    command, _ = applyonce_command()
    start = time.perf_counter()
    proc = subprocess.run([*command, "recover", "--json", "-C", str(repo)], capture_output=True)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    settled = json.loads(proc.stdout).get("outcomes")
    assert settled is None or len(settled) == calls, (len(settled), calls)  # None: not in JSON
    what = f"`applyonce recover --json` of {calls:,} interrupted calls, one process, checkout"
    b.add("recover", what, [elapsed], "s")
    b.notes.append(
        f"recover: the {calls:,} interrupted calls (a third each after-publish, after-commit-"
        "object, after-prepared) are made by one setup process (benchmarks/speed_setup.py) in "
        "which APPLYONCE_FAULT's SIGKILL raises instead (finally blocks run, unlike a kill's), "
        f"with every fsync off; it then exits, so their owners are dead ({built:.1f} s)."
    )


def _audit_repo(b: Bench, calls: int) -> Path:
    repo = b.root / f"audit-{calls}"
    if (repo / "bench-built").exists():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    make_repo(repo, 100, checkout=False)
    start = time.perf_counter()
    subprocess.run([sys.executable, SETUP, "calls", str(repo), str(calls)], check=True)
    b.notes.append(
        f"audit, history: the {calls:,} calls (one added file each, bare repo) are made by one "
        "setup process (benchmarks/speed_setup.py) with every fsync off (os, libgit2, SQLite "
        f"synchronous OFF), {time.perf_counter() - start:.0f} s; `--keep DIR` reuses them."
    )
    return repo


def rows_audit(b: Bench) -> None:
    repo = _audit_repo(b, b.history())
    commits = int(git("-C", repo, "rev-list", "--count", "main")) - 1
    command, _ = applyonce_command()

    def audit() -> None:
        # --full: the whole history each time (a plain audit after the first one would rely on
        # its checkpoint; bench_audit.py times that).
        proc = subprocess.run([*command, "audit", "--full", "-C", str(repo)], capture_output=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    def log() -> None:
        with open(os.devnull, "wb") as null:
            argv = ["git", "-C", str(repo), "log", "--format=%(trailers)", "main"]
            subprocess.run(argv, stdout=null, check=True)

    runs = b.runs(3, 1)
    b.add(
        "audit",
        f"`applyonce audit --full` of {commits:,} trailer commits, one process, bare",
        timed(audit, runs),
    )
    what = f"`git log --format='%(trailers)' main >/dev/null`, the same {commits:,} commits"
    b.add("gitlog", what, timed(log, 2 * runs, warmup=1))


def rows_history(b: Bench) -> None:
    from applyonce.executor import Executor

    old, fresh = _audit_repo(b, b.history()), b.root / "fresh"
    calls = int(git("-C", old, "rev-list", "--count", "main")) - 1
    shutil.rmtree(fresh, ignore_errors=True)
    make_repo(fresh, 100, checkout=False)
    for repo, key, label in (
        (fresh, "fresh", "a fresh bare repo"),
        (old, "after", f"a bare repo after {calls:,} committed calls"),
    ):
        ex, tag, done = Executor(repo), time.time_ns(), [0]

        def call(ex: Executor = ex, tag: int = tag, done: list[int] = done) -> None:
            done[0] += 1
            text = f"*** Begin Patch\n*** Add File: h/{tag}/c{done[0]}.txt\n+x\n*** End Patch\n"
            _commit(ex, text, f"h-{tag}-{done[0]}")

        ms = timed(call, b.runs(30, 10), warmup=3)
        ex.close()
        b.add(key, f"in-process call (one added file) on {label}", ms)


def rows_hunk(b: Bench) -> None:
    from applyonce.patch import apply_hunks, parse

    n, m = 200_000, 10_000
    data = (
        "\n".join(["    pass"] * (n // 2) + ["END"] + ["    pass"] * (n // 2 - 1)) + "\n"
    ).encode()
    body = "\n".join([" " + "    pass"] * (m - 1) + ["-END", "+DONE", " " + "    pass"]) + "\n"
    cases = {
        "Codex": "*** Begin Patch\n*** Update File: big.py\n@@\n" + body + "*** End Patch\n",
        "unified": f"--- a/big.py\n+++ b/big.py\n@@ -2,{m + 1} +2,{m + 1} @@\n" + body,
    }
    for name, text in cases.items():

        def run(text: str = text) -> None:
            out, _ = apply_hunks(data, parse(text).operations[0].hunks, path="big.py")
            assert b"\nDONE\n" in out

        what = f"hunk location, parse + apply in-process: a {name} hunk of {m:,} lines"
        where = " (its line numbers say line 2)" if name == "unified" else ""
        what += f"{where}, its change mid-way down a {n:,}-line file of one repeated line"
        b.add(f"hunk-{name}", what, timed(run, b.runs(7, 3), warmup=1))


# ---------------------------------------------------------------------------------------- output


def _fmt(value: float, unit: str) -> str:
    if unit == "ms" and value >= 1000:
        return f"{value / 1000:.2f} s"
    return f"{value:,.{2 if unit == 's' else 0 if unit == 'calls/s' else 1}f} {unit}"


def print_tables(b: Bench, header: list[str]) -> None:
    print("\n".join(header) + "\n")
    print("| what | median | spread (min\u2013max) | N | command |\n|---|---|---|---|---|")
    for r in b.rows:
        lo, hi, n = _fmt(min(r.values), r.unit), _fmt(max(r.values), r.unit), len(r.values)
        spread = f"{lo} \u2013 {hi}" if n > 1 else "\u2014"
        median = _fmt(statistics.median(r.values), r.unit)
        print(f"| {r.what} | {median} | {spread} | {n} | {r.command} |")
    print("".join(f"\n* {note}" for note in b.notes))
    v = b.value

    def ratio(top: str, bottom: str) -> float | None:
        x, y = v(top), v(bottom)
        return x / y if x and y else None

    big = max(
        (int(r.key.rsplit("-", 1)[1]) for r in b.rows if r.key.startswith("inproc-")), default=0
    )
    size, idx, one, ck = (
        _label(big),
        v(f"index-fsync-{big}"),
        v("inproc-ck-1000"),
        v(f"inproc-ck-{big}"),
    )
    bound = idx + 1.5 * one if idx and one else None
    hunks = [x for x in (v("hunk-Codex"), v("hunk-unified")) if x is not None]
    checks: list[tuple[str, float | None, str, float]] = []
    if big > 1000:
        checks += [
            (
                f"no checkout: {size} / 1k files, per call",
                ratio(f"inproc-bare-{big}", "inproc-bare-1000"),
                "≤",
                1.3,
            ),
            (
                f"checkout, {size}: per call / (one index write + fsync + 1.5 \u00d7 the 1k call "
                f"= {bound or 0:.1f} ms)",
                ck / bound if ck and bound else None,
                "≤",
                1,
            ),
            (
                f"checkout, {size}: git apply + commit / applyonce",
                ratio(f"gitapply-{big}", f"inproc-ck-{big}"),
                "≥",
                3,
            ),
        ]
    checks += [
        ("durable calls/s, one branch, 1k files, checkout", v("throughput"), "≥", 150),
        ("cold `applyonce apply`, 1k files, ms", v("cold"), "≤", 150),
        ("`recover` of the interrupted calls (row above), s", v("recover"), "≤", 1.5),
        ("`audit` / `git log`", ratio("audit", "gitlog"), "≤", 2),
        ("hunk location, the slower case, ms", max(hunks) if hunks else None, "≤", 100),
        ("a call after the history / on a fresh repo", ratio("after", "fresh"), "≤", 1.2),
    ]
    checks = [check for check in checks if check[1] is not None]
    print("\n| target | measured | goal | holds |\n|---|---|---|---|" if checks else "")
    for name, value, op, limit in checks:
        if value is not None:
            holds = value <= limit if op == "≤" else value >= limit
            print(f"| {name} | {value:.2f} | {op} {limit:g} | {'yes' if holds else '**no**'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, no 100k repos")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated: " + ",".join(ROWS))
    parser.add_argument("--sizes", help="repo sizes in files (default 1000,10000,100000)")
    parser.add_argument("--keep", help="keep the generated repos in this folder and reuse them")
    parser.add_argument("--audit-calls", type=int, default=0, help="calls before audit, history")
    ns = parser.parse_args()
    rows = [r.strip() for r in ns.rows.split(",") if r.strip()]
    if unknown := sorted(set(rows) - set(ROWS)):
        parser.error(f"unknown row(s) {', '.join(unknown)}; choose from {', '.join(ROWS)}")
    sizes = [1000, 10_000] + ([] if ns.quick else [100_000])
    sizes = [int(s) for s in ns.sizes.split(",")] if ns.sizes else sizes
    os.environ.update(ENV)
    root = Path(ns.keep).resolve() if ns.keep else default_root()
    root.mkdir(parents=True, exist_ok=True)
    bench, started = Bench(root, ns.quick, ns.audit_calls), time.perf_counter()
    steps: dict[str, Callable[[], None]] = {
        "inproc": lambda: rows_inproc(bench, sizes),
        "gitapply": lambda: rows_gitapply(bench, sizes),
        "codex": lambda: rows_codex(bench, sizes),
        "indexwrite": lambda: rows_indexwrite(bench, sizes),
        "throughput": lambda: rows_throughput(bench),
        "cold": lambda: rows_cold(bench),
        "recover": lambda: rows_recover(bench),
        "audit": lambda: rows_audit(bench),
        "history": lambda: rows_history(bench),
        "hunk": lambda: rows_hunk(bench),
    }
    try:
        header = machine(root)
        for name in (r for r in ROWS if r in rows):
            print(f"{name} …", file=sys.stderr, flush=True)
            bench.row = name
            steps[name]()
        print_tables(bench, [*header, f"whole run: {time.perf_counter() - started:.0f} s"])
    finally:
        if not ns.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
