"""The contention curve: N agents changing one repository, three ways, the same work.

    python3 benchmarks/bench_contention.py [--agents 1,2,4,8,16] [--calls K] [--whole]
                                           [--modes branch,lanes,worktrees] [--kill] [--keep DIR]
                                           [--http [--ledger postgres] [--restart]]

For each agent count N and each mode, a fresh repository (``main`` checked out, one commit) and N
agent processes started together, each doing K pieces of work: add a file of its own
(``agentI/fJ.txt``). The modes:

* ``branch``: every agent calls ``Executor.apply`` on ``main`` (the shared branch: a call whose
  tip moved is restaged, docs/design.md §1). Landed = the call returned committed.
* ``lanes``: every agent calls on its own lane (``Executor.open_lane``, ``agent/I``), and one
  queue process drains them onto ``main`` with ``Executor.land()`` in a loop (docs/design.md §12,
  "Lanes"). Landed = the landing call's receipt was written (its ``updated_at``).
* ``worktrees``: what people do today: ``git worktree add`` per agent (untimed, one after
  the other: several at once fail on the repository's locks), then per piece
  of work ``git add`` + ``git commit`` in the agent's worktree, then ``git rebase main`` and
  ``git merge --ff-only`` of it in the main checkout, again while that fails (another agent's
  merge won, or held ``index.lock``). Landed = the merge succeeded; an agent whose merges keep
  failing for 20 s (a merge that died on another's ``index.lock`` can leave files in the main
  checkout that every later merge refuses to overwrite) gives its remaining work up: not landed.

Reported per row: the work landed on ``main``, the wall seconds from the start to the last
landing, throughput (landed/s), p50/p95 latency from the start of a piece of work to its landing
on ``main``, restages (applyonce: a call staged again because the tip moved; worktrees: a rebase
and merge tried again), the work that did not land and whose agent was told so (applyonce: a
rejection, e.g. ``base-moved`` once the bounded restages ran out, retryable; worktrees: an agent
stuck), and the duplicates and lost work found on ``main`` at the end (each piece of work
reported landed must be there exactly once: by its ``Call-Id`` / ``Lands-Call-Id`` trailer, and
by its file; lost: reported landed and not there). ``--kill``: in the ``lanes`` and ``branch``
rows, one agent is SIGKILLed in the middle of a call (``APPLYONCE_FAULT=after-publish`` on its
second call), recovered with ``applyonce recover`` and restarted; in ``lanes`` the queue too
(``after-commit-object``, once).

By default the repository is on this disk, with no remote: every process is on this machine
(the situation of several agents in one checkout). ``--http``: a shared remote over smart HTTP
(nginx + fcgiwrap + ``git http-backend``, basic authentication, ``tests/httpserver.py``), a fresh
repository on it per row and a clone of it per agent (and for the queue), each clone with its
own SQLite ledger and ``--remote origin`` as the commit point; ``worktrees`` is then a clone per
agent with ``git commit``, ``git pull --rebase`` and ``git push``, again while the push is
refused. ``--ledger postgres`` (with ``--http``): every clone of a row shares one PostgreSQL
ledger (a server of the benchmark's own, ``tests/pgserver.py``, a fresh database per row), as a
fleet does. ``--restart`` (with ``--http``): once a third of a row's work is on the server's
``main``, the web server is SIGKILLed and started again and, with ``--ledger postgres``, so is
PostgreSQL (an immediate shutdown, then a start that replays its WAL); an applyonce agent or queue
that an outage refuses repeats the same call (the same ``Call-Id``: it lands once), a worktree
agent its push. Small and quick by default (1, 2, 4, 8, 16
agents x 3 pieces of work); ``--whole`` is 12 pieces each. Never asserted in tests except that
nothing is duplicated or lost: the figures of a shared machine are only indicative; the load
average is printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed_setup import ENV, git, machine  # noqa: E402

if TYPE_CHECKING:
    from applyonce import Executor

MODES = ("branch", "lanes", "worktrees")
T = TypeVar("T")
# How long a worktree agent retries its rebase and merge before it gives its work up as stuck.
STUCK_S = 20.0
# How long the queue waits before it looks at the lanes again when it found nothing to land.
IDLE_POLL_S = 0.2


def patch_of(agent: int, j: int) -> str:
    return (
        f"*** Begin Patch\n*** Add File: agent{agent}/f{j}.txt\n+agent {agent} work {j}\n"
        "*** End Patch\n"
    )


def stamp(iso: str) -> float:
    """A receipt's ``updated_at`` as a Unix time."""
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


