"""Checking a staged tree before it may be published: the built-in checks, then the ``--check``
commands in a scratch checkout of the tree.

Each ``--check`` runs a shell command with a timeout and ``APPLYONCE_CHANGED_FILES``
(newline-separated paths) in its environment; its whole process group is killed on timeout or
interruption. Scratch checkouts are a pool of slots under ``<state>/scratch``; each concurrent
caller takes a free one, guarded by its lock file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from applyonce.core.checks import OUTPUT_TAIL, CheckFailedError, builtin_checks, failure_hint
from applyonce.core.plan import TreePlan
from applyonce.core.receipt import CheckRecord
from applyonce.flow.context import Context, scratch_dir
from applyonce.flow.options import CallOptions
from applyonce.git.scratch import ScratchRepo
from applyonce.git.store import GitTree
from applyonce.state.files import ensure_dir
from applyonce.state.locks import try_file_lock

SCRATCH_SLOTS = 16
# How long the output of a killed check is still read: a process it detached from its group
# (setsid, a daemon) survives the kill and may hold the output pipe open for ever.
DRAIN_S = 2.0
# How often a running check's progress callback is told its elapsed time.
TICK_S = 1.0


def run_checks(
    ctx: Context, tree_plan: TreePlan, base_tree: GitTree, tree_id: str, options: CallOptions
) -> list[CheckRecord]:
    """Every check of the call on the staged tree ``tree_id``; the records of those that ran.

    Raises:
        CheckFailedError: a check failed (its ``checks`` attribute holds the records so far).
    """
    old: dict[str, bytes | None] = {}
    for change in tree_plan.changes:
        for path in filter(None, (change.path, change.from_path)):
            old[path] = base_tree.read(path)[0] if base_tree.kind(path) == "file" else None
    records = builtin_checks(tree_plan, old, skip=options.skip_checks or ())
    if options.checks and not any(r.exit_code for r in records):
        changed = [c.path for c in tree_plan.changes]
        ctx.store.flush_objects()  # the scratch checkout reads the staged tree from the disk
        with scratch_checkout(ctx) as scratch:
            scratch.checkout(tree_id)
            for command in options.checks or ():
                with _ticking(command, options.check_progress):
                    record = run_command(
                        command, cwd=scratch.root, changed=changed, timeout=options.check_timeout
                    )
                records.append(record)
                if record.exit_code != 0:
                    break
    failed = [r for r in records if r.exit_code != 0]
    if failed:
        first = failed[0]
        detail = first.output_tail.strip().splitlines()[-1:] or [""]
        why = "timed out" if first.exit_code is None else f"exit {first.exit_code}"
        error = CheckFailedError(
            f"check {first.name!r} failed ({why}): {detail[0][:160]}",
            hint=failure_hint(first.name),
            check=first.name,
        )
        error.checks = records
        raise error
    return records


@contextlib.contextmanager
def _ticking(command: str, progress: Callable[[str, float], None] | None) -> Iterator[None]:
    """Tell ``progress`` every second, from a thread, how long ``command`` has been running."""
    if progress is None:
        yield
        return
    started = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            progress(command, time.monotonic() - started)

    ticker = threading.Thread(target=tick, name="applyonce-check-ticker", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


@contextlib.contextmanager
def scratch_checkout(ctx: Context) -> Iterator[ScratchRepo]:
    """Take a free scratch slot (creating it on first use) and hold it for the block."""
    base = scratch_dir(ctx)
    ensure_dir(base)
    for slot in range(SCRATCH_SLOTS):
        with try_file_lock(base / f"{slot}.lock") as taken:
            if not taken:
                continue
            yield ScratchRepo(
                base / str(slot), ctx.store.objects_dir, prepare=ctx.store.fetch_missing_blobs
            )
            return
    raise CheckFailedError(
        f"all {SCRATCH_SLOTS} scratch checkouts are busy", retryable=True, hint="retry shortly"
    )


def run_command(
    command: str,
    *,
    cwd: Path,
    changed: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
) -> CheckRecord:
    """Run one ``--check`` command (or a hook: its ``env`` and record ``name``); its whole
    process group is killed on timeout."""
    full = {**(os.environ if env is None else env), "APPLYONCE_CHANGED_FILES": "\n".join(changed)}
    full.pop("APPLYONCE_FAULT", None)
    started = time.monotonic()
    with _signals_held() as held:
        proc = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        for signum in held:  # a Ctrl-C while the check started: handled here, where it kills it
            signal.raise_signal(signum)
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out = _drain(proc) + f"\n[applyonce: killed after {timeout:g}s]".encode()
        code = None
    except BaseException:
        # Interrupted (Ctrl-C): the check must not outlive us in a slot we are about to release.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    elapsed = int((time.monotonic() - started) * 1000)
    tail = out.decode("utf-8", "replace")[-OUTPUT_TAIL:]
    return CheckRecord(name=name or command, exit_code=code, duration_ms=elapsed, output_tail=tail)


@contextlib.contextmanager
def _signals_held() -> Iterator[list[int]]:
    """SIGINT and SIGTERM, while a check process starts, noted instead of handled: raised inside
    ``Popen`` they would leave the check running with no one to kill it (its process exists
    before ``Popen`` returns it). The caller raises them again once it holds the process. Only
    signals whose handler is Python's (the main thread's, not ignored, not the default)."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    saved = {}
    for wanted in (signal.SIGINT, signal.SIGTERM):
        handler = signal.getsignal(wanted)
        if callable(handler):
            saved[wanted] = handler
            signal.signal(wanted, lambda number, frame: held.append(number))
    try:
        yield held
    except BaseException:
        for wanted, handler in saved.items():
            signal.signal(wanted, handler)
        for number in held:  # the check did not start: the signal is handled as it came
            signal.raise_signal(number)
        raise
    for wanted, handler in saved.items():
        signal.signal(wanted, handler)


def _drain(proc: subprocess.Popen[bytes]) -> bytes:
    """The rest of a killed check's output, read for :data:`DRAIN_S` at most."""
    try:
        return proc.communicate(timeout=DRAIN_S)[0]
    except subprocess.TimeoutExpired:
        if proc.stdout is not None:
            proc.stdout.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=DRAIN_S)
        return b"[applyonce: a process the check left running holds its output; stopped reading]"
