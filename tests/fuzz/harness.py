"""The fuzz harness: one patch through the real executor on a real repository, and the properties.

For every input:

* no internal error: the call returns a receipt or raises an :class:`ApplyOnceError` whose exit
  code is 1, 2, 4 or 5 — anything else is an internal error;
* no write on failure: after a refused call (an error) or a rejected one (a rejection receipt),
  every file under the case's root — the work tree, the index, ``HEAD``, the refs and their logs,
  the directory outside the repository that a symlink leads to — is byte-identical (the state
  directory and the object database may change: a rejection receipt is stored, and blobs written
  before a built-in check rejected the call are unreferenced);
* on success, exactly one new commit whose parent is the old tip, carrying the call's Call-Id, and
  no other ref moved; every ``fsck_every``-th commit, ``git fsck --strict`` passes.

After a commit the branch is reset to the base, so later cases start from the same files.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from applyonce import ApplyOnceError, CallOptions, Executor
from tests.fuzz.inputs import BASE, SYMLINKS, Case

ALLOWED_EXITS = frozenset({1, 2, 4, 5})
# Written by calls that fail, by design: receipts and the ledger; unreferenced objects.
_MAY_CHANGE = ("repo/.git/applyonce", "repo/.git/objects")
# What a commit may change inside .git besides the work tree: the index, the branch and its logs.
_COMMIT_WRITES = frozenset(
    {
        "repo/.git/index",
        "repo/.git/refs/heads/main",
        "repo/.git/logs/HEAD",
        "repo/.git/logs/refs/heads/main",
        "repo/.git/logs",
        "repo/.git/logs/refs",
        "repo/.git/logs/refs/heads",
    }
)


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def make_fuzz_repo(root: Path) -> Path:
    """``root/repo`` with the base files committed on ``main``, and ``root/outside``."""
    repo = root / "repo"
    (root / "outside").mkdir(parents=True, exist_ok=True)
    (root / "outside" / "keep.txt").write_bytes(b"outside the repository\n")
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "core.autocrlf", "false")
    # Its own identity: the repository may be made before a test's environment is.
    git(repo, "config", "user.name", "Fuzz")
    git(repo, "config", "user.email", "fuzz@example.invalid")
    for path, (data, mode) in BASE.items():
        full = repo / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)
        full.chmod(mode)
    for name, target in SYMLINKS.items():
        os.symlink(target, repo / name)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def files_under(root: Path, skip: tuple[str, ...] = _MAY_CHANGE) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``root`` (not following symlinks): its mode and its bytes (a symlink's
    target; nothing for a directory)."""
    out: dict[str, tuple[int, bytes]] = {}
    for top, dirs, names in os.walk(root):
        rel_top = os.path.relpath(top, root)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel_top, d)) not in skip]
        for name in dirs + names:
            full = os.path.join(top, name)
            rel = os.path.normpath(os.path.join(rel_top, name))
            st_ = os.lstat(full)
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = (st_.st_mode, os.readlink(full).encode())
            elif stat.S_ISREG(st_.st_mode):
                with open(full, "rb") as handle:
                    out[rel] = (st_.st_mode, handle.read())
            else:
                out[rel] = (st_.st_mode, b"")
    return out


def changed_paths(
    before: dict[str, tuple[int, bytes]], after: dict[str, tuple[int, bytes]]
) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


@dataclass
class Result:
    """One case's outcome (``committed``, ``rejected:KIND``, ``refused:KIND``, ``replayed``) and
    what went wrong with it, if anything."""

    outcome: str
    internal_error: str | None = None
    wrote_on_failure: list[str] = field(default_factory=list)
    bad_commit: str | None = None
    known: str | None = None  # a bad commit of a kind already reported (KNOWN_ISSUES)

    @property
    def ok(self) -> bool:
        return self.internal_error is None and not self.wrote_on_failure and not self.bad_commit


# Bugs this fuzzer found outside the code it may fix, reported with their reproducer: a result they
# explain is counted apart, so the bounded run stays green until they are fixed, and the benchmark
# shows how often they occur. test_fuzz_patches.py pins each one with a strict xfail.
# None is open now ("dir-file", a patch adding both P and P/Q, was fixed in core/plan.py).
KNOWN_ISSUES: dict[str, str] = {}


