"""The fleet simulation with lanes (docs/design.md §12, "Lanes and the merge queue"): three
clients each send their calls on their own lane (``--lane clientN``) through one server and one
PostgreSQL ledger, several at a time, some sent twice at once (a retry with the same tool call id:
a replay, never a second commit), with real SIGKILLs at random fault points. Meanwhile a queue in a
clone of its own runs ``applyonce land --all`` in a loop, SIGKILLed at the fault points of its
landings in turn, each kill followed by a ``recover`` from the queue's clone or from a clone that
makes no call, and the loop goes on; the database (over smart HTTP, the web server too) restarts
in the middle. Then ``recover`` in every clone, every call repeated on its lane, a last
``land --all``: each lane call is on its lane once and on ``main`` once (its landing's
``Lands-Call-Id``), nothing else is on ``main``, both histories are straight, the audit is clean.

The randomness of the plan is seeded; ``APPLYONCE_FLEET_SEED=N`` repeats it (the seed is printed,
and in every failure message; the queue's timing against the clients' is the machine's).
``APPLYONCE_FLEET_DISTINCT=N`` sets the calls per client."""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import orjson
import pytest

from tests.e2e.fleet.fleet import (
    Call,
    Fleet,
    Job,
    Plan,
    assert_jobs_ended_as_designed,
    fleet_seed,
    git,
    linear_history_problems,
    plan_calls,
    run_jobs,
    send_through_api,
    timeline,
)
from tests.e2e.fleet.servers import FleetServers

CLIENTS = 3
# Per client. .ci/run (APPLYONCE_TEST_SAMPLE set) runs CI_DISTINCT, over one of the two servers
# (the fleet_servers fixture's sampling); the README's command and benchmarks/sampled_whole.py
# run DEFAULT_DISTINCT over both.
DEFAULT_DISTINCT = 16
CI_DISTINCT = 4
# What a process cut off by the restart says: its ledger database is gone, or the web server
# dropped the connection before the remote answered.
OUTAGE_WORDS = ("ledger database", "did not say whether it took it", "RPC failed", "cannot reach")
SAMPLED = bool(os.environ.get("APPLYONCE_TEST_SAMPLE"))
DISTINCT = int(
    os.environ.get("APPLYONCE_FLEET_DISTINCT", CI_DISTINCT if SAMPLED else DEFAULT_DISTINCT)
)
RETRY_RATE = 0.25  # calls their client sends twice at once (one at least per client)
FAULT_RATE = 0.25  # client processes with a fault point armed
QUEUE_FAULT_RATE = 0.3  # queue runs with a fault point armed, after its first QUEUE_KILLS
PARALLEL = 3  # client processes at a time (besides the clients' batches and the queue)
# The points a lane call over a remote reaches: not the checkout's (during-catch-up, during-sync:
# the clone's checkout is not on the lane), nor --dirty commit's, a rejection's or recovery's.
CLIENT_KILL_POINTS = (
    "after-claim", "after-prepared", "after-stage", "after-check", "after-hooks",
    "after-commit-object", "after-push-objects", "after-publish", "after-receipt-tmp",
    "after-receipt", "after-ledger", "after-sync",
)  # fmt: skip
# The points a landing over a remote reaches: a lane call's, and the queue's checkout of the
# target following it (during-publish: its own branch's ref; during-sync: its files).
LAND_KILL_POINTS = (*CLIENT_KILL_POINTS[:-1], "during-publish", "during-sync", "after-sync")
# The remote's commit point: the objects pushed but the branch not moved, and the branch moved.
MUST_KILL = ("after-push-objects", "after-publish")
# Every queue run armed until the queue has been killed that many times (or the work ran out):
# at the remote's commit point in CI, at every point of a landing at the full size.
QUEUE_KILLS = 2 if SAMPLED else len(LAND_KILL_POINTS)
LAND_EXITS = frozenset({0, 4, 5})  # a held landing or a lost database: the next run goes on
# What a queue run's exit 5 may say: the database went away, or the remote (the web server
# restarted) did not say whether it took an update; never a landing's outcome left unknown.
LOST = ("ledger database", "did not say whether it took it")


