"""The situations matrix: every Git state users really have (tests/situations/states.py) by the
commands that matter, each cell a real repository and real ``applyonce`` processes, each checking
the core promises (tests/situations/promises.py): the call lands exactly once (on the remote too),
no commit is lost, ``git fsck --strict`` is clean, the user's files, index, refs, pseudo-refs and
config change only where the call is meant to write — or the call is refused in one ``error:``
line with nothing written and nothing left that makes the next call fail.

Columns:

* ``apply``: a Codex patch that updates two files and adds one (in the ``*-loop`` states, that and
  two more calls at once while the git loop runs);
* ``dirty-commit``: ``apply --dirty commit`` over a real edit of the user's on a touched path;
* ``blocks``: the same change as SEARCH/REPLACE blocks (each touched file whole, as the branch
  has it, replaced; an added file from an empty SEARCH);
* ``revert``: the call, then ``applyonce revert CALL``;
* ``crash``: the call killed by SIGKILL right after its publish (``APPLYONCE_FAULT=after-publish``),
  then ``applyonce recover``, then the same call again, which must replay;
* ``audit``: the call, then ``applyonce audit``, which must find it clean;
* ``audit-again``: the call, ``applyonce audit``, a commit of the user's on the branch, then
  ``applyonce audit`` again, which must rely on the first one's checkpoint (checking only the new
  commit) and find it clean;
* ``lane``: the call on a lane (``apply --lane``, branch ``agent/NAME`` made from the state's
  branch), ``applyonce land`` of that lane onto the state's branch, then ``land`` again, which
  must find it there already;
* ``remote-apply``, ``remote-dirty-commit``, ``remote-crash``, ``remote-lane``: ``apply``,
  ``dirty-commit``, ``crash`` and ``lane`` with ``--remote origin`` (a bare repo reached by a
  ``file://`` URL), where the state is a clone.
* ``serve-apply``, ``serve-crash``: ``apply`` and ``crash`` with every ``apply`` handed to a
  running ``applyonce serve`` for the state's repository (``APPLYONCE_SERVE=require``: through it,
  or exit 3), its worker killed at the fault point.

A cell that fails on the current code carries ``xfail(strict=True)`` with its defects in one line
each (tests/situations/defects.py): it must fail with one of their signatures, and it turns into
a failure as soon as a fix makes it pass, and the mark goes then. ``python -m
tests.situations.report matrix.xml`` prints the matrix from a run's ``--junitxml``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run, run_cli, stored_text
from tests.e2e.serve.support import serving
from tests.situations.defects import DEFECTS, known, race
from tests.situations.promises import (
    Landing,
    Snapshot,
    assert_landed,
    assert_refused,
    blob,
    call_ids,
    tip,
    trailer_values,
)
from tests.situations.states import EXTRA_CALLS, STATES, Expect, Situation, git_loop

ENV = {
    "GIT_AUTHOR_NAME": "me",
    "GIT_AUTHOR_EMAIL": "me@example.com",
    "GIT_COMMITTER_NAME": "me",
    "GIT_COMMITTER_EMAIL": "me@example.com",
}

COLUMNS = (
    "apply",
    "dirty-commit",
    "blocks",
    "revert",
    "crash",
    "audit",
    "audit-again",
    "lane",
    "remote-apply",
    "remote-dirty-commit",
    "remote-crash",
    "remote-lane",
    "serve-apply",
    "serve-crash",
)
SERVE_ENV = {"APPLYONCE_SERVE": "require"}


class UnexpectedFailure(Exception):
    """A cell with known defects failed with words none of them has: a new defect."""


@dataclass
class Cell:
    """One situation and the real processes a column runs in it."""

    sit: Situation
    tmp: Path
    remote: bool = False
    serve: bool = False  # every apply through a running applyonce serve
    _patches: list[Path] = field(default_factory=list)

    @property
    def where(self) -> Path:
        """The repository whose branch is the commit point."""
        if self.remote:
            assert self.sit.origin is not None
            return self.sit.origin
        return self.sit.repo

    @property
    def expect(self) -> Expect:
        """What the situation allows of this cell's calls."""
        if self.remote and self.sit.remote_expect is not None:
            return self.sit.remote_expect
        return self.sit.expect

    def options(self) -> tuple[str, ...]:
        return ("--remote", "origin") if self.remote else ()

    def _patch_file(self, patch: str) -> Path:
        path = self.tmp / f"patch-{len(self._patches)}.txt"
        path.write_text(patch)
        self._patches.append(path)
        return path

    def apply_args(self, patch: str, *args: str) -> list[str]:
        return [
            "apply",
            str(self._patch_file(patch)),
            "--repo",
            str(self.sit.repo),
            *self.sit.args,
            *self.options(),
            *args,
        ]

    def apply(self, *args: str, patch: str | None = None, env: dict[str, str] | None = None) -> Run:
        argv = self.apply_args(patch or self.sit.patch, *args)
        if self.serve:
            env = {**SERVE_ENV, **(env or {})}
        return run_cli(*argv, env=env, cwd=self.sit.repo)

    def apply_at_once(self, patches: list[str]) -> list[Run]:
        """Several ``apply`` processes started together."""
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "applyonce", *self.apply_args(patch)],
                cwd=self.sit.repo,
                env={**os.environ, **(SERVE_ENV if self.serve else {})},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for patch in patches
        ]
        runs = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            runs.append(Run(proc.returncode, out.decode(), err.decode()))
        return runs

    def setup_apply(self) -> Run:
        """The call a column needs before its own command (revert, audit). Where the situation
        must take it (no refusal allowed, no remote), it runs in this process through the
        Python API — the ``apply`` column runs the same call as a real process — else, and
        whenever it does not commit, as a real process, whose answer the column judges."""
        sit = self.sit
        if not self.expect.refusable and not self.remote:
            from applyonce import Executor

            branch = sit.args[sit.args.index("--branch") + 1] if "--branch" in sit.args else None
            executor = Executor(sit.repo)
            try:
                receipt = executor.apply(sit.patch, branch=branch)
            finally:
                executor.close()
            if receipt.status == "committed":
                return Run(0, receipt.output, "")
        return self.apply()

    def command(self, *args: str, env: dict[str, str] | None = None) -> Run:
        """``applyonce ARGS --repo REPO`` (recover, revert, audit) with the cell's remote."""
        return run_cli(
            *args, "--repo", str(self.sit.repo), *self.options(), env=env, cwd=self.sit.repo
        )

    def loop(self) -> contextlib.AbstractContextManager[None]:
        return git_loop(self.sit, self.tmp / "stop-loop")

    def landing(
        self,
        base: str | None,
        blobs: dict[str, bytes | None],
        *,
        calls: int = 1,
        snapshots: int = 0,
        reverts: str | None = None,
    ) -> Landing:
        return Landing(self.where, self.sit.branch, base, blobs, calls, snapshots, reverts)

    def refused(self, before: Snapshot, run: Run, again: Callable[[], Run]) -> str:
        """A call that did not exit 0: a clean refusal the situation allows, or a failure."""
        expect = self.expect
        if run.returncode in expect.exits:
            assert_refused(self.sit, before, run, expect, again)
            return "refused"
        said = " / ".join(run.stderr.strip().splitlines())
        raise AssertionError(f"exit {run.returncode}: {said[:400]}")