class Harness:
    """A fuzz repository in ``root``, its executor, and the tallies of the cases run on it."""

    def __init__(self, root: Path, *, fsck_every: int = 0, options: CallOptions | None = None):
        self.root = root
        self.repo = make_fuzz_repo(root)
        self.base = git(self.repo, "rev-parse", "HEAD").strip()
        self.executor = Executor(self.repo)
        self.git = pygit2.Repository(str(self.repo))
        self.fsck_every = fsck_every
        self.options = options or CallOptions()
        self.outcomes: Counter[str] = Counter()
        self.known: Counter[str] = Counter()
        self.failures: list[tuple[Case, Result]] = []
        self.commits = 0
        self.fscks = 0

    def close(self) -> None:
        self.executor.close()

    def run(self, case: Case) -> Result:
        """Apply ``case`` through :meth:`Executor.call` and check the properties."""
        before = files_under(self.root)
        tip = self._tip()
        try:
            options = CallOptions(
                **{**vars(self.options), "format": case.format, **dict(case.options)}
            )
            outcome = self.executor.call(case.text, options)
        except ApplyOnceError as exc:
            result = Result(f"refused:{exc.kind}")
            if exc.exit_code not in ALLOWED_EXITS:
                result.internal_error = f"exit code {exc.exit_code} for {exc.kind}: {exc}"
        except Exception as exc:
            result = Result("internal", internal_error=f"{type(exc).__name__}: {exc}")
        else:
            receipt = outcome.receipt
            if outcome.replayed:
                result = Result("replayed")
            elif receipt.status == "committed":
                result = Result("committed")
            else:
                kind = (receipt.error or {}).get("kind", "?")
                result = Result(f"rejected:{kind}")
            if receipt.status == "committed" and not outcome.replayed:
                result.bad_commit = self._check_commit(tip, receipt.commit, receipt.call_id, before)
                self._reset()
                self._tally(case, result)
                return result
        result.wrote_on_failure = changed_paths(before, files_under(self.root))
        if self._tip() != tip:
            result.wrote_on_failure.append("refs/heads/main moved")
        self._tally(case, result)
        return result

    def _tally(self, case: Case, result: Result) -> None:
        self.outcomes[result.outcome] += 1
        if result.known:
            self.known[result.known] += 1
        if not result.ok:
            self.failures.append((case, result))

    def _tip(self) -> str:
        return str(self.git.references["refs/heads/main"].target)

    def _check_commit(
        self, tip: str, commit_id: str | None, call_id: str, before: dict[str, tuple[int, bytes]]
    ) -> str | None:
        new_tip = self._tip()
        if commit_id is None or new_tip != commit_id:
            return f"the receipt names {commit_id}, the branch is at {new_tip}"
        commit = self.git[commit_id]
        assert isinstance(commit, pygit2.Commit)
        if [str(p) for p in commit.parent_ids] != [tip]:
            return f"commit {commit_id} has parents {commit.parent_ids}, not [{tip}]"
        if f"Call-Id: {call_id}" not in commit.message:
            return f"commit {commit_id} does not carry Call-Id {call_id}"
        try:  # the receipt's files are the commit's (verify_against_git)
            self.executor.show(call_id)
        except ApplyOnceError as exc:
            return f"the receipt of commit {commit_id} does not verify: {exc.one_line()}"
        # Nothing outside the repository changed, and no ref but the branch (and its log) moved.
        after = files_under(self.root)
        outside = [
            k
            for k in changed_paths(before, after)
            if not (k.startswith("repo/") and not k.startswith("repo/.git/"))
            and k not in _COMMIT_WRITES
        ]
        if outside:
            return f"a commit also wrote {outside}"
        self.commits += 1
        if self.fsck_every and self.commits % self.fsck_every == 1:
            self.fscks += 1
            fsck = subprocess.run(
                ["git", "-C", str(self.repo), "fsck", "--strict", "--no-dangling", "--no-progress"],
                capture_output=True,
                text=True,
                check=False,
            )
            if fsck.returncode != 0:
                return f"git fsck --strict: {fsck.stdout.strip()} {fsck.stderr.strip()}"
        return None

    def _reset(self) -> None:
        git(self.repo, "reset", "-q", "--hard", self.base)
        git(self.repo, "clean", "-q", "-fdx", "-e", ".git")

    def report(self, *, show: int = 3) -> str:
        """The failures, each with the input that reproduces it."""
        lines = []
        for case, result in self.failures[:show]:
            lines.append(
                f"{result.outcome}: internal={result.internal_error!r} "
                f"wrote={result.wrote_on_failure!r} commit={result.bad_commit!r}\n"
                f"  reproduce: Case(format={case.format!r}, data={case.data!r})"
            )
        return "\n".join(lines)


def apply_cli(
    harness: Harness, data: bytes, *args: str | bytes, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """``applyonce apply - ARGS`` in its own process on the harness's repository, ``data`` on its
    standard input (arguments as bytes, as a shell passes them)."""
    return subprocess.run(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(harness.repo), *args],
        input=data,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def run_cli_case(harness: Harness, case: Case, timeout: float = 60) -> Result:
    """``applyonce apply - --format F`` in its own process on the harness's repository: exit code
    1, 2, 4 or 5 and no traceback on failure, and nothing written; one commit on exit 0."""
    before = files_under(harness.root)
    tip = harness._tip()
    proc = apply_cli(harness, case.data, "--json", *case.argv(), timeout=timeout)
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode == 0:
        result = Result("committed")
        receipt = json.loads(proc.stdout)
        result.bad_commit = harness._check_commit(
            tip, receipt["commit"], receipt["call_id"], before
        )
        harness._reset()
        harness._tally(case, result)
        return result
    result = Result(f"exit:{proc.returncode}")
    if proc.returncode not in ALLOWED_EXITS or "Traceback" in stderr or "internal error" in stderr:
        result.internal_error = f"exit {proc.returncode}: {stderr[-500:]}"
    result.wrote_on_failure = changed_paths(before, files_under(harness.root))
    if harness._tip() != tip:
        result.wrote_on_failure.append("refs/heads/main moved")
    harness._tally(case, result)
    return result