@dataclass
class QueueRun:
    """One process of the queue: a ``land --all`` (maybe with a fault point armed) or the
    ``recover`` after its kill."""

    command: str
    clone: str
    fault: str | None
    code: int
    stdout: str
    stderr: str
    started: float
    ended: float

    def describe(self, *, whole: bool = False) -> str:
        fault = f" APPLYONCE_FAULT={self.fault}" if self.fault else ""
        return (
            f"{self.command} in {self.clone}{fault}: exit {self.code}, "
            f"stderr {self.stderr.strip()!r}, stdout {self.stdout[: None if whole else 300]!r}"
        )


def plan_lane_calls(rng: random.Random, distinct: int) -> Plan:
    """``distinct`` calls of each client on its lane (``clientN``), each touching files of its
    own; RETRY_RATE of each client's calls sent twice by it, at once."""
    plan = plan_calls(rng, CLIENTS, distinct, 0)
    retried = set()
    for client in range(CLIENTS):
        own = [call.key for call in plan.calls if call.senders == (client,)]
        retried.update(rng.sample(own, max(1, round(len(own) * RETRY_RATE))))
    planned = []
    for call in plan.calls:
        client = call.senders[0]
        senders = (client, client) if call.key in retried else (client,)
        planned.append(replace(call, senders=senders, lane=f"client{client}"))
    return Plan(planned, plan.base_files)