def _ok(cell: Cell, run: Run) -> bool:
    return run.returncode == 0 and cell.expect.supported


def column_apply(cell: Cell) -> str:
    sit = cell.sit
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    calls = [(sit.patch, sit.blobs)]
    if sit.loop is not None and not cell.remote:
        calls += list(EXTRA_CALLS)
    with cell.loop():
        runs = cell.apply_at_once([p for p, _ in calls]) if len(calls) > 1 else [cell.apply()]
    for run in runs[1:]:
        assert run.returncode == 0, (
            f"a call sent at the same time: exit {run.returncode}: {run.stderr}"
        )
    if not _ok(cell, runs[0]):
        return cell.refused(before, runs[0], cell.apply)
    blobs = {path: content for _, b in calls for path, content in b.items()}
    assert_landed(sit, before, cell.landing(base, blobs, calls=len(calls)), remote=cell.remote)
    return "landed"


def column_dirty_commit(cell: Cell) -> str:
    sit = cell.sit
    assert sit.dirty is not None
    path, mine, after = sit.dirty
    ((sit.follower or sit.repo) / path).write_bytes(mine)
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    with cell.loop():
        run = cell.apply("--dirty", "commit")
    if not _ok(cell, run):
        return cell.refused(before, run, lambda: cell.apply("--dirty", "commit"))
    if sit.follower is None:  # the edit is not in a checkout of the branch: it stays the user's
        landing = cell.landing(base, sit.blobs)
    else:
        landing = cell.landing(base, {**sit.blobs, path: after}, snapshots=1)
    assert_landed(sit, before, landing, remote=cell.remote)
    return "landed"