# ------------------------------------------------------------------------------ one agent


def agent_main(spec: dict[str, object]) -> None:
    """One agent process: set up (untimed), say ready, wait for go, do its work, report one JSON
    line per piece of work (start, landed or done, restages, call)."""
    mode, repo, agent = str(spec["mode"]), Path(str(spec["repo"])), int(str(spec["agent"]))
    first, calls = int(str(spec["first"])), int(str(spec["calls"]))
    if mode == "worktrees":
        tree = Path(str(spec["work"])) / f"wt{agent}"  # made by the driver, one at a time
        print("ready", flush=True)
        sys.stdin.readline()
        for j in range(first, calls):
            done = (_clone_work if spec.get("http") else _worktree_work)(repo, tree, agent, j)
            print(json.dumps(done), flush=True)
            if "end" not in done:
                return  # the main checkout refuses every merge: the rest of the work is lost too
        return
    from applyonce import CallOptions, Executor
    from applyonce.state.ledger import EventKind

    executor = Executor(
        str(repo), remote="origin" if spec.get("http") else None, ledger=spec.get("ledger")
    )
    branch = _again(lambda: executor.open_lane(str(agent))) if mode == "lanes" else "main"
    print("ready", flush=True)
    sys.stdin.readline()
    for j in range(first, calls):
        start = time.time()
        if j == 1 and spec.get("kill"):
            os.environ["APPLYONCE_FAULT"] = "after-publish"  # this process dies in this call
        patch = patch_of(agent, j)
        receipt = _again(lambda: executor.apply(patch, CallOptions(branch=branch)))  # noqa: B023
        end = time.time()
        events = _again(lambda: executor.ledger.events(receipt.call_id))  # noqa: B023
        staged = sum(1 for e in events if e.kind == EventKind.STAGED)
        print(
            json.dumps(
                {"work": f"{agent}/{j}", "start": start, "end": end, "call_id": receipt.call_id,
                 "status": receipt.status, "restages": max(0, staged - 1)}
            ),
            flush=True,
        )  # fmt: skip
    executor.close()


def _again(call: Callable[[], T]) -> T:
    """``call()``, repeated while an outage (the web server or the database restarting) refuses
    it, for up to a minute: the same call each time, so it takes effect once."""
    from applyonce.errors import ApplyOnceError

    give_up = time.monotonic() + 60
    while True:
        try:
            return call()
        except ApplyOnceError as exc:
            if time.monotonic() > give_up:
                raise
            print(json.dumps({"refused": exc.one_line()}), flush=True)
            time.sleep(0.1)


def _worktree_work(repo: Path, tree: Path, agent: int, j: int) -> dict[str, object]:
    start = time.time()
    path = tree / f"agent{agent}" / f"f{j}.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"agent {agent} work {j}\n")
    git("-C", tree, "add", path)
    git("-C", tree, "commit", "-q", "-m", f"agent {agent} work {j}")
    tries = 0
    give_up = time.monotonic() + STUCK_S
    while True:
        if time.monotonic() > give_up:
            # e.g. a merge that died on another's index.lock left files in the main checkout
            # that every later 'git merge' refuses to overwrite: stuck until a person cleans up.
            return {"work": f"{agent}/{j}", "start": start, "call_id": None, "status": "stuck",
                    "restages": tries}  # fmt: skip
        rebased = subprocess.run(
            ["git", "-C", tree, "rebase", "-q", "main"], capture_output=True, check=False
        )
        if rebased.returncode != 0:
            subprocess.run(
                ["git", "-C", tree, "rebase", "--abort"], capture_output=True, check=False
            )
        else:
            merged = subprocess.run(
                ["git", "-C", repo, "merge", "-q", "--ff-only", f"wt/{agent}"],
                capture_output=True,
                check=False,
            )
            if merged.returncode == 0:
                break
        tries += 1
        time.sleep(0.005 * min(tries, 20))
    return {"work": f"{agent}/{j}", "start": start, "end": time.time(), "call_id": None,
            "status": "committed", "restages": tries}  # fmt: skip


