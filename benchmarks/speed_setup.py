"""Setup for ``bench_speed.py``: generated repos, fresh patches, the machine line, the tools.

Run as a script, it is the benchmark's untimed setup child:

    python3 benchmarks/speed_setup.py calls|interrupt REPO N

``calls``: N committed calls of one added file each. ``interrupt``: N calls each cut off at a fault
point (see ``CRASH_POINTS``). Both with every fsync off (what reaches the disk is the same, only its
durability is not waited for): it only builds the state that the timed processes then read.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}
CRASH_POINTS = ("after-publish", "after-commit-object", "after-prepared")


def git(*args: str | Path, cwd: Path | None = None, data: bytes | None = None) -> bytes:
    """Run git; its stdout."""
    argv = ["git", *map(str, args)]
    return subprocess.run(argv, cwd=cwd, input=data, check=True, capture_output=True).stdout


def path_of(i: int) -> str:
    return f"d{i // 100:04d}/f{i % 100:02d}.txt"


def _line(i: int, j: int) -> str:
    return f"line {j} of file {i}"


def make_repo(path: Path, files: int, *, checkout: bool) -> Path:
    """A repo of ``files`` files of 20 lines in folders of 100, by ``git fast-import``; with a
    checkout, ``git read-tree -u --reset HEAD`` then writes the work tree and the index. A repo
    already there (``--keep``) is reused."""
    ok = subprocess.run(
        ["git", "-C", path, "rev-parse", "-q", "--verify", "main"], check=False, capture_output=True
    )
    if path.exists() and ok.returncode == 0:
        return path
    shutil.rmtree(path, ignore_errors=True)
    git("init", "-q", "-b", "main", *([] if checkout else ["--bare"]), path)
    parts = [
        b"commit refs/heads/main\ncommitter b <b@example.com> 1700000000 +0000\ndata 5\nbase\n"
    ]
    for i in range(files):
        body = "".join(_line(i, j) + "\n" for j in range(20)).encode()
        parts.append(b"M 100644 inline %s\ndata %d\n%s\n" % (path_of(i).encode(), len(body), body))
    git("-C", path, "fast-import", "--quiet", data=b"".join(parts))
    if checkout:
        git("-C", path, "read-tree", "-u", "--reset", "HEAD")
    return path


class Edits:
    """Fresh three-file edits of one repo: line 11 of three files in three folders, changed again
    on each call, as a Codex patch and as the same unified diff."""

    def __init__(self, repo: Path, files: int) -> None:
        self.files = [0, files // 2 + 50, files - 1] if files >= 300 else [0, 1, 2]
        self.current = {}
        for i in self.files:
            blob = git("-C", repo, "cat-file", "blob", f"main:{path_of(i)}").decode()
            self.current[i] = blob.splitlines()[10]
        self.count = 0

    def paths(self) -> list[str]:
        return [path_of(i) for i in self.files]

    def next(self) -> tuple[str, str]:
        """The next (Codex patch, unified diff)."""
        self.count += 1
        codex, unified = ["*** Begin Patch"], []
        for i in self.files:
            p, old, new = path_of(i), self.current[i], f"edit {self.count} at {time.time_ns()}"
            body = [f" {_line(i, 9)}", f"-{old}", f"+{new}", f" {_line(i, 11)}"]
            codex += [f"*** Update File: {p}", "@@", *body]
            unified += [f"diff --git a/{p} b/{p}", f"--- a/{p}", f"+++ b/{p}", "@@ -10,3 +10,3 @@"]
            unified += body
            self.current[i] = new
        return "\n".join([*codex, "*** End Patch"]) + "\n", "\n".join(unified) + "\n"


def timed(fn: Callable[[], object], runs: int, warmup: int = 0) -> list[float]:
    """``runs`` wall times of ``fn()`` in ms, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def codex_binary() -> str | None:
    """``$APPLYONCE_CODEX_BIN``, else the binary ``.ci/run`` installs in the cache, else None."""
    explicit = os.environ.get("APPLYONCE_CODEX_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "applyonce"
    found = sorted(cache.glob("codex-*/node_modules/@openai/codex-*/vendor/*/bin/codex"))
    return next((str(p) for p in found if os.access(p, os.X_OK)), None)


def applyonce_command() -> tuple[list[str], str]:
    """The console script by its real path, whose shebang is the interpreter (a shell shim, as
    pyenv's, would add its own start-up), else ``sys.executable -m applyonce``; and which."""
    for candidate in (shutil.which("applyonce"), str(Path(sys.executable).parent / "applyonce")):
        if candidate and os.path.isfile(candidate):
            with open(candidate, "rb") as handle:
                first = handle.readline()
            if first.startswith(b"#!") and b"python" in first:
                shebang = first[2:].decode().strip()
                return [candidate], f"the console script {candidate} (shebang {shebang})"
    return [sys.executable, "-m", "applyonce"], f"{sys.executable} -m applyonce"


def machine(root: Path) -> list[str]:
    """The header lines: CPU, cores, kernel, file system of ``root``, versions, date."""
    import pygit2

    import applyonce

    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((x.split(":", 1)[1].strip() for x in cpuinfo if x.startswith("model name")), "?")
    fs, best, where = "?", "", os.path.realpath(root)
    for line in Path("/proc/mounts").read_text().splitlines():
        _dev, mount, kind, *_ = line.split()
        inside = where == mount or where.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) > len(best):
            best, fs = mount, kind
    version = git("--version").decode().strip().removeprefix("git version ")
    return [
        f"machine: {cpu}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"work dir on {fs} ({best})",
        f"python {platform.python_version()}, pygit2 {pygit2.__version__}, libgit2 "
        f"{pygit2.LIBGIT2_VERSION}, git {version}, applyonce {applyonce.__version__}",
        f"date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
    ]


