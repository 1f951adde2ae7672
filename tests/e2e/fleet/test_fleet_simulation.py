"""The fleet simulation (issue 14): three clients race on one server branch through one
PostgreSQL ledger, with real SIGKILLs at random fault points and a database restart in the middle
(over smart HTTP, issue 28: a web server restart too, and the server's guard installed);
then a recovery from a clone that did not crash, and every call repeated once. Every call lands
exactly once, the history stays linear, the ledger agrees, the audit is clean.

The randomness is seeded; ``APPLYONCE_FLEET_SEED=N`` repeats a run (the seed is printed, and in
every failure message)."""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from applyonce.faults import POINTS
from tests.e2e.fleet.fleet import (
    Call,
    Fleet,
    Job,
    assert_jobs_ended_as_designed,
    call_ids_on,
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
# Per client; with the shared calls' sends, over 50 calls per client. APPLYONCE_FLEET_DISTINCT=N
# makes a smaller run, to debug one seed faster. .ci/run (APPLYONCE_TEST_SAMPLE set) runs the
# fleet at CI_DISTINCT, every kill point still armed; the README's command and
# benchmarks/sampled_whole.py run it at the full size.
DEFAULT_DISTINCT = 42
CI_DISTINCT = 16
DISTINCT = int(
    os.environ.get(
        "APPLYONCE_FLEET_DISTINCT",
        CI_DISTINCT if os.environ.get("APPLYONCE_TEST_SAMPLE") else DEFAULT_DISTINCT,
    )
)
# The run over smart HTTP (the server's guard installed, the web server restarted with the
# database) is smaller still in .ci/run: the run over git daemon covers the size.
HTTP_CI_DISTINCT = 6
SHARED = 12  # calls sent by two or three clients at once
FAULT_RATE = 0.2
PARALLEL = 4  # processes at a time, all clients together (besides the 3 batches)
# Every point a call with a remote can reach (after-snapshot needs --dirty commit, and
# after-reject-receipt-tmp a rejection: none happen here).
KILL_POINTS = [p for p in POINTS if p not in ("after-snapshot", "after-reject-receipt-tmp")]
# The remote's commit point: the objects pushed but the branch not moved, and the branch moved.
MUST_KILL = ("after-push-objects", "after-publish")
TERMINAL = ("committed", "rejected")


def arm_faults(rng: random.Random, jobs: list[Job]) -> None:
    """A fault point on about FAULT_RATE of the processes, every point in turn (so each is
    armed about as often as the next); the points of the remote's commit point also on three
    calls that only one client sends, which always reach them."""
    armed = rng.sample(jobs, round(len(jobs) * FAULT_RATE))
    points = KILL_POINTS * (len(armed) // len(KILL_POINTS) + 1)
    rng.shuffle(points)
    for job, point in zip(armed, points, strict=False):
        job.fault = point
    alone = [job for job in jobs if len(job.call.senders) == 1 and job.fault is None]
    for job, point in zip(rng.sample(alone, 6), MUST_KILL * 3, strict=True):
        job.fault = point


@pytest.mark.slow
@pytest.mark.scaled
def test_fleet_lands_every_call_exactly_once(fleet_servers: FleetServers, tmp_path: Path) -> None:
    seed = fleet_seed()
    tag = f"[APPLYONCE_FLEET_SEED={seed}]"
    print(f"fleet seed: {seed}")
    rng = random.Random(seed)
    servers = fleet_servers
    distinct = DISTINCT
    if (
        servers.server_hook
        and "APPLYONCE_FLEET_DISTINCT" not in os.environ
        and DISTINCT == CI_DISTINCT
    ):
        distinct = HTTP_CI_DISTINCT
    plan = plan_calls(rng, CLIENTS, distinct, SHARED)
    bare, clones, observer = servers.server_with_clones(tmp_path, plan.base_files, CLIENTS)
    fleet = Fleet(clones, servers.database(), tmp_path / "run")
    expected = servers.call_ids(tmp_path / "ident", bare, plan.calls)
    by_id = {expected[c.key]: c for c in plan.calls}

    # ---- phase 1: every client sends its calls, the racing ones together; kills; a restart
    groups = [[Job(call, client) for client in call.senders] for call in plan.calls]
    rng.shuffle(groups)
    jobs = [job for group in groups for job in group]
    arm_faults(rng, jobs)
    per_client = Counter(job.client for job in jobs)
    if distinct == DEFAULT_DISTINCT:  # the sizes
        assert min(per_client.values()) >= 50 and len(jobs) >= 150, per_client
    outage: list[float] = []
    web_restarts: list[float] = []
    failures: list[BaseException] = []
    # A call only one client sends, with no fault armed, goes through that client's one
    # long-lived process (the Python API), side by side with the processes of the racing and the
    # killed calls: the same races on the one branch and the same restart, without a process
    # start-up per call (which made this test the suite's heaviest by far).
    batched = [job for job in jobs if job.fault is None and len(job.call.senders) == 1]
    in_batch = {id(job) for job in batched}
    groups = [kept for group in groups if (kept := [j for j in group if id(j) not in in_batch])]
    by_client = {c: [job.call for job in batched if job.client == c] for c in range(CLIENTS)}
    api_results: dict[str, dict[str, object]] = {}

    def run_batches() -> None:
        try:
            fleet.work.mkdir(parents=True, exist_ok=True)
            api_results.update(send_through_api(fleet, by_client))
        except BaseException as exc:  # reported by the test's thread below
            failures.append(exc)

    def cut_off_calls() -> list[Job]:
        return [job for job in jobs if job.code is not None and "ledger database" in job.stderr]

    def restart_database() -> None:
        # Down until a call has been cut off from its ledger (the processes starting meanwhile
        # find no server), 3 s at most (the batches' calls, seen only at the end, fail at once
        # while it is down), then up again.
        outage.append(time.monotonic())
        try:
            servers.crash_database()
            if servers.restart_web_server():
                web_restarts.append(time.monotonic())
            while not cut_off_calls() and time.monotonic() < outage[0] + 3:
                time.sleep(0.1)
            servers.start_database()
        except BaseException as exc:  # reported by the test's thread below
            failures.append(exc)
        outage.append(time.monotonic())

    restarter = threading.Thread(target=restart_database)
    restart_at = len(groups) * 2 // 5

    def before_group(index: int) -> None:
        if index == restart_at:
            restarter.start()

    started = time.monotonic()
    batches = threading.Thread(target=run_batches)
    batches.start()
    run_jobs(fleet, groups, limit=PARALLEL, before_group=before_group)
    restarter.join(timeout=60)
    batches.join(timeout=600)
    phase1 = time.monotonic() - started
    assert not failures, f"{tag} {failures}"
    for job in batched:
        row = api_results[job.call.key]
        job.started, job.ended = started, started + float(str(row["seconds"]))
        if "status" in row:
            job.code = 0 if row["status"] == "committed" else 1
            job.stdout = orjson.dumps({"call_id": row["call_id"], "status": row["status"]}).decode()
        else:
            job.code, job.stderr = int(str(row["exit"])), str(row["stderr"])
    assert not failures and len(outage) == 2, f"{tag} the database did not restart: {failures}"
    # Shown with a failure (pytest prints a failed test's output): what ran when, and how.
    print(f"outage from {outage[0] - started:.1f} s to {outage[1] - started:.1f} s")
    if web_restarts:
        print(f"web server restarted at {web_restarts[0] - started:.1f} s")
    print(timeline(jobs, started))

    # Whatever happened, no call has landed twice, nothing but the calls landed, and the
    # branch is one line.
    assert_exactly_once(bare, expected, by_id, tag, all_landed=False)
    assert_jobs_ended_as_designed(jobs, expected, tag)
    killed = [job for job in jobs if job.code == -9]
    assert len(killed) >= len(jobs) // 10, f"{tag} only {len(killed)} kills"
    for point in MUST_KILL:
        assert any(job.fault == point for job in killed), f"{tag} no kill at {point}"
    # The restart cut some calls off their ledger (a lost connection, or none to be had): each
    # ended with its one line, and is settled below like a crash.
    cut_off = cut_off_calls()
    assert cut_off, f"{tag} the database restart hit no call"

    # ---- the ledger before recovery: the crashed calls are the ones not yet terminal
    before = _states(fleet, observer, tag)
    pending = {call_id for call_id, state in before.items() if state not in TERMINAL}
    assert pending, f"{tag} no call was left unsettled: the kills tested nothing"
    failed_keys = {job.call.key for job in jobs if job.code != 0}
    assert {by_id[c].key for c in pending} <= failed_keys, tag
    # Recover from the client that crashed least of the pending calls' senders: most of the
    # calls it settles were sent, and crashed, elsewhere.
    crashed_here = Counter(
        job.client for job in jobs if job.code != 0 and expected[job.call.key] in pending
    )
    recoverer = min(range(CLIENTS), key=lambda c: crashed_here[c])
    recovered = fleet.run(clones[recoverer], "recover", "--json")
    assert recovered.returncode == 0, f"{tag} {recovered.stdout} {recovered.stderr}"
    assert "Traceback" not in recovered.stderr
    report = orjson.loads(recovered.stdout)
    outcomes = {o["call_id"]: o for o in report["outcomes"]}
    assert pending <= set(outcomes), f"{tag} not settled: {sorted(pending - set(outcomes))}"
    elsewhere = {
        c for c in pending
        if not any(j.client == recoverer and expected[j.call.key] == c for j in jobs)
    }  # fmt: skip
    assert elsewhere, f"{tag} every pending call was also sent by the recovering clone"
    for call_id in pending:
        assert outcomes[call_id]["now"] in TERMINAL, f"{tag} {outcomes[call_id]}"
    reconciled = {c for c in pending if outcomes[c]["now"] == "committed"}
    # What recovery said agrees with the server: a call it found committed is there once, one
    # it rejected (nothing took effect) is not there at all.
    on_server = Counter(call_ids_on(bare))
    for call_id in pending:
        assert on_server[call_id] == (call_id in reconciled), f"{tag} {outcomes[call_id]}"

    # The crashed clones' own debris (a dead process's journaled index.lock, temp files) is
    # theirs to clear: their recover finds no call left to settle, only that.
    for client in range(CLIENTS):
        if client != recoverer:
            local = fleet.run(clones[client], "recover", "--json")
            assert local.returncode == 0, f"{tag} {local.stdout} {local.stderr}"
            assert orjson.loads(local.stdout)["outcomes"] == [], f"{tag} {local.stdout}"

    # ---- every call once more, each from a random client (through the Python API: one
    # process per client sends them all, so the repeats cost no process start-ups)
    assignments: dict[int, list[Call]] = {client: [] for client in range(CLIENTS)}
    for call in plan.calls:
        assignments[rng.randrange(CLIENTS)].append(call)
    started = time.monotonic()
    repeated = send_through_api(fleet, assignments)
    repeats = time.monotonic() - started
    sender = {call.key: client for client, calls in assignments.items() for call in calls}
    slowest = sorted(repeated.values(), key=lambda r: -float(str(r["seconds"])))[:5]
    print("slowest repeats:", [(r["key"], sender[str(r["key"])], r["seconds"]) for r in slowest])

    # ---- the server's branch: each call exactly once, nothing else, one straight line
    assert_exactly_once(bare, expected, by_id, tag, all_landed=True)
    assert git(bare, "fsck", "--strict", "--no-dangling") == ""
    # Each repeat returned the call's one commit.
    for call in plan.calls:
        result = repeated[call.key]
        assert result.get("status") == "committed", f"{tag} {call.key}: {result}"
        assert result["call_id"] == expected[call.key], f"{tag} {call.key}: {result}"
        if result["call_id"] in reconciled:
            # Settled by the other clone's recovery from the trailer, not applied again.
            assert result["reconciled"] is True, f"{tag} {call.key}: {result}"

    # ---- the ledger, from a clone that made none of the calls: every call committed
    after = _states(fleet, observer, tag)
    assert after == dict.fromkeys(expected.values(), "committed"), tag
    audit = fleet.run(observer, "audit")
    assert audit.returncode == 0 and audit.stderr == "", f"{tag} {audit.stdout} {audit.stderr}"
    assert audit.stdout.endswith(
        f"audited {len(expected)} Call-Id commit(s) on refs/heads/main and "
        f"{len(expected)} receipt(s): clean\n"
    ), f"{tag} {audit.stdout}"
    exits = dict(sorted(Counter(job.code for job in jobs).items()))
    print(
        f"fleet: {len(jobs)} processes (exits {exits}), {len(killed)} killed, {len(cut_off)} "
        f"cut off by the restart, {len(pending)} settled by client {recoverer}'s recovery "
        f"({len(elsewhere)} sent only by others, {len(reconciled)} found committed); "
        f"phase 1 {phase1:.1f} s, repeats {repeats:.1f} s"
    )


def assert_exactly_once(
    bare: Path, expected: dict[str, str], by_id: dict[str, Call], tag: str, *, all_landed: bool
) -> None:
    """No Call-Id twice on the server's branch, none that is not one of the calls, every call
    there (``all_landed``), and a history of single-parent commits in one line."""
    landed = Counter(call_ids_on(bare))
    twice = {by_id[c].key if c in by_id else c: n for c, n in landed.items() if n > 1}
    assert not twice, f"{tag} duplicated (call: commits): {twice}"
    foreign = set(landed) - set(by_id)
    assert not foreign, f"{tag} Call-Ids of no call: {sorted(foreign)}"
    if all_landed:
        lost = sorted(key for key, call_id in expected.items() if call_id not in landed)
        assert not lost, f"{tag} lost: {lost}"
    assert linear_history_problems(bare) == [], tag


def _states(fleet: Fleet, clone: Path, tag: str) -> dict[str, str]:
    """Each call's state, as ``applyonce log --json`` on ``clone`` lists it."""
    result = fleet.run(clone, "log", "--json")
    assert result.returncode == 0 and "Traceback" not in result.stderr, f"{tag} {result.stderr}"
    rows = orjson.loads(result.stdout)
    assert isinstance(rows, list)
    return {str(row["call_id"]): str(row["state"]) for row in rows}