def _clone_work(repo: Path, tree: Path, agent: int, j: int) -> dict[str, object]:
    """With a remote: commit in the agent's clone, then 'git pull --rebase' and 'git push', again
    while the push is refused (another agent pushed first)."""
    start = time.time()
    path = repo / f"agent{agent}" / f"f{j}.txt"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"agent {agent} work {j}\n")
    git("-C", repo, "add", path)
    git("-C", repo, "commit", "-q", "-m", f"agent {agent} work {j}")
    tries = 0
    give_up = time.monotonic() + STUCK_S
    while True:
        if time.monotonic() > give_up:
            return {"work": f"{agent}/{j}", "start": start, "call_id": None, "status": "stuck",
                    "restages": tries}  # fmt: skip
        pulled = subprocess.run(
            ["git", "-C", repo, "pull", "-q", "--rebase", "origin", "main"],
            capture_output=True,
            check=False,
        )
        if pulled.returncode != 0:
            subprocess.run(
                ["git", "-C", repo, "rebase", "--abort"], capture_output=True, check=False
            )
        else:
            pushed = subprocess.run(
                ["git", "-C", repo, "push", "-q", "origin", "HEAD:main"],
                capture_output=True,
                check=False,
            )
            if pushed.returncode == 0:
                break
        tries += 1
        time.sleep(0.005 * min(tries, 20))
    return {"work": f"{agent}/{j}", "start": start, "end": time.time(), "call_id": None,
            "status": "committed", "restages": tries}  # fmt: skip


# ------------------------------------------------------------------------------ the queue


def queue_main(spec: dict[str, object]) -> None:
    """The queue: ``land()`` every lane until ``expected`` lane calls are on main (or the
    deadline); one JSON line per landing (the lane call, its landing time, restages)."""
    from applyonce import Executor

    executor = Executor(
        str(spec["repo"]), remote="origin" if spec.get("http") else None, ledger=spec.get("ledger")
    )
    expected, deadline = int(str(spec["expected"])), time.monotonic() + float(str(spec["timeout"]))
    seen = set(spec.get("seen", []))  # type: ignore[arg-type]
    kill = bool(spec.get("kill"))
    print("ready", flush=True)
    sys.stdin.readline()
    on_main = len(seen)
    while on_main < expected and time.monotonic() < deadline:
        if kill and on_main >= expected // 3:
            os.environ["APPLYONCE_FAULT"] = "after-commit-object"  # dies in this landing
        report = _again(executor.land)
        on_main = report.already + len(report.landed)
        for done in report.landed:
            seen.add(done.call_id)
            landing = _again(lambda: _landing(executor, done.landing_call_id, done.call_id))  # noqa: B023
            print(json.dumps(landing), flush=True)
        if not report.landed:
            # Nothing waiting: look again in a moment (each look is a fetch of every lane).
            time.sleep(IDLE_POLL_S)
    # Landings another process finished (recover rolled a killed queue's landing forward).
    from applyonce.flow.call.land import landing_identity, lanes, pending

    ctx = executor.context
    for lane in lanes(ctx):
        for commit, call_id in pending(ctx, lane, "refs/heads/main"):
            if call_id is None or call_id in seen:
                continue
            _, ident = landing_identity(ctx, lane, "refs/heads/main", call_id, commit)
            if (
                executor.receipt_bytes(ident.call_id) is not None
                and executor.show(ident.call_id).status == "committed"
            ):
                print(json.dumps(_landing(executor, ident.call_id, call_id)), flush=True)
    executor.close()


def _landing(executor: Executor, landing: str, call_id: str) -> dict[str, object]:
    from applyonce.state.ledger import EventKind

    receipt = executor.show(landing)
    staged = sum(1 for e in executor.ledger.events(landing) if e.kind == EventKind.STAGED)
    return {"call_id": call_id, "landed": stamp(receipt.updated_at), "restages": max(0, staged - 1)}


# ------------------------------------------------------------------------------ the driver


@dataclass
class Row:
    mode: str
    agents: int
    landed: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    # lanes: each landed piece of work's time in the agent's call, then waiting for the queue
    calls_s: list[float] = field(default_factory=list)
    queued_s: list[float] = field(default_factory=list)
    restages: int = 0
    duplicates: int = 0
    lost: int = 0
    not_landed: int = 0
    kills: int = 0
    restarts: int = 0
    refusals: int = 0

    def line(self) -> str:
        lat = sorted(self.latencies)
        p50 = statistics.median(lat) if lat else float("nan")
        p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else float("nan")
        rate = self.landed / self.seconds if self.seconds else 0.0
        cells = [self.mode, str(self.agents), str(self.landed), f"{self.seconds:.1f}",
                 f"{rate:.1f}", f"{p50:.2f} s", f"{p95:.2f} s", str(self.restages),
                 str(self.not_landed), str(self.duplicates), str(self.lost),
                 str(self.kills), str(self.restarts), str(self.refusals)]  # fmt: skip
        return "| " + " | ".join(cells) + " |"


