"""A fleet on one machine (issue 14): one Git server, client clones that each run their own
``applyonce`` processes, one PostgreSQL ledger. This module builds the calls the clients send, runs
the processes (a few at a time, the racing ones together), and reads what the server's branch says
afterwards; tests/e2e/fleet/test_fleet_simulation.py is the scenario and its assertions."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

# The exit codes a call may end with in a fleet (docs/design.md §8): committed, rejected, conflict (the
# call is held by another live process), unknown (e.g. the database went away mid-call: the call
# is settled later by Git); -9 is a process killed by its armed fault point.
DESIGNED_EXITS = frozenset({0, 1, 4, 5, -9})


@dataclass(frozen=True)
class Call:
    """One logical call: its patch text and identity options. A shared call is sent by several
    clients at once, with the same text and options, hence the same Call-Id; a call on a
    ``lane`` commits to the branch ``agent/LANE`` (the branch is part of its Call-Id)."""

    key: str
    patch: str
    tool_call_id: str
    attempt: int
    senders: tuple[int, ...]
    lane: str | None = None

    def cli_args(self) -> list[str]:
        lane = ["--lane", self.lane] if self.lane else []
        return ["--tool-call-id", self.tool_call_id, "--attempt", str(self.attempt), *lane]


@dataclass
class Plan:
    """The calls of a run and the base files the update calls change."""

    calls: list[Call]
    base_files: dict[str, str]


def fleet_seed() -> int:
    """``APPLYONCE_FLEET_SEED`` when set (to repeat a run), else a fresh random seed."""
    given = os.environ.get("APPLYONCE_FLEET_SEED")
    return int(given) if given else random.SystemRandom().randrange(2**32)


def plan_calls(rng: random.Random, clients: int, distinct: int, shared: int) -> Plan:
    """``distinct`` calls of each client, each touching only its own files (so none conflicts in
    content with another), and ``shared`` calls each sent by several clients at once (all of
    them, or all but one). Some calls append a line (a pure addition without an anchor): applied
    twice, such a patch would change its file twice, so only the exactly-once machinery, not the
    patch's own content, keeps it from landing twice."""
    calls: list[Call] = []
    base: dict[str, str] = {"README.md": "# fleet\n"}
    for client in range(clients):
        for i in range(distinct):
            key = f"c{client}d{i}"
            kind = rng.choice(("add", "update", "multi", "append"))
            if kind == "append":
                base[f"{key}/log.txt"] = "start\n"
                patch = _patch(f"*** Update File: {key}/log.txt\n@@\n+entry {key}\n")
            elif kind == "add":
                patch = _patch(f"*** Add File: {key}/new.txt\n+{key}\n+{rng.random()}\n")
            elif kind == "update":
                base[f"{key}/value.txt"] = "value = 0\n"
                patch = _patch(
                    f"*** Update File: {key}/value.txt\n@@\n-value = 0\n+value = {i + 1}\n"
                )
            else:
                base[f"{key}/value.txt"] = "value = 0\n"
                patch = _patch(
                    f"*** Update File: {key}/value.txt\n@@\n-value = 0\n+value = {i + 1}\n"
                    f"*** Add File: {key}/mod.py\n+VALUE = {i}\n"
                    f'*** Add File: {key}/data.json\n+{{"call": "{key}"}}\n'
                )
            calls.append(Call(key, patch, f"call_{key}", rng.choice((1, 1, 2)), (client,)))
    for i in range(shared):
        key = f"s{i}"
        # Every other call is sent by all clients, the others by all but one, in turn: each
        # client sends as many shared calls as the next.
        senders = tuple(c for c in range(clients) if i % 2 == 0 or c != (i // 2) % clients)
        kind = rng.choice(("add", "update", "append"))
        if kind == "add":
            patch = _patch(f"*** Add File: shared/{key}.txt\n+{key}\n")
        elif kind == "update":
            base[f"shared/{key}.txt"] = "old\n"
            patch = _patch(f"*** Update File: shared/{key}.txt\n@@\n-old\n+new {key}\n")
        else:
            base[f"shared/{key}.txt"] = "start\n"
            patch = _patch(f"*** Update File: shared/{key}.txt\n@@\n+entry {key}\n")
        calls.append(Call(key, patch, f"call_{key}", rng.choice((1, 2)), senders))
    return Plan(calls, base)


def _patch(body: str) -> str:
    return f"*** Begin Patch\n{body}*** End Patch\n"


@dataclass
class Job:
    """One process: a call sent by one client, maybe with a fault point armed."""

    call: Call
    client: int
    fault: str | None = None
    code: int | None = None
    stdout: str = ""
    stderr: str = ""
    started: float = 0.0
    ended: float = 0.0

    def describe(self) -> str:
        fault = f" APPLYONCE_FAULT={self.fault}" if self.fault else ""
        return (
            f"{self.call.key} from client {self.client}{fault}: exit {self.code}, "
            f"stderr {self.stderr.strip()!r}, stdout {self.stdout[:200]!r}"
        )


@dataclass
class Fleet:
    """Where the run lives: the clones, the ledger URL, the patch files."""

    clones: list[Path]
    ledger: str
    work: Path
    remote: str = "origin"
    _patches: dict[str, Path] = field(default_factory=dict)

    def patch_file(self, call: Call) -> Path:
        path = self._patches.get(call.key)
        if path is None:
            path = self.work / "patches" / f"{call.key}.patch"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(call.patch)
            self._patches[call.key] = path
        return path

    def command(self, clone: Path, *args: str) -> list[str]:
        """``applyonce ARGS… --ledger URL --remote origin -C CLONE`` as a process's argv."""
        return [
            sys.executable, "-m", "applyonce", *args,
            "--ledger", self.ledger, "--remote", self.remote, "-C", str(clone),
        ]  # fmt: skip

    def apply_argv(self, job: Job) -> list[str]:
        clone = self.clones[job.client]
        return [
            *self.command(clone, "apply", "--json"),
            *job.call.cli_args(),
            str(self.patch_file(job.call)),
        ]

    def run(
        self, clone: Path, *args: str, timeout: float = 120, fault: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """One applyonce command on ``clone``, waited for; ``fault``: the point it dies at."""
        env = {k: v for k, v in os.environ.items() if k != "APPLYONCE_FAULT"}
        if fault:
            env["APPLYONCE_FAULT"] = fault
        return subprocess.run(
            self.command(clone, *args), capture_output=True, text=True, timeout=timeout,
            check=False, env=env,
        )  # fmt: skip


def run_jobs(
    fleet: Fleet,
    groups: Sequence[Sequence[Job]],
    *,
    limit: int,
    before_group: Callable[[int], None] = lambda _: None,
    timeout: float = 600,
) -> None:
    """Run every job in its own process, at most about ``limit`` at a time; the jobs of one group
    (the senders of one shared call) start together, so they race. ``before_group(i)`` is told
    before group ``i`` starts (the scenario restarts the database from there)."""
    running: list[tuple[Job, subprocess.Popen[bytes], Path]] = []
    out_dir = fleet.work / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    serial = 0
    deadline = time.monotonic() + timeout

    def reap(block: bool) -> None:
        while True:
            for entry in list(running):
                job, proc, stem = entry
                if proc.poll() is not None:
                    job.code = proc.returncode
                    job.ended = time.monotonic()
                    job.stdout = stem.with_suffix(".out").read_text(errors="replace")
                    job.stderr = stem.with_suffix(".err").read_text(errors="replace")
                    running.remove(entry)
            if not block or len(running) < limit:
                return
            if time.monotonic() > deadline:
                stop_all()
            time.sleep(0.01)

    def stop_all() -> None:
        for _, proc, _ in running:
            proc.kill()
            proc.wait()
        raise AssertionError(f"processes still running after {timeout} s")

    for index, group in enumerate(groups):
        reap(block=True)
        before_group(index)
        for job in group:
            serial += 1
            stem = out_dir / f"{serial:04d}"
            env = dict(os.environ)
            env.pop("APPLYONCE_FAULT", None)
            if job.fault:
                env["APPLYONCE_FAULT"] = job.fault
            with (
                stem.with_suffix(".out").open("wb") as out,
                stem.with_suffix(".err").open("wb") as err,
            ):
                job.started = time.monotonic()
                proc = subprocess.Popen(
                    fleet.apply_argv(job), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                    env=env,
                )  # fmt: skip
            running.append((job, proc, stem))
    while running:
        if time.monotonic() > deadline:
            stop_all()
        reap(block=False)
        time.sleep(0.01)


CLIENT = Path(__file__).with_name("client.py")


def send_through_api(
    fleet: Fleet, assignments: dict[int, list[Call]], *, timeout: float = 600
) -> dict[str, dict[str, object]]:
    """Each client sends its calls one after another through one in-process ``Executor`` (one
    process per client, the clients side by side); each call's result by its key."""
    procs = []
    for client, calls in assignments.items():
        sent = fleet.work / f"api-client{client}.json"
        sent.write_bytes(orjson.dumps([_call_json(call) for call in calls]))
        argv = [sys.executable, str(CLIENT), str(fleet.clones[client]), fleet.ledger, fleet.remote]
        with sent.open("rb") as stdin:
            procs.append(
                subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            )
    results: dict[str, dict[str, object]] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0 and b"Traceback" not in err, err.decode(errors="replace")
        for line in out.splitlines():
            row = orjson.loads(line)
            results[row["key"]] = row
    return results


def _call_json(call: Call) -> dict[str, object]:
    return {
        "key": call.key, "patch": call.patch, "tool_call_id": call.tool_call_id,
        "attempt": call.attempt, "lane": call.lane,
    }  # fmt: skip


def timeline(jobs: Sequence[Job], start: float) -> str:
    """One line per process, in the order they started: when, how long, how it ended."""
    lines = ["  start   took  exit  call        client  fault / stderr"]
    for job in sorted(jobs, key=lambda j: j.started):
        said = " ".join(filter(None, [job.fault, job.stderr.strip()[:120]]))
        lines.append(
            f"{job.started - start:7.1f} {job.ended - job.started:6.1f}  {job.code!s:>4}  "
            f"{job.call.key:<10}  {job.client:>6}  {said}"
        )
    return "\n".join(lines)


def assert_jobs_ended_as_designed(jobs: Sequence[Job], expected: dict[str, str], tag: str) -> None:
    """Every process ended as the design says a call may: with a designed exit code, no
    traceback, killed only where a fault was armed; a failure in one ``error:`` line saying what
    and what to do (a conflict, a lost database); else a receipt of its own call, committed on
    exit 0 and rejected (saying why) otherwise."""
    for job in jobs:
        assert job.code in DESIGNED_EXITS, f"{tag} {job.describe()}"
        assert "Traceback" not in job.stderr, f"{tag} {job.describe()}"
        if job.code == -9:
            assert job.fault is not None, f"{tag} killed without a fault armed: {job.describe()}"
            continue
        if job.code != 0 and job.stderr:
            lines = job.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), f"{tag} {job.describe()}"
            continue
        receipt = receipt_of(job)
        assert receipt["call_id"] == expected[job.call.key], f"{tag} {job.describe()}"
        assert receipt["status"] == ("committed" if job.code == 0 else "rejected"), (
            f"{tag} {job.describe()}"
        )


def receipt_of(job: Job) -> dict[str, object]:
    """The receipt an ``apply --json`` printed (exit 0 or 1)."""
    data = orjson.loads(job.stdout)
    assert isinstance(data, dict), job.describe()
    return data


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def call_ids_on(bare: Path, branch: str = "main") -> list[str]:
    """Every Call-Id trailer on the server's ``branch``, one per line, newest first."""
    out = git(bare, "log", "--format=%(trailers:key=Call-Id,valueonly)", branch)
    return [line.strip() for line in out.splitlines() if line.strip()]


def linear_history_problems(bare: Path, branch: str = "main") -> list[str]:
    """Why the history of ``branch`` is not one line of single-parent commits ([] if it is)."""
    problems = []
    merges = git(bare, "rev-list", "--merges", branch).split()
    if merges:
        problems.append(f"merge commits: {merges}")
    for line in git(bare, "rev-list", "--parents", branch).splitlines():
        commit, *parents = line.split()
        if len(parents) > 1:
            problems.append(f"{commit} has {len(parents)} parents")
    everything = git(bare, "rev-list", branch).split()
    first_parent = git(bare, "rev-list", "--first-parent", branch).split()
    if everything != first_parent:
        problems.append(
            f"first-parent chain has {len(first_parent)} commits, the branch {len(everything)}"
        )
    return problems
