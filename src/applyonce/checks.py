"""Checks on a staged tree, before it may be published.

Built-in checks read the changed files from memory: Python, JSON and TOML files must still parse
(a file that did not parse before the patch is not held against it), and the patch must not add
merge-conflict markers. Each can be skipped by name (``--skip-check syntax|markers``); a skipped
check is still listed in the receipt, marked as skipped. ``--check CMD`` runs a shell command in a
scratch checkout of the staged tree, with a timeout and ``APPLYONCE_CHANGED_FILES``
(newline-separated paths) in its environment.

The scratch checkout is a private repository under the state directory that borrows the main
repository's objects (``objects/info/alternates``). Its HEAD is the last tree it held, so libgit2
checks out only what changed: after the first call, the cost follows the patch, not the repo.
Each concurrent caller takes its own slot, guarded by ``flock``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import time
import tomllib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
import pygit2

from applyonce.errors import ApplyOnceError, UsageError
from applyonce.plan import TreePlan
from applyonce.receipts import CheckRecord

OUTPUT_TAIL = 4000
SCRATCH_SLOTS = 16
# The names ``--skip-check`` takes, and the receipt names of the checks they skip.
BUILTIN_CHECKS: dict[str, str] = {
    "syntax": "builtin:syntax",
    "markers": "builtin:conflict-markers",
}
SKIPPED = "skipped (--skip-check {name})"


class CheckFailedError(ApplyOnceError):
    kind = "check-failed"
    default_hint = "fix the patch so the check passes, and send it as a new attempt"


MAX_SYNTAX_CHECK_BYTES = 8 * 1024 * 1024


def _syntax_error(path: str, data: bytes) -> str | None:
    if len(data) > MAX_SYNTAX_CHECK_BYTES:
        return None  # too large to parse safely in-process; --check commands still see it
    try:
        if path.endswith(".py"):
            compile(data, path, "exec", dont_inherit=True)
        elif path.endswith(".json"):
            orjson.loads(data)
        elif path.endswith(".toml"):
            tomllib.loads(data.decode("utf-8"))
    except SyntaxError as exc:
        return f"{path}:{exc.lineno}: {exc.msg}"
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError) as exc:
        return f"{path}: {str(exc).splitlines()[0]}"
    except (RecursionError, MemoryError):
        return f"{path}: nested too deeply to parse"
    return None


def failure_hint(check_name: str) -> str | None:
    """The hint of a failed built-in check: how to skip it (None: not a built-in check)."""
    for name, record_name in BUILTIN_CHECKS.items():
        if record_name == check_name:
            return (
                f"{CheckFailedError.default_hint}; if the project's files are meant to fail it "
                f"(Python 2 code, say), send the new attempt with --skip-check {name}"
            )
    return None


def check_skip_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate ``--skip-check`` names; returns them sorted, without repeats.

    Raises:
        UsageError: a name that is not a built-in check.
    """
    for name in names:
        if name not in BUILTIN_CHECKS:
            raise UsageError(
                f"unknown --skip-check {name!r}",
                hint=f"the built-in checks are {' and '.join(BUILTIN_CHECKS)}",
            )
    return tuple(sorted(set(names)))


def marker_lines(data: bytes) -> Counter[bytes]:
    """The merge-conflict marker lines ``data`` holds, each with how often.

    A ``<<<<<<<`` or ``>>>>>>>`` line (alone or followed by a space) always counts. A ``=======``
    line counts only inside a ``<<<<<<< … >>>>>>>`` block: on its own it is a reStructuredText
    or Markdown heading underline.
    """
    found: Counter[bytes] = Counter()
    if b"<<<<<<<" not in data and b">>>>>>>" not in data:
        return found
    separators: int | None = None  # inside a block: the ``=======`` lines seen so far
    for line in data.splitlines():
        if line.startswith((b"<<<<<<<", b">>>>>>>")) and line[7:8] in (b"", b" "):
            found[line] += 1
            if line[0] == ord("<"):
                separators = 0
            else:
                found[b"======="] += separators or 0
                separators = None
        elif line == b"=======" and separators is not None:
            separators += 1
    return found


def conflict_markers(data: bytes) -> int:
    """How many merge-conflict marker lines ``data`` holds (:func:`marker_lines`)."""
    return sum(marker_lines(data).values())