HEADER = (
    "| mode | agents | landed | seconds | landed/s | p50 | p95 | restages | not landed (told) "
    "| duplicates | lost | SIGKILLs | restarts | refused, repeated |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _spawn(argv_spec: tuple[str, dict[str, object]], err: Path) -> subprocess.Popen[str]:
    flag, spec = argv_spec
    with err.open("a") as err_file:
        return subprocess.Popen(
            [sys.executable, __file__, flag, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
        )


def _ready(proc: subprocess.Popen[str], err: Path) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        proc.wait()
        raise SystemExit(f"a process did not start: {line}{err.read_text()}")


def _go(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def _lines(proc: subprocess.Popen[str], timeout: float) -> list[dict[str, object]]:
    out, _ = proc.communicate(timeout=timeout)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def measure(
    work: Path,
    seed: Path,
    mode: str,
    agents: int,
    calls: int,
    kill: bool,
    server: Any = None,
    postgres: Any = None,
    restart: bool = False,
) -> Row:
    """One row: a fresh copy of the seed (with ``server``: a fresh repository on the smart-HTTP
    server and a clone of it per agent and for the queue; with ``postgres``: a fresh database
    their ledger), N agents (and the queue), started together; ``restart``: the servers
    restarted once a third of the work is on ``main``."""
    name = work / f"{mode}{agents}"
    name.mkdir(parents=True)
    err = name / "stderr.txt"
    row = Row(mode, agents)
    http = server is not None
    ledger = postgres.create_database() if postgres is not None and mode != "worktrees" else None
    if http:
        url = server.make_bare()
        git("-C", seed, "push", "-q", url, "main:main")
        repo = server.path_of(url)  # the server's bare repository: where main is checked
        clones = [server.clone(url, name / f"c{i}") for i in range(agents)]
        queue_repo = server.clone(url, name / "queue") if mode == "lanes" else repo
    else:
        repo = name / "repo"
        git("clone", "-q", seed, repo)
        clones, queue_repo = [repo] * agents, repo
    specs = [
        ("--agent", {"mode": mode, "repo": str(clones[i]), "agent": i, "first": 0, "calls": calls,
                     "work": str(name), "kill": kill and i == 0 and mode != "worktrees",
                     "http": http, "ledger": ledger})
        for i in range(agents)
    ]  # fmt: skip
    if mode == "worktrees" and not http:
        # One at a time, untimed: 'git worktree add' run at once by several agents fails on the
        # repository's own locks.
        for i in range(agents):
            git("-C", repo, "worktree", "add", "-q", "-b", f"wt/{i}", name / f"wt{i}", "main")
    procs = [_spawn(spec, err) for spec in specs]
    queue = None
    if mode == "lanes":
        queue_spec = {"repo": str(queue_repo), "expected": agents * calls, "timeout": 600,
                      "kill": kill, "http": http, "ledger": ledger}  # fmt: skip
        queue = _spawn(("--queue", queue_spec), err)
        procs.append(queue)
    for proc in procs:
        _ready(proc, err)
    start = time.time()
    _go(procs)
    # The queue read beside the agents: a queue SIGKILLed (--kill) is recovered and restarted
    # at once, while the agents still work.
    queue_lines: list[dict[str, object]] = []

    def run_queue() -> None:
        assert queue is not None
        queue_lines.extend(_lines(queue, 600))
        if queue.returncode == -signal.SIGKILL:
            row.kills += 1
            _recover(queue_repo, http, ledger)
            seen = [str(each["call_id"]) for each in queue_lines if "landed" in each]
            spec = {"repo": str(queue_repo), "expected": agents * calls, "timeout": 600,
                    "seen": seen, "http": http, "ledger": ledger}  # fmt: skip
            again = _spawn(("--queue", spec), err)
            _ready(again, err)
            _go([again])
            queue_lines.extend(_lines(again, 600))

    queuing = threading.Thread(target=run_queue)
    if queue is not None:
        queuing.start()
    restarter = None
    if restart:
        restarter = threading.Thread(
            target=_restart_at, args=(repo, agents * calls // 3, server, postgres, row)
        )
        restarter.start()
    records: list[dict[str, object]] = []
    for i, proc in enumerate(procs[:agents]):
        got = _lines(proc, 600)
        if proc.returncode == -signal.SIGKILL:  # --kill: recover, then the rest of its work
            row.kills += 1
            _recover(clones[i], http, ledger)
            killed = sum(1 for line in got if "work" in line)  # the piece of work it died in
            if mode == "branch":  # its interrupted call, on main once recover settled it
                got.append({"work": f"{i}/{killed}", "start": start, "end": time.time(),
                            "status": "committed"})  # fmt: skip
            spec = dict(specs[i][1], first=killed + 1, kill=False)
            again = _spawn(("--agent", spec), err)
            _ready(again, err)
            _go([again])
            got += _lines(again, 600)
        elif proc.returncode != 0:
            raise SystemExit(f"an agent failed (exit {proc.returncode}): {err.read_text()}")
        row.refusals += sum(1 for line in got if "refused" in line)
        records += [line for line in got if "work" in line]
    if mode == "lanes" and kill:
        # The killed agent's interrupted call: settled by recover, landed on the lane.
        for call in _lane_calls(repo):
            if call not in {r["call_id"] for r in records}:
                records.append(
                    {"work": "0/1", "call_id": call, "start": start, "status": "committed"}
                )
    if queue is not None:
        queuing.join()
        landings = queue_lines
        row.refusals += sum(1 for each in landings if "refused" in each)
        landings = [each for each in landings if "landed" in each]
        landed_at = {str(each["call_id"]): float(str(each["landed"])) for each in landings}
        row.restages = sum(int(str(each["restages"])) for each in landings)
        for record in records:
            if record["call_id"] in landed_at:
                landed_then = landed_at[str(record["call_id"])]
                if "end" in record:  # not a killed agent's call (recover settled it)
                    row.calls_s.append(float(str(record["end"])) - float(str(record["start"])))
                    row.queued_s.append(landed_then - float(str(record["end"])))
                record["end"] = landed_then
    row.restages += sum(int(str(r.get("restages", 0))) for r in records)
    landed = [r for r in records if "end" in r and r.get("status") == "committed"]
    row.not_landed = agents * calls - len(landed)
    ends = [float(str(r["end"])) for r in landed]
    row.landed = len(ends)
    row.seconds = (max(ends) - start) if ends else 0.0
    row.latencies = [float(str(r["end"])) - float(str(r["start"])) for r in landed]
    reported = {str(r["work"]) for r in landed if "work" in r}
    row.duplicates, row.lost = _check(repo, mode, reported)
    if restarter is not None:
        restarter.join()
    return row


def _restart_at(repo: Path, landed: int, server: Any, postgres: Any, row: Row) -> None:
    """Once ``landed`` pieces of work are on ``main`` (the server's), the web server SIGKILLed
    and started again, and PostgreSQL too (an immediate shutdown, then a start)."""
    give_up = time.monotonic() + 300
    while time.monotonic() < give_up:
        count = subprocess.run(
            ["git", "-C", str(repo), "rev-list", "--count", "main"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        if count and int(count) - 1 >= landed:
            break
        time.sleep(0.05)
    else:
        return
    if postgres is not None:
        postgres.kill()
    server.restart()
    row.restarts += 1
    if postgres is not None:
        postgres.start()
        row.restarts += 1


def _recover(repo: Path, http: bool, ledger: str | None = None) -> None:
    remote = ["--remote", "origin"] if http else []
    remote += ["--ledger", ledger] if ledger else []
    give_up = time.monotonic() + 60
    while True:
        ran = subprocess.run(
            [sys.executable, "-m", "applyonce", "recover", "--repo", str(repo), *remote],
            capture_output=True,
            text=True,
            check=False,
        )
        # The database or the web server restarting (--restart): again, in a moment.
        outage = "cannot reach" in ran.stdout + ran.stderr
        if not outage or time.monotonic() > give_up:
            break
        time.sleep(0.2)
    # 4: another agent's call is running meanwhile (held by its live process): not ours.
    if ran.returncode not in (0, 4) or outage:
        raise SystemExit(f"recover failed: {ran.stdout}{ran.stderr}")


def _lane_calls(repo: Path) -> list[str]:
    out = git("-C", repo, "log", "--format=%(trailers:key=Call-Id,valueonly)",
              "--branches=agent/*", "--not", "main").decode()  # fmt: skip
    return [line.strip() for line in out.splitlines() if line.strip()]


def _check(repo: Path, mode: str, reported: set[str]) -> tuple[int, int]:
    """Duplicates and lost work on main: each piece of work reported landed there exactly once,
    by its file and (for applyonce) by its trailer."""
    files = git("-C", repo, "ls-tree", "-r", "--name-only", "main").decode().split()
    wanted = {f"agent{w.split('/')[0]}/f{w.split('/')[1]}.txt" for w in reported}
    lost = len(wanted - set(files))
    key = {"branch": "Call-Id", "lanes": "Lands-Call-Id"}.get(mode)
    if key is None:  # worktrees: one commit per piece of work
        subjects = git("-C", repo, "log", "--format=%s", "main").decode().splitlines()
        work = [s for s in subjects if s.startswith("agent ")]
        return len(work) - len(set(work)), lost
    out = git("-C", repo, "log", f"--format=%(trailers:key={key},valueonly)", "main").decode()
    ids = [line.strip() for line in out.splitlines() if line.strip()]
    return len(ids) - len(set(ids)), lost


def seeded(seed: Path) -> Path:
    git("init", "-q", "-b", "main", seed)
    (seed / "README.md").write_text("# bench\n")
    git("-C", seed, "add", "README.md")
    git("-C", seed, "commit", "-q", "-m", "base")
    return seed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="1,2,4,8,16", help="agent counts, e.g. 1,2,4,8,16")
    parser.add_argument("--calls", type=int, default=None, help="pieces of work per agent")
    parser.add_argument("--whole", action="store_true", help="12 pieces of work per agent")
    parser.add_argument("--modes", default=",".join(MODES), help="branch,lanes,worktrees")
    parser.add_argument("--kill", action="store_true", help="SIGKILL an agent and the queue")
    parser.add_argument(
        "--http", action="store_true", help="a shared remote over smart HTTP (nginx) per row"
    )
    parser.add_argument(
        "--ledger",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="with --http: each clone's own SQLite ledger, or one PostgreSQL ledger a row",
    )
    parser.add_argument(
        "--restart",
        action="store_true",
        help="with --http: restart the web server (and PostgreSQL) once a row is a third done",
    )
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    parser.add_argument("--agent", help=argparse.SUPPRESS)
    parser.add_argument("--queue", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.agent:
        agent_main(json.loads(args.agent))
        return 0
    if args.queue:
        queue_main(json.loads(args.queue))
        return 0
    try:
        counts = [int(n) for n in args.agents.split(",")]
    except ValueError:
        parser.error("--agents takes numbers separated by commas, e.g. 1,2,4,8")
    modes = args.modes.split(",")
    if any(n < 1 for n in counts) or not set(modes) <= set(MODES):
        parser.error("--agents: each at least 1; --modes: of branch, lanes, worktrees")
    if (args.ledger == "postgres" or args.restart) and not args.http:
        parser.error("--ledger postgres and --restart go with --http")
    calls = args.calls or (12 if args.whole else 3)
    os.environ.update(ENV)
    work = args.keep or Path(tempfile.mkdtemp(prefix="aocontention-"))
    work.mkdir(parents=True, exist_ok=True)
    seed = seeded(work / "seed")
    server = None
    if args.http:
        from tests.httpserver import HttpServer

        server = HttpServer(work / "http")
    postgres = None
    if args.ledger == "postgres":
        from tests.pgserver import PostgresServer

        postgres = PostgresServer()
        postgres.start()
    try:
        for line in machine(work):
            print(line)
        print(f"load average at start: {_load()}")
        print(f"command: `python3 benchmarks/bench_contention.py {' '.join(argv or sys.argv[1:])}`")
        where = "a smart-HTTP remote (nginx, git http-backend)" if args.http else "one repository"
        if postgres is not None:
            where += ", one PostgreSQL ledger a row"
        print(f"{calls} pieces of work per agent, on {where}")
        print()
        print(HEADER, flush=True)
        bad = 0
        split = []
        for n in counts:
            for mode in modes:
                row = measure(work, seed, mode, n, calls, args.kill, server, postgres, args.restart)
                bad += row.duplicates + row.lost
                print(row.line(), flush=True)
                if row.calls_s:
                    split.append(
                        f"lanes, {n} agents: the agent's call p50 {_pc(row.calls_s, 0.5):.2f} s,"
                        f" p95 {_pc(row.calls_s, 0.95):.2f} s; then the wait for the queue p50"
                        f" {_pc(row.queued_s, 0.5):.2f} s, p95 {_pc(row.queued_s, 0.95):.2f} s"
                    )
        print()
        for line in split:
            print(line)
        print(f"load average at the end: {_load()}")
    finally:
        if server is not None:
            server.stop()
        if postgres is not None:
            postgres.cleanup()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0


def _pc(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


if __name__ == "__main__":
    sys.exit(main())