def arm_faults(rng: random.Random, jobs: list[Job]) -> None:
    """A fault point on about FAULT_RATE of the client processes, every point in turn; the
    remote's commit points also on calls sent once, which always reach them."""
    armed = rng.sample(jobs, round(len(jobs) * FAULT_RATE))
    points = list(CLIENT_KILL_POINTS) * (len(armed) // len(CLIENT_KILL_POINTS) + 1)
    rng.shuffle(points)
    for job, point in zip(armed, points, strict=False):
        job.fault = point
    alone = [job for job in jobs if len(job.call.senders) == 1 and job.fault is None]
    for job, point in zip(rng.sample(alone, len(MUST_KILL)), MUST_KILL, strict=True):
        job.fault = point


class Queue:
    """The merge queue: ``land --all`` in a loop from its own clone, a fault point armed on
    every run until it has been killed QUEUE_KILLS times, then on about QUEUE_FAULT_RATE of
    them (each point in turn, the remote's commit points first, kept armed until it fires), a
    ``recover`` after each kill from the queue's clone or the observer's. Once the clients are
    done (``clients_done``), the loop ends at the first run that finds nothing to land."""

    def __init__(self, fleet: Fleet, clone: Path, observer: Path, rng: random.Random) -> None:
        self.fleet, self.clone, self.observer, self.rng = fleet, clone, observer, rng
        self.runs: list[QueueRun] = []
        self.points = [p for p in LAND_KILL_POINTS if p not in MUST_KILL]
        rng.shuffle(self.points)
        self.points[:0] = rng.sample(MUST_KILL, len(MUST_KILL))
        self.clients_done = threading.Event()
        self.stop = threading.Event()  # at once: the test failed
        self.failures: list[BaseException] = []
        self.thread = threading.Thread(target=self._loop)

    def kills(self) -> list[QueueRun]:
        return [run for run in self.runs if run.code == -9]

    def _run(self, clone: Path, command: str, fault: str | None = None) -> QueueRun:
        started = time.monotonic()
        done = self.fleet.run(clone, command, *(["--all"] if command == "land" else []), "--json",
                              fault=fault)  # fmt: skip
        run = QueueRun(command, clone.name, fault, done.returncode, done.stdout, done.stderr,
                       started, time.monotonic())  # fmt: skip
        self.runs.append(run)
        return run

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                finishing = self.clients_done.is_set()
                armed = len(self.kills()) < QUEUE_KILLS or self.rng.random() < QUEUE_FAULT_RATE
                fault = self.points[len(self.kills()) % len(self.points)] if armed else None
                land = self._run(self.clone, "land", fault)
                if land.code == -9:
                    self._run(self.rng.choice((self.clone, self.observer)), "recover")
                elif land.code == 0 and not orjson.loads(land.stdout)["landed"]:
                    if finishing:
                        return
                    time.sleep(0.5)  # every lane on main: wait for the clients
        except BaseException as exc:  # reported by the test's thread
            self.failures.append(exc)


@pytest.mark.slow
@pytest.mark.scaled
def test_lanes_land_once_despite_killed_clients_and_queue(
    fleet_servers: FleetServers, tmp_path: Path
) -> None:
    seed = fleet_seed()
    tag = f"[APPLYONCE_FLEET_SEED={seed}]"
    print(f"lanes fleet seed: {seed}")
    rng = random.Random(seed)
    servers = fleet_servers
    plan = plan_lane_calls(rng, DISTINCT)
    calls = plan.calls
    bare, clones, observer = servers.server_with_clones(tmp_path, plan.base_files, CLIENTS)
    url = git(observer, "remote", "get-url", "origin").strip()
    queue_clone = servers.daemon.clone(url, tmp_path / "queue")
    fleet = Fleet(clones, servers.database(), tmp_path / "run")
    expected = servers.call_ids(tmp_path / "ident", bare, calls)
    by_id = {expected[c.key]: c for c in calls}
    base = git(bare, "rev-parse", "main").strip()

    # ---- phase 1: the clients send their calls (a retry's two sends together), kills, a
    # restart; the queue lands meanwhile
    groups = [[Job(call, client) for client in call.senders] for call in calls]
    rng.shuffle(groups)
    jobs = [job for group in groups for job in group]
    arm_faults(rng, jobs)
    # The calls killed at the remote's commit point go first, and the database restarts once
    # they ended: its outage cannot take their kills from them.
    must = [job for job in jobs if job.fault in MUST_KILL]
    groups.sort(key=lambda group: not any(job.fault in MUST_KILL for job in group))
    # A call sent once without a fault goes through its client's one long-lived process (the
    # Python API), beside the processes of the retried and the killed calls.
    batched = [job for job in jobs if job.fault is None and len(job.call.senders) == 1]
    in_batch = {id(job) for job in batched}
    groups = [kept for group in groups if (kept := [j for j in group if id(j) not in in_batch])]
    by_client = {c: [job.call for job in batched if job.client == c] for c in range(CLIENTS)}
    api_results: dict[str, dict[str, object]] = {}
    failures: list[BaseException] = []
    outage: list[float] = []
    queue = Queue(fleet, queue_clone, observer, random.Random(seed + 1))

    def run_batches() -> None:
        try:
            fleet.work.mkdir(parents=True, exist_ok=True)
            api_results.update(send_through_api(fleet, by_client))
        except BaseException as exc:  # reported by the test's thread below
            failures.append(exc)

    def cut_off() -> list[str]:
        # What the outage makes a process say: its ledger lost, or (the web server restarted)
        # its remote's answer.
        said = [job.stderr for job in jobs if job.code is not None]
        said += [run.stderr + run.stdout for run in queue.runs]
        return [text for text in said if any(words in text for words in OUTAGE_WORDS)]

    def restart_database() -> None:
        # Once the calls armed at the commit point have ended (the others, the clients'
        # batches and the queue in flight, connected), down until a process has been cut off
        # from its ledger, 2 s at most, then up again.
        while not all(job.code is not None for job in must):
            if time.monotonic() > started + 120:
                failures.append(AssertionError(f"still running after 120 s: {must}"))
                return
            time.sleep(0.05)
        outage.append(time.monotonic())
        try:
            servers.crash_database()
            servers.restart_web_server()
            while not cut_off() and time.monotonic() < outage[0] + 2:
                time.sleep(0.05)
            servers.start_database()
        except BaseException as exc:  # reported by the test's thread below
            failures.append(exc)
        outage.append(time.monotonic())

    restarter = threading.Thread(target=restart_database)
    started = time.monotonic()
    queue.thread.start()
    try:
        batches = threading.Thread(target=run_batches)
        batches.start()
        restarter.start()
        run_jobs(fleet, groups, limit=PARALLEL)
        restarter.join(timeout=60)
        batches.join(timeout=600)
    finally:
        queue.clients_done.set()
        queue.thread.join(timeout=120)
        stuck = queue.thread.is_alive()
        queue.stop.set()
        queue.thread.join()
    phase1 = time.monotonic() - started
    for job in batched:
        row = api_results.get(job.call.key)
        if row is None:  # the batches failed: said below
            continue
        job.started, job.ended = started, started + float(str(row["seconds"]))
        if "status" in row:
            job.code = 0 if row["status"] == "committed" else 1
            job.stdout = orjson.dumps({"call_id": row["call_id"], "status": row["status"]}).decode()
        else:
            job.code, job.stderr = int(str(row["exit"])), str(row["stderr"])
    # Shown with a failure (pytest prints a failed test's output): what ran when, and how.
    if outage:
        print(f"outage from {outage[0] - started:.1f} s to {outage[-1] - started:.1f} s")
    print(timeline(jobs, started))
    print(queue_timeline(queue.runs, started))
    assert not failures and not queue.failures, f"{tag} {failures} {queue.failures}"
    assert not stuck, (
        f"{tag} the queue was still landing 120 s after the clients were done; its recoveries "
        f"{[run.stdout for run in queue.runs if run.command == 'recover']}, its last run "
        f"{queue.runs[-1].describe(whole=True)}"
    )
    assert len(outage) == 2, f"{tag} the database did not restart"

    assert_exactly_once(bare, expected, by_id, base, tag, all_landed=False)
    assert_jobs_ended_as_designed(jobs, expected, tag)
    killed = [job for job in jobs if job.code == -9]
    for point in MUST_KILL:
        assert any(job.fault == point for job in killed), f"{tag} no client killed at {point}"
    landed_by: Counter[str] = Counter()
    for run in queue.runs:
        assert "Traceback" not in run.stderr, f"{tag} {run.describe()}"
        if run.code == -9:
            assert run.fault is not None, f"{tag} killed without a fault armed: {run.describe()}"
            continue
        # A call still held by a live client process waits for the next recovery, a landing
        # for the next land (4).
        assert run.code in LAND_EXITS, f"{tag} {run.describe()}"
        if run.code == 5:
            assert any(c in run.stdout + run.stderr for c in LOST), (
                f"{tag} {run.describe(whole=True)}"
            )
        if run.command == "recover":
            continue
        if run.stdout:
            report = orjson.loads(run.stdout)
            landed_by.update(str(done["call_id"]) for done in report.get("landed", ()))
        else:
            lines = run.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), f"{tag} {run.describe()}"
    twice = {by_id[c].key: n for c, n in landed_by.items() if n > 1}
    assert not twice, f"{tag} reported landed more than once: {twice}"
    # A land is one group of every waiting call, so how many runs find work, and so how many
    # armed runs die, depends on timing: the queue died at least once (a run armed at the
    # remote's commit point that lands something always dies there).
    for run in queue.runs:
        if run.command == "land" and run.fault in MUST_KILL and run.code == 0:
            landed = orjson.loads(run.stdout)["landed"]
            assert not landed, f"{tag} an armed queue run landed and lived: {run.describe()}"
    assert queue.kills(), f"{tag} the queue was never killed"
    print(f"queue killed at: {sorted({str(run.fault) for run in queue.kills()})}")
    assert cut_off(), f"{tag} the database restart hit no process"

    # ---- recovery in every clone: the observer's settles the crashed calls and landings, then
    # each other clone clears its own debris (side by side: nothing is left to settle)
    recovered = [fleet.run(observer, "recover", "--json")]
    others = (*clones, queue_clone)
    recovered += side_by_side(fleet, [(clone, ("recover", "--json")) for clone in others])
    # Once the observer's recover said every call was settled, no clone finds one in flight
    # (a receipt of a call the database lost in its restart is never in one clone's cache alone).
    for done in recovered:
        assert done.returncode == 0, (
            f"{tag} {done.args} {done.stdout} {done.stderr}; the observer's recover said"
            f" {recovered[0].stdout}"
        )
        assert "Traceback" not in done.stderr, f"{tag} {done.stderr}"
    for done in recovered[1:]:
        assert orjson.loads(done.stdout)["outcomes"] == [], f"{tag} {done.stdout}"

    # ---- every call once more on its lane (a replay, or the first commit of a call its crash
    # left rejected), all from one client's clone (the Call-Id is the call's, not the clone's:
    # another lane's call too); then the queue lands what is left
    started = time.monotonic()
    repeated = send_through_api(fleet, {rng.randrange(CLIENTS): calls})
    for call in calls:
        result = repeated[call.key]
        assert result.get("status") == "committed", f"{tag} {call.key}: {result}"
        assert result["call_id"] == expected[call.key], f"{tag} {call.key}: {result}"
    final = fleet.run(queue_clone, "land", "--all", "--json")
    assert final.returncode == 0, f"{tag} {final.stdout} {final.stderr}"
    report = orjson.loads(final.stdout)
    assert report["blocked"] == [], f"{tag} {final.stdout}"
    landed_by.update(str(done["call_id"]) for done in report["landed"])
    finish = time.monotonic() - started
    twice = {by_id[c].key: n for c, n in landed_by.items() if n > 1}
    assert not twice, f"{tag} reported landed more than once: {twice}"

    # ---- the server's branches: each call once on its lane and once on main, nothing else
    assert_exactly_once(bare, expected, by_id, base, tag, all_landed=True)
    assert git(bare, "fsck", "--strict", "--no-dangling") == "", tag
    for client in range(CLIENTS):
        lane = f"agent/client{client}"
        keys = [call.key for call in calls if call.senders[0] == client]
        # The lane's calls' files on main as on the lane (a pure addition applied twice would
        # show its line twice), and changed from the base.
        assert git(bare, "diff", "--name-only", lane, "main", "--", *keys) == "", f"{tag} {lane}"
        changed = git(bare, "diff", "--name-only", base, "main", "--", *keys).split()
        unchanged = [key for key in keys if not any(p.startswith(f"{key}/") for p in changed)]
        assert not unchanged, f"{tag} not on main: {unchanged}"
    for call in calls:
        if "+entry" in call.patch:
            shown = git(bare, "show", f"main:{call.key}/log.txt")
            assert shown == f"start\nentry {call.key}\n", f"{tag} {call.key}: {shown!r}"

    # ---- the ledger and the audit, from a fresh clone that made no call
    fresh = servers.daemon.clone(url, tmp_path / "fresh")
    # Each branch's Call-Id commits (a lane's: its calls, and the landings on main it started
    # at); the lanes audited too at the full size.
    branches = ["main", *(f"agent/client{c}" for c in range(CLIENTS) if not SAMPLED)]
    counts = {
        branch: sum(bool(c["Call-Id"]) for c in _trailers(bare, f"{base}..{branch}"))
        for branch in branches
    }
    # Side by side with them, landing again from a client's clone, which landed nothing:
    # every call there already, nothing written.
    again, logged, *audits = side_by_side(
        fleet,
        [(clones[0], ("land", "--all", "--json")), (fresh, ("log", "--json"))]
        + [(fresh, ("audit", "--branch", branch)) for branch in counts],
    )
    assert again.returncode == 0, f"{tag} {again.stdout} {again.stderr}"
    report = orjson.loads(again.stdout)
    assert (report["landed"], report["blocked"], report["already"]) == ([], [], len(calls)), (
        f"{tag} {again.stdout}"
    )
    assert logged.returncode == 0 and "Traceback" not in logged.stderr, f"{tag} {logged.stderr}"
    states = {str(row["call_id"]): str(row["state"]) for row in orjson.loads(logged.stdout)}
    assert set(expected.values()) <= set(states), tag
    assert set(states.values()) == {"committed"}, f"{tag} {Counter(states.values())}"
    assert len(states) == 2 * len(calls), f"{tag} {len(states)} rows for {len(calls)} calls"
    for (branch, count), audit in zip(counts.items(), audits, strict=True):
        assert audit.returncode == 0 and audit.stderr == "", f"{tag} {audit.stdout} {audit.stderr}"
        assert audit.stdout.endswith(
            f"audited {count} Call-Id commit(s) on refs/heads/{branch} and {len(states)} "
            "receipt(s): clean\n"
        ), f"{tag} {audit.stdout}"
    exits = dict(sorted(Counter(job.code for job in jobs).items()))
    queue_kills = Counter(run.fault for run in queue.kills())
    print(
        f"lanes fleet: {len(calls)} calls, {len(jobs)} sends (exits {exits}), {len(killed)} "
        f"clients killed; queue: {sum(r.command == 'land' for r in queue.runs)} lands, killed "
        f"at {dict(queue_kills)}; phase 1 {phase1:.1f} s, repeats and last land {finish:.1f} s"
    )