def builtin_checks(
    plan: TreePlan, old_content: dict[str, bytes | None], *, skip: Sequence[str] = ()
) -> list[CheckRecord]:
    """Syntax of changed ``.py``/``.json``/``.toml`` files and no new conflict markers.

    Args:
        plan: the staged changes.
        old_content: each changed path's bytes before the patch (None: it did not exist).
        skip: names of :data:`BUILTIN_CHECKS` not to run; each is recorded as skipped
            (exit code 0: it rejected nothing).
    """
    started = time.monotonic()
    syntax: list[str] = []
    markers: list[str] = []
    for change in plan.changes:
        if change.content is None:
            continue
        # Syntax: judged against what was at this path before (a move onto a file included).
        before = old_content.get(change.path)
        problem = None if "syntax" in skip else _syntax_error(change.path, change.content)
        if problem and (before is None or _syntax_error(change.path, before) is None):
            syntax.append(problem)
        # Markers: judged against the content the change started from (a move's source).
        source = old_content.get(change.from_path or change.path)
        # A marker line the file did not hold before is added, even where the patch removes
        # another (resolving one conflict block while adding a new one is still adding one).
        if "markers" not in skip and marker_lines(change.content) - marker_lines(source or b""):
            markers.append(f"{change.path}: adds merge-conflict markers")
    elapsed = int((time.monotonic() - started) * 1000)
    found = {"syntax": syntax, "markers": markers}
    return [
        CheckRecord(
            name=record_name,
            exit_code=1 if found[name] else 0,
            duration_ms=elapsed if name == "syntax" and name not in skip else 0,
            output_tail=(
                SKIPPED.format(name=name) if name in skip else "\n".join(found[name])[-OUTPUT_TAIL:]
            ),
        )
        for name, record_name in BUILTIN_CHECKS.items()
    ]


@dataclass
class Scratch:
    """A slot of the scratch checkout pool."""

    repo: pygit2.Repository
    root: Path

    def checkout(self, tree_id: str) -> None:
        tree = self.repo[tree_id]
        assert isinstance(tree, pygit2.Tree)
        # FORCE: tracked files a previous check changed are reset; REMOVE_UNTRACKED: files a
        # previous check created are removed (ignored ones, like caches, are kept).
        strategy = (
            pygit2.enums.CheckoutStrategy.FORCE | pygit2.enums.CheckoutStrategy.REMOVE_UNTRACKED
        )
        self.repo.checkout_tree(tree, strategy=strategy)  # type: ignore[no-untyped-call]
        sig = pygit2.Signature("applyonce", "applyonce@localhost", 0, 0)
        commit = self.repo.create_commit(None, sig, sig, "scratch", tree.id, [])
        self.repo.set_head(commit)


@contextlib.contextmanager
def scratch_checkout(state_dir: Path, objects_dir: Path) -> Iterator[Scratch]:
    """Take a free scratch slot (creating it on first use) and hold it for the block."""
    base = state_dir / "scratch"
    base.mkdir(parents=True, exist_ok=True)
    for slot in range(SCRATCH_SLOTS):
        lock = os.open(base / f"{slot}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            continue
        try:
            root = base / str(slot)
            gitdir = root / ".git"
            if not (gitdir / "HEAD").exists():
                repo = pygit2.init_repository(str(root))
            else:
                repo = pygit2.Repository(str(root))
            alternates = gitdir / "objects" / "info" / "alternates"
            if not alternates.exists() or alternates.read_text().strip() != str(objects_dir):
                alternates.parent.mkdir(parents=True, exist_ok=True)
                alternates.write_text(f"{objects_dir}\n")
                repo = pygit2.Repository(str(root))
            yield Scratch(repo, root)
            return
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)
    raise CheckFailedError(
        f"all {SCRATCH_SLOTS} scratch checkouts are busy", retryable=True, hint="retry shortly"
    )


def run_command(command: str, *, cwd: Path, changed: Sequence[str], timeout: float) -> CheckRecord:
    """Run one ``--check`` command; its whole process group is killed on timeout."""
    env = {**os.environ, "APPLYONCE_CHANGED_FILES": "\n".join(changed)}
    env.pop("APPLYONCE_FAULT", None)
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        shell=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        out += f"\n[applyonce: killed after {timeout:g}s]".encode()
        code = None
    except BaseException:
        # Interrupted (Ctrl-C): the check must not outlive us in a slot we are about to release.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    elapsed = int((time.monotonic() - started) * 1000)
    tail = out.decode("utf-8", "replace")[-OUTPUT_TAIL:]
    return CheckRecord(name=command, exit_code=code, duration_ms=elapsed, output_tail=tail)