def _as_blocks(cell: Cell, base: str | None) -> str | None:
    """The call's change as SEARCH/REPLACE blocks, or None where blocks cannot say it (a
    deletion)."""
    blocks = []
    for path, new in cell.sit.blobs.items():
        if new is None:
            return None
        old = blob(cell.where, base, path) or b""
        blocks.append(
            f"{path}\n<<<<<<< SEARCH\n{old.decode()}=======\n{new.decode()}>>>>>>> REPLACE\n"
        )
    return "".join(blocks)


def column_blocks(cell: Cell) -> str:
    sit = cell.sit
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    blocks = _as_blocks(cell, base)
    if blocks is None:
        pytest.skip("blocks cannot delete a file")
    with cell.loop():
        run = cell.apply("--format", "search-replace", patch=blocks)
    if not _ok(cell, run):
        return cell.refused(
            before, run, lambda: cell.apply("--format", "search-replace", patch=blocks)
        )
    assert_landed(sit, before, cell.landing(base, sit.blobs), remote=cell.remote)
    return "landed"


def column_revert(cell: Cell) -> str:
    sit = cell.sit
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    with cell.loop():
        run = cell.setup_apply()
        if _ok(cell, run):
            call = call_ids(cell.where, sit.branch)[0]
            middle = Snapshot.take(sit)
            undo = cell.command("revert", call)
    if not _ok(cell, run):
        return cell.refused(before, run, cell.apply)
    if undo.returncode != 0:
        return cell.refused(middle, undo, lambda: cell.command("revert", call))
    original = {path: blob(cell.where, base, path) for path in sit.blobs}
    assert_landed(sit, before, cell.landing(base, original, calls=2, reverts=call))
    return "landed"


def column_crash(cell: Cell) -> str:
    sit = cell.sit
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    with cell.loop():
        killed = cell.apply(env={"APPLYONCE_FAULT": "after-publish"})
        if killed.returncode == -9:
            recovered = cell.command("recover")
            again = cell.apply()
    if killed.returncode != -9:
        if killed.returncode == 0:
            raise AssertionError("the call ran to the end with after-publish armed: no publish?")
        return cell.refused(before, killed, cell.apply)
    said = (recovered.stdout + recovered.stderr).strip()
    # With --remote, a local branch holding commits the remote lacks does not follow it: recover
    # says so and that a checkout was not updated (exit 4); assert_landed checks it stayed.
    unfollowed = cell.remote and "has not followed" in said and "git pull" in said
    assert recovered.returncode == 0 or (recovered.returncode == 4 and unfollowed), (
        f"recover: exit {recovered.returncode}: {said[-300:]}"
    )
    assert again.returncode == 0, (
        f"the repeat: exit {again.returncode}: {again.stderr.strip()[-300:]}"
    )
    assert "replayed" in again.stderr, f"the repeat did not replay: {again.stderr.strip()}"
    assert stored_text(again.stdout).startswith("Success."), again.stdout
    assert_landed(sit, before, cell.landing(base, sit.blobs), remote=cell.remote)
    return "landed"