def assert_exactly_once(
    bare: Path,
    expected: dict[str, str],
    by_id: dict[str, Call],
    base: str,
    tag: str,
    *,
    all_landed: bool,
) -> None:
    """On each lane: its own calls, each at most once (every one with ``all_landed``), nothing
    but calls; on main: nothing but landings, each of a lane call that is on its lane, at its
    commit there, each at most once (every lane call with ``all_landed``); every history
    straight."""
    on_lane: dict[str, str] = {}  # lane call -> its commit on its lane
    for client in range(CLIENTS):
        lane = f"agent/client{client}"
        if not git(bare, "for-each-ref", f"refs/heads/{lane}"):
            assert not all_landed, f"{tag} no lane {lane}"
            continue
        commits = _trailers(bare, f"main..{lane}")
        ids = Counter(c["Call-Id"] for c in commits)
        assert "" not in ids, f"{tag} a commit on {lane} is not a call's: {commits}"
        twice = {by_id[c].key if c in by_id else c: n for c, n in ids.items() if n > 1}
        assert not twice, f"{tag} duplicated on {lane} (call: commits): {twice}"
        own = {call_id for call_id, call in by_id.items() if call.lane == f"client{client}"}
        assert set(ids) <= own, f"{tag} on {lane}, calls not its own: {sorted(set(ids) - own)}"
        if all_landed:
            lost = sorted(by_id[c].key for c in own - set(ids))
            assert not lost, f"{tag} lost from {lane}: {lost}"
        on_lane.update((c["Call-Id"], c["commit"]) for c in commits)
        assert linear_history_problems(bare, lane) == [], f"{tag} {lane}"
    landings = _trailers(bare, f"{base}..main")
    lands = Counter(c["Lands-Call-Id"] for c in landings)
    assert "" not in lands, f"{tag} a commit on main lands no lane call: {landings}"
    twice = {by_id[c].key if c in by_id else c: n for c, n in lands.items() if n > 1}
    assert not twice, f"{tag} landed twice on main (call: commits): {twice}"
    assert len({c["Call-Id"] for c in landings}) == len(landings), f"{tag} {landings}"
    for commit in landings:
        lands_id = commit["Lands-Call-Id"]
        assert lands_id in on_lane, f"{tag} landing {commit} of no lane call on a lane"
        assert commit["Lane-Commit"] == on_lane[lands_id], f"{tag} {commit}"
    if all_landed:
        lost = sorted(by_id[c].key for c in set(expected.values()) - set(lands))
        assert not lost, f"{tag} not landed on main: {lost}"
    assert linear_history_problems(bare) == [], tag


