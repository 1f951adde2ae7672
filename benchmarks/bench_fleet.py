"""Contention on one server branch (issue 14): calls/s for 1, 2, 4 and 8 concurrent clients.

    python3 benchmarks/bench_fleet.py [--quick] [--clients 1,2,4,8] [--seconds S] [--no-baseline]

Starts its own PostgreSQL server and ``git daemon`` (tests/pgserver.py, tests/gitserver.py). For
each client count N: a fresh bare repository on the daemon, a fresh database, N clones, and N
client processes, each a loop of in-process ``Executor(clone, ledger=URL, remote="origin")
.apply(...)`` calls of distinct one-file patches (so no call conflicts in content: every restage
succeeds), all started together after one untimed warm-up call each, for ``--seconds`` seconds.
The table gives the calls, the wall seconds (from the start to the last call's end), calls/s, the
CAS failures per call (restages: a call staged again because another client moved the branch;
counted from the ledger's ``staged`` events), the p50/p95 latency of one committed call, and the
calls that did not land (rejected — e.g. ``base-moved`` after the bounded restages, which each
client prints on its stderr, kept in ``--keep DIR`` — or failed). Then the same
single client against baselines: a bare repository on this disk as the remote (a ``file://``
URL: git's transport without the daemon) with the PostgreSQL ledger, the git daemon with the
SQLite ledger, and a local branch with SQLite (no fleet at all: what one clone does today).
Every row checks that each committed call is one commit on the branch.

``--quick``: 1 and 2 clients, 1.5 s each, one baseline row (a smoke test in tests). Never asserted
in tests: the figures of a shared machine are only indicative; the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed_setup import ENV, git, machine  # noqa: E402


@dataclass
class Setup:
    """Where the calls go: the remote's kind and the ledger's."""

    remote: str  # "git daemon", "file:// bare repo" or "none" (a local branch)
    ledger: str  # "PostgreSQL" or "SQLite"


@dataclass
class Result:
    setup: Setup
    clients: int
    calls: int
    seconds: float
    restages: int
    errors: int
    latencies_ms: list[float]

    def row(self) -> str:
        lat = sorted(self.latencies_ms)
        p50 = statistics.median(lat) if lat else float("nan")
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else float("nan")
        per_call = self.restages / self.calls if self.calls else 0.0
        rate = self.calls / self.seconds if self.seconds else 0.0
        cells = [
            self.setup.remote, self.setup.ledger, str(self.clients), str(self.calls),
            f"{self.seconds:.1f}", f"{rate:.1f}", f"{per_call:.2f}", f"{p50:.0f} ms",
            f"{p95:.0f} ms", str(self.errors),
        ]  # fmt: skip
        return "| " + " | ".join(cells) + " |"


HEADER = (
    "| remote | ledger | clients | calls | seconds | calls/s | restages/call | p50 | p95 "
    "| not landed |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


# ------------------------------------------------------------------------------ one client


def client_main(spec: dict[str, object]) -> None:
    """One client process: warm up, say ready, wait for go, call until the time is up, report."""
    from applyonce import Executor
    from applyonce.state.ledger import EventKind

    ledger, remote = spec["ledger"], spec["remote"]
    # None: the clone's own SQLite ledger, its own branch.
    executor = Executor(
        str(spec["clone"]),
        ledger=str(ledger) if ledger else None,
        remote=str(remote) if remote else None,
    )
    prefix = str(spec["prefix"])
    count = 0

    def one() -> tuple[float, int, bool]:
        nonlocal count
        count += 1
        patch = (
            f"*** Begin Patch\n*** Add File: {prefix}/f{count}.txt\n+{prefix} {count}\n"
            "*** End Patch\n"
        )
        start = time.perf_counter()
        try:
            receipt = executor.apply(patch)
        except Exception as exc:  # a conflict (restages exhausted) or a lost connection
            print(f"error: {exc}", file=sys.stderr)
            return (time.perf_counter() - start) * 1000, 0, False
        elapsed = (time.perf_counter() - start) * 1000
        if receipt.status != "committed":
            print(f"{receipt.status}: {receipt.error}", file=sys.stderr)
        events = executor.ledger.events(receipt.call_id)
        staged = sum(1 for e in events if e.kind == EventKind.STAGED)
        return elapsed, max(0, staged - 1), receipt.status == "committed"

    one()  # warm-up: imports, connections, the first fetch
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + float(spec["seconds"])  # type: ignore[arg-type]
    latencies, restages, errors = [], 0, 0
    while time.monotonic() < deadline:
        ms, again, ok = one()
        if ok:
            latencies.append(ms)
            restages += again
        else:
            errors += 1
    print(json.dumps({"latencies": latencies, "restages": restages, "errors": errors}), flush=True)
    executor.close()


# ------------------------------------------------------------------------------ the driver


class Servers:
    """The PostgreSQL server and the git daemon of this run."""

    def __init__(self, root: Path) -> None:
        from tests.gitserver import GitDaemon
        from tests.pgserver import PostgresServer

        self.root = root
        # Its own temporary directory: as root, the server runs as another user, who must be
        # able to enter it.
        self.postgres = PostgresServer()
        self.daemon = GitDaemon(root / "git")
        self.postgres.start()

    def stop(self) -> None:
        try:
            self.postgres.cleanup()
        finally:
            self.daemon.stop()


def seeded(seed: Path) -> Path:
    """The seed repository: one commit on ``main``."""
    if not seed.exists():
        git("init", "-q", "-b", "main", seed)
        (seed / "README.md").write_text("# bench\n")
        git("-C", seed, "add", "README.md")
        git("-C", seed, "commit", "-q", "-m", "base")
    return seed


def seeded_bare(path: Path | str, seed: Path) -> None:
    """A bare repository holding the seed's one commit on ``main``."""
    git("-C", seeded(seed), "push", "-q", path, "main:main")