def default_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="aospeed-"))


# ------------------------------------------------------------------------------ the setup child


class _Crash(BaseException):
    pass


def _without_fsync() -> None:
    """No fsync from os, libgit2 or SQLite in this (setup) process."""
    import sqlite3

    import pygit2

    import applyonce.executor  # noqa: F401  (it switches libgit2's fsync on: off after it)

    pygit2.settings.enable_fsync_gitdir(False)
    os.fsync = os.fdatasync = lambda fd: None
    connect = sqlite3.connect

    class NoSync(sqlite3.Connection):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql.lstrip().upper().startswith("PRAGMA SYNCHRONOUS"):
                sql = "PRAGMA synchronous = OFF"
            return super().execute(sql, *args)  # type: ignore[arg-type]

    sqlite3.connect = lambda *a, **k: connect(*a, factory=NoSync, **k)  # type: ignore[misc]


def setup_calls(mode: str, repo: Path, calls: int) -> None:
    """``calls`` calls of one added file each on ``repo``. ``interrupt``: each cut off at a fault
    point by raising where ``APPLYONCE_FAULT`` would SIGKILL (its ``finally`` blocks run, unlike a
    kill's); the process then ends without cleanup, so each claim's owner is dead, as after a
    kill."""
    _without_fsync()
    from applyonce.executor import Executor

    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if pid == os.getpid() and sig == signal.SIGKILL:
            raise _Crash(os.environ.get("APPLYONCE_FAULT"))
        real_kill(pid, sig)

    os.kill = kill
    ex = Executor(repo)
    for i in range(calls):
        text = f"*** Begin Patch\n*** Add File: calls/{i // 100:03d}/c{i % 100:02d}.txt\n+{i}\n"
        if mode == "interrupt":
            os.environ["APPLYONCE_FAULT"] = CRASH_POINTS[i % 3]
            with contextlib.suppress(_Crash):
                ex.apply(text + "*** End Patch\n")
                raise SystemExit(f"call {i} was not interrupted")
        else:
            receipt = ex.apply(text + "*** End Patch\n", tool_call_id=f"setup-{i}")
            assert receipt.status == "committed", receipt.status
    if mode == "calls":
        ex.close()
        (repo / "bench-built").write_text(f"{calls}\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    os.environ.update(ENV)
    setup_calls(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