def _trailers(bare: Path, span: str) -> list[dict[str, str]]:
    """Each commit of ``span`` with its Call-Id, Lands-Call-Id and Lane-Commit ("" when it has
    none), newest first."""
    keys = ("Call-Id", "Lands-Call-Id", "Lane-Commit")
    fields = "%x1f".join(f"%(trailers:key={key},valueonly,separator=%x2c)" for key in keys)
    out = git(bare, "log", f"--format=%H%x1f{fields}%x1e", span)
    commits = []
    for record in out.split("\x1e"):
        if record.strip():  # (not the fields: str.strip() takes \x1f for white space)
            commit, *values = record.strip("\n").split("\x1f")
            commits.append({"commit": commit, **dict(zip(keys, values, strict=True))})
    return commits


def queue_timeline(runs: list[QueueRun], start: float) -> str:
    """One line per queue process: when, how long, how it ended, what it said."""
    lines = ["  start   took  exit  queue     fault / said"]
    for run in runs:
        said = run.stderr.strip()[:120] or run.stdout.replace("\n", " ")[:120]
        lines.append(
            f"{run.started - start:7.1f} {run.ended - run.started:6.1f}  {run.code:>4}  "
            f"{run.command:<8}  {' '.join(filter(None, [run.fault, said]))}"
        )
    return "\n".join(lines)


def side_by_side(
    fleet: Fleet, commands: list[tuple[Path, tuple[str, ...]]]
) -> list[subprocess.CompletedProcess[str]]:
    """Each ``(clone, args)`` as one applyonce process, all at once; their results in order."""
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(lambda command: fleet.run(command[0], *command[1]), commands))