def measure(
    servers: Servers, work: Path, setup: Setup, clients: int, seconds: float, name: str
) -> Result:
    """N client processes against one branch, started together."""
    seed = work / "seed"
    if setup.remote == "git daemon":
        url = servers.daemon.make_bare(name)
        bare = servers.daemon.path_of(url)
        seeded_bare(url, seed)
        clones = [servers.daemon.clone(url, work / name / f"client{i}") for i in range(clients)]
    elif setup.remote == "file:// bare repo":
        bare = work / name / "server.git"
        git("init", "-q", "--bare", "-b", "main", bare)
        seeded_bare(bare, seed)
        clones = []
        for i in range(clients):
            clone = work / name / f"client{i}"
            git("clone", "-q", f"file://{bare}", clone)
            clones.append(clone)
    else:
        bare = work / name / "client0"
        git("clone", "-q", seeded(seed), bare)
        clones = [bare]
    ledger = servers.postgres.create_database() if setup.ledger == "PostgreSQL" else None
    remote = "origin" if setup.remote != "none" else None
    procs = []
    errs = []
    for i, clone in enumerate(clones):
        spec = {"clone": str(clone), "ledger": ledger, "remote": remote, "prefix": f"c{i}",
                "seconds": seconds}  # fmt: skip
        # Its errors to a file: a client that fails many calls must not block on a full pipe.
        err = work / name / f"client{i}.err"
        errs.append(err)
        with err.open("w") as err_file:
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--client", json.dumps(spec)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=err_file,
                    text=True,
                )
            )
    for proc, err in zip(procs, errs, strict=True):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            proc.wait()
            raise SystemExit(f"a client did not start: {line}{err.read_text()}")
    start = time.monotonic()
    for proc in procs:
        proc.stdin.write("go\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
    reports = []
    for proc, err in zip(procs, errs, strict=True):
        out, _ = proc.communicate(timeout=seconds + 300)
        if proc.returncode != 0:
            raise SystemExit(f"a client failed (exit {proc.returncode}): {err.read_text()}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.monotonic() - start
    latencies = [ms for r in reports for ms in r["latencies"]]
    # Every committed call is one commit on the branch (plus the base and the warm-ups): a
    # figure of calls that did not all land would be no figure at all.
    branch = bare if setup.remote != "none" else clones[0]
    landed = int(git("-C", branch, "rev-list", "--count", "main").decode())
    if landed != 1 + clients + len(latencies):
        raise SystemExit(f"{landed - 1 - clients} commits for {len(latencies)} committed calls")
    return Result(
        setup, clients, len(latencies), wall, sum(r["restages"] for r in reports),
        sum(r["errors"] for r in reports), latencies,
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 2 clients, 1.5 s each")
    parser.add_argument("--clients", default=None, help="client counts, e.g. 1,2,4,8")
    parser.add_argument("--seconds", type=float, default=None, help="duration per row")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline rows")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    parser.add_argument("--client", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        client_main(json.loads(args.client))
        return 0
    try:
        counts = [int(n) for n in (args.clients or ("1,2" if args.quick else "1,2,4,8")).split(",")]
    except ValueError:
        parser.error("--clients takes numbers separated by commas, e.g. 1,2,4,8")
    if any(n < 1 for n in counts):
        parser.error("--clients: each count must be at least 1")
    seconds = args.seconds or (1.5 if args.quick else 20.0)
    # Commits need an author; the clients inherit it.
    os.environ.update(ENV)
    work = args.keep or Path(tempfile.mkdtemp(prefix="aofleet-"))
    work.mkdir(parents=True, exist_ok=True)
    command = "python3 benchmarks/bench_fleet.py" + (" " + " ".join(argv) if argv else "")
    if argv is None:
        command = "python3 benchmarks/bench_fleet.py " + " ".join(sys.argv[1:])
    servers = Servers(work / "servers")
    try:
        for line in machine(work):
            print(line)
        print(f"postgresql {_pg_version()}, psycopg {_psycopg_version()}")
        print(f"load average at start: {_load()}")
        print(f"command: `{command.strip()}`")
        print()
        print(HEADER, flush=True)
        fleet = Setup("git daemon", "PostgreSQL")
        for n in counts:
            print(measure(servers, work, fleet, n, seconds, f"n{n}").row(), flush=True)
        if not args.no_baseline:
            baselines = [Setup("file:// bare repo", "PostgreSQL")]
            if not args.quick:
                baselines += [Setup("git daemon", "SQLite"), Setup("none", "SQLite")]
            for i, setup in enumerate(baselines):
                print(measure(servers, work, setup, 1, seconds, f"base{i}").row(), flush=True)
        print()
        print(f"load average at the end: {_load()}")
    finally:
        servers.stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def _pg_version() -> str:
    postgres = shutil.which("postgres") or "postgres"
    out = subprocess.run([postgres, "--version"], capture_output=True, text=True, check=False)
    # "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    words = out.stdout.split()
    return words[2] if out.returncode == 0 and len(words) > 2 else "?"


def _psycopg_version() -> str:
    try:
        import psycopg
    except ImportError:
        return "?"
    return str(psycopg.__version__)


if __name__ == "__main__":
    sys.exit(main())