def column_audit(cell: Cell) -> str:
    sit = cell.sit
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    with cell.loop():
        run = cell.setup_apply()
        if _ok(cell, run):
            audit = cell.command("audit", *sit.audit_args())
    if not _ok(cell, run):
        return cell.refused(before, run, cell.apply)
    assert audit.returncode == 0 and "clean" in audit.stdout, (
        f"audit: exit {audit.returncode}: {(audit.stdout + audit.stderr).strip()[-300:]}"
    )
    assert_landed(sit, before, cell.landing(base, sit.blobs))
    return "landed"


def column_audit_again(cell: Cell) -> str:
    sit = cell.sit
    before = Snapshot.take(sit)
    with cell.loop():
        run = cell.setup_apply()
        if _ok(cell, run):
            first = cell.command("audit", *sit.audit_args())
            assert first.returncode == 0, (first.stdout + first.stderr).strip()[-300:]
            assert first.stdout.startswith("audited "), first.stdout
            where = sit.follower or sit.repo
            old = subprocess.run(
                ["git", "-C", str(sit.repo), "rev-parse", "--verify", "-q", sit.branch],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            # The user's own commit on the branch (no Call-Id), as plumbing: no work tree moves.
            made = subprocess.run(
                ["git", "-C", str(where), "commit-tree", f"{old}^{{tree}}", "-p", old],
                input="mine\n",
                capture_output=True,
                text=True,
                check=True,
                env={**ENV, "PATH": "/usr/bin:/bin"},
            ).stdout.strip()
            subprocess.run(
                ["git", "-C", str(sit.repo), "update-ref", sit.branch, made, old], check=True
            )
            again = cell.command("audit", *sit.audit_args())
    if not _ok(cell, run):
        return cell.refused(before, run, cell.apply)
    assert again.returncode == 0 and again.stdout.startswith("checked 0 new Call-Id commit(s)"), (
        f"audit again: exit {again.returncode}: {(again.stdout + again.stderr).strip()[-300:]}"
    )
    assert again.stdout.rstrip().endswith(": clean"), again.stdout
    return "landed"


LANE = "m"


def column_lane(cell: Cell) -> str:
    sit = cell.sit
    before, base = Snapshot.take(sit), tip(cell.where, sit.branch)
    onto = sit.branch.removeprefix("refs/heads/")
    with cell.loop():
        run = cell.apply("--lane", LANE)
        if _ok(cell, run):
            landed = cell.command("land", "--lane", LANE, "--onto", onto, "--json")
            again = cell.command("land", "--lane", LANE, "--onto", onto)
    if not _ok(cell, run):
        return cell.refused(before, run, lambda: cell.apply("--lane", LANE))
    if landed.returncode != 0:
        return _land_blocked(cell, before, base, landed, onto)
    said = (landed.stdout + landed.stderr).strip()[-400:]
    assert len(json.loads(landed.stdout)["landed"]) == 1, f"land: {said}"
    assert again.returncode == 0, f"land again: exit {again.returncode}: {again.stderr}"
    assert again.stdout.startswith(f"land: 0 landed on {onto}, 1 already there"), again.stdout
    lane_ids = call_ids(cell.where, f"refs/heads/agent/{LANE}")
    assert trailer_values(cell.where, sit.branch, "Lands-Call-Id") == lane_ids[:1], (
        "the lane call is not on the branch once"
    )
    assert_landed(sit, before, cell.landing(base, sit.blobs), remote=cell.remote, lane=LANE)
    return "landed"


def _land_blocked(cell: Cell, before: Snapshot, base: str | None, landed: Run, onto: str) -> str:
    """A land the situation refuses (the checkout's index is one libgit2 cannot read): the lane
    is reported blocked with the situation's words, the target and the user's files stay, and
    once the user did what the hint says, the land lands the call once."""
    sit = cell.sit
    said = (landed.stdout + landed.stderr).strip()[-400:]
    assert landed.returncode in cell.expect.exits, f"land: exit {landed.returncode}: {said}"
    report = json.loads(landed.stdout)
    assert report["landed"] == [] and len(report["blocked"]) == 1, f"land: {said}"
    message = report["blocked"][0]["message"]
    assert re.search(cell.expect.message, message, re.IGNORECASE), f"land: {message}"
    after = Snapshot.take(sit)
    assert tip(cell.where, sit.branch) == base, "the target moved"
    for path, was in before.checkouts.items():
        assert after.checkouts[path] == was, f"the checkout {path.name} changed"
    assert sit.cure, f"a land refused with no cure: {message}"
    for command in sit.cure:
        subprocess.run(["git", "-C", str(sit.repo), *command], check=True, capture_output=True)
    cured = cell.command("land", "--lane", LANE, "--onto", onto)
    assert cured.returncode == 0, f"land after the cure: {cured.stdout} {cured.stderr}"
    assert cured.stdout.startswith("landed: call "), cured.stdout
    lane_ids = call_ids(cell.where, f"refs/heads/agent/{LANE}")
    assert trailer_values(cell.where, sit.branch, "Lands-Call-Id") == lane_ids[:1]
    return "landed"


COMMANDS: dict[str, Callable[[Cell], str]] = {
    "apply": column_apply,
    "dirty-commit": column_dirty_commit,
    "blocks": column_blocks,
    "revert": column_revert,
    "crash": column_crash,
    "audit": column_audit,
    "audit-again": column_audit_again,
    "lane": column_lane,
    "remote-apply": column_apply,
    "remote-dirty-commit": column_dirty_commit,
    "remote-crash": column_crash,
    "remote-lane": column_lane,
    "serve-apply": column_apply,
    "serve-crash": column_crash,
}


def _cells() -> Iterator[Any]:  # pytest.param's ParameterSet
    for name, state in STATES.items():
        for column in COLUMNS:
            if column.startswith("remote-") and not state.remote:
                continue
            if column.endswith("dirty-commit") and not state.dirty:
                continue
            if state.short and column in (
                "blocks",
                "revert",
                "audit",
                "audit-again",
                "remote-crash",
                "serve-crash",
            ):
                continue
            cell_id = f"{name}-{column}"
            defects = known(cell_id)
            marks = (
                [
                    pytest.mark.xfail(
                        strict=True,
                        raises=AssertionError,
                        reason="; ".join(d.reason for d in defects),
                    )
                ]
                if defects
                else []
            )
            yield pytest.param(name, column, id=cell_id, marks=marks)


# .ci/run runs one cell in four, at least one a state, other ones each commit (tests/conftest.py).
@pytest.mark.sampled(every=6, by="state")
@pytest.mark.parametrize(("state", "column"), list(_cells()))
def test_cell(
    state: str, column: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    sit = STATES[state].build(tmp_path / "situation")
    cell = Cell(
        sit, tmp_path, remote=column.startswith("remote-"), serve=column.startswith("serve-")
    )
    try:
        with serving(sit.repo) if cell.serve else contextlib.nullcontext():
            outcome = COMMANDS[column](cell)
    except AssertionError as failure:
        defects = known(f"{state}-{column}")
        if defects and not any(re.search(d.signature, str(failure)) for d in defects):
            raise UnexpectedFailure(f"not a known defect of this cell: {failure}") from failure
        why = race(str(failure)) if sit.loop else None
        if why is not None:
            pytest.xfail(f"racy: {why}")
        raise
    record_property("outcome", outcome)


def test_every_known_defect_names_cells_that_exist() -> None:
    """A renamed or dropped cell must not leave a stale entry in tests/situations/defects.py."""
    ids = {p.id for p in _cells()}
    named = {cell for defect in DEFECTS for cell in defect.cells}
    assert named <= ids, sorted(named - ids)
