"""Replay real Git history through applyonce, as a unified diff and as a Codex patch.

For each non-merge commit C with parent P (the root commit: on an unborn branch) the driver puts
branch ``main`` of a scratch clone at P, sends ``git diff -M P C`` (or the Codex patch
:func:`to_codex` makes from it) to applyonce, and checks what a user would: one new commit whose
tree is ``C^{tree}``, a clean checkout, and for changes applyonce must refuse (binary content,
symlinks, submodules) exit 1 with a one-line error and nothing written.

The Codex format cannot say everything a diff says. :func:`to_codex` names what it cannot, and the
driver skips the commit for that format only, with the reason: a mode, a symlink or submodule,
binary content, non-UTF-8 text, a lone ``\\r`` line end, a context line that reads as a Codex
marker, and any file whose new bytes the engine's documented line-ending rules would not produce
(added lines take the file's dominant ending, a changed last line gets one): ``CRLF line endings``
or ``no final newline``. That prediction is checked against the diff's own new content, never
assumed.

Used by ``tests/peers/test_realworld_replay.py`` (a window, in CI) and
``benchmarks/bench_realworld.py`` (the whole history). Independent of applyonce's own parsers on
purpose: it is what they are tested against.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    import pygit2

# Beside the repository; APPLYONCE_REALWORLD_BUNDLE names another place (a git worktree's
# checkout sits one directory deeper than the repository it belongs to).
BUNDLE = Path(
    os.environ.get("APPLYONCE_REALWORLD_BUNDLE")
    or Path(__file__).resolve().parents[3] / "shared" / "realworld" / "packaging.bundle"
)
Format = Literal["unified", "codex", "search-replace"]
Via = Literal["api", "cli"]

# A replay must not read the user's git config (a diff.noprefix or color setting would change the
# diff a test sends), nor sign or hook anything.
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Replay",
    "GIT_AUTHOR_EMAIL": "replay@example.invalid",
    "GIT_COMMITTER_NAME": "Replay",
    "GIT_COMMITTER_EMAIL": "replay@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
}

# ----------------------------------------------------------------------------- unified diffs

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {
    b"n": b"\n",
    b"t": b"\t",
    b'"': b'"',
    b"\\": b"\\",
    b"a": b"\a",
    b"b": b"\b",
    b"f": b"\f",
    b"r": b"\r",
    b"v": b"\v",
}


@dataclass
class UHunk:
    """One ``@@`` hunk; ``lines`` are (kind, bytes with the line's own ending, \\r\\n or \\n or
    none when ``\\ No newline at end of file`` follows)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass
class FilePatch:
    """One file of a ``git diff``: paths (None for /dev/null), modes, and its hunks."""

    old_path: str | None
    new_path: str | None
    old_mode: str | None = None
    new_mode: str | None = None
    binary: bool = False
    hunks: list[UHunk] = field(default_factory=list)

    @property
    def modes(self) -> set[str]:
        return {m for m in (self.old_mode, self.new_mode) if m}


def _unquote(raw: bytes) -> str:
    """A path as git prints it: C-quoted (``"a\\303\\251.txt"``) or bare; ``a/``/``b/`` kept."""
    raw = raw.rstrip(b"\t")  # '--- a/x\t' when the name has a space
    if not raw.startswith(b'"'):
        return raw.decode("utf-8", "surrogateescape")
    out, i, body = bytearray(), 0, raw[1:-1]
    while i < len(body):
        char = body[i : i + 1]
        if char == b"\\":
            nxt = body[i + 1 : i + 2]
            if nxt.isdigit():
                out.append(int(body[i + 1 : i + 4], 8))
                i += 4
                continue
            out += _ESCAPES.get(nxt, nxt)
            i += 2
            continue
        out += char
        i += 1
    return bytes(out).decode("utf-8", "surrogateescape")


def _strip_prefix(path: str) -> str | None:
    if path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def parse_git_diff(data: bytes) -> list[FilePatch]:
    """Split ``git diff`` output (bytes) into file patches. Only what git itself writes."""
    files: list[FilePatch] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith(b"diff --git "):
            raise ValueError(f"unexpected line in git diff: {line[:80]!r}")
        header = line[len(b"diff --git ") :]
        fp = FilePatch(None, None)
        # 'diff --git a/x b/x': both halves equal unless renamed (then 'rename from/to' say it).
        half = (len(header) - 1) // 2
        if (
            header[:2] == b"a/"
            and header[half : half + 3] == b" b/"
            and (header[2:half] == header[half + 3 :])
        ):
            fp.old_path = fp.new_path = _unquote(header[2:half])
        i += 1
        while i < len(lines) and not lines[i].startswith((b"diff --git ", b"@@ ")):
            ext = lines[i]
            if ext.startswith(b"old mode "):
                fp.old_mode = ext[9:].decode()
            elif ext.startswith(b"new mode "):
                fp.new_mode = ext[9:].decode()
            elif ext.startswith(b"deleted file mode "):
                fp.old_mode, fp.new_path = ext[18:].decode(), None
            elif ext.startswith(b"new file mode "):
                fp.new_mode, fp.old_path = ext[14:].decode(), None
            elif ext.startswith(b"index "):
                parts = ext.split(b" ")
                if len(parts) == 3:
                    fp.old_mode = fp.old_mode or parts[2].decode()
                    fp.new_mode = fp.new_mode or parts[2].decode()
            elif ext.startswith(b"rename from "):
                fp.old_path = _unquote(ext[12:])
            elif ext.startswith(b"rename to "):
                fp.new_path = _unquote(ext[10:])
            elif ext.startswith(b"--- "):
                fp.old_path = _strip_prefix(_unquote(ext[4:]))
            elif ext.startswith(b"+++ "):
                fp.new_path = _strip_prefix(_unquote(ext[4:]))
            elif ext.startswith((b"Binary files ", b"GIT binary patch")):
                fp.binary = True
            i += 1
        while i < len(lines) and lines[i].startswith(b"@@ "):
            match = _HUNK.match(lines[i])
            if match is None:
                raise ValueError(f"bad hunk header {lines[i][:80]!r}")
            hunk = UHunk(int(match[1]), int(match[2] or b"1"), int(match[3]), int(match[4] or b"1"))
            i += 1
            old_left, new_left = hunk.old_count, hunk.new_count
            while i < len(lines) and (old_left or new_left or lines[i].startswith(b"\\")):
                body = lines[i]
                if body.startswith(b"\\"):
                    kind, text = hunk.lines[-1]
                    hunk.lines[-1] = (kind, text[:-1])  # drop the '\n' added below
                    i += 1
                    continue
                kind = body[:1].decode() or " "
                if kind not in " -+":
                    raise ValueError(f"bad hunk line {body[:80]!r}")
                hunk.lines.append((kind, body[1:] + b"\n"))
                old_left -= kind != "+"
                new_left -= kind != "-"
                i += 1
            fp.hunks.append(hunk)
        files.append(fp)
    return files


def refusal_reason(files: Sequence[FilePatch]) -> str | None:
    """Why applyonce must refuse this diff (the README's rules), or None if it must apply it."""
    for fp in files:
        if "160000" in fp.modes:
            return "submodule"
        if "120000" in fp.modes:
            return "symlink"
        if fp.binary:
            return "binary"
    return None


def new_bytes(old: bytes, hunks: Sequence[UHunk]) -> bytes:
    """The file after ``hunks`` (at their exact line numbers: the diff was made from ``old``)."""
    lines = old.splitlines(keepends=True) if old else []
    out: list[bytes] = []
    pos = 0
    for hunk in hunks:
        start = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        out.extend(lines[pos:start])
        out.extend(text for kind, text in hunk.lines if kind != "-")
        pos = start + hunk.old_count
    out.extend(lines[pos:])
    return b"".join(out)


# ----------------------------------------------------------------------------- Codex patches

_LINE = re.compile(r"([^\r\n]*)(\r\n|\n|\r|$)")
_MARKERS = ("*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: ")
BOM = "\ufeff"
CONTEXT = 3
REFUSED = "refused as expected: "
NO_CODEX = "no Codex spelling: "
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class Inexpressible(Exception):
    """The change has no Codex spelling; ``str(exc)`` is the reason (a short fixed phrase)."""


def _split(text: str) -> tuple[bool, list[str], list[str]]:
    """(BOM, bodies, endings) the way the README says applyonce reads a text file."""
    bom = text.startswith(BOM)
    text = text[1:] if bom else text
    bodies: list[str] = []
    ends: list[str] = []
    for match in _LINE.finditer(text):
        if not match[1] and not match[2]:
            break
        bodies.append(match[1])
        ends.append(match[2])
    return bom, bodies, ends


def _dominant(ends: Sequence[str]) -> str:
    counts = {e: ends.count(e) for e in set(ends) if e}
    if not counts:
        return "\n"
    best = max(counts.values())
    return next(e for e in ends if e and counts[e] == best)


def _decode(data: bytes) -> str:
    if b"\0" in data:
        raise Inexpressible("binary")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Inexpressible("non-UTF-8 text") from None
    if re.search(r"\r(?!\n)", text):
        raise Inexpressible("lone CR line ending")
    return text


def _blocks(
    old_bodies: list[str], new_bodies: list[str], hunks: Sequence[UHunk]
) -> list[tuple[int, int, list[str]]]:
    """The diff's changes as (old start, old stop, new lines), 0-based, in order."""
    blocks: list[tuple[int, int, list[str]]] = []
    for hunk in hunks:
        old = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        new = hunk.new_start - 1 if hunk.new_count else hunk.new_start
        current: tuple[int, int, list[str]] | None = None
        for kind, _text in hunk.lines:
            if kind == " ":
                if current:
                    blocks.append(current)
                    current = None
                old += 1
                new += 1
                continue
            if current is None:
                current = (old, old, [])
            if kind == "-":
                current = (current[0], current[1] + 1, current[2])
                old += 1
            else:
                current[2].append(new_bodies[new])
                new += 1
        if current:
            blocks.append(current)
    return blocks


def _places(bodies: list[str], want: list[str], start: int) -> list[int]:
    """Where ``want`` occurs at or after ``start`` (the first two at most)."""
    found: list[int] = []
    m = len(want)
    for i in range(start, len(bodies) - m + 1):
        if bodies[i] == want[0] and bodies[i : i + m] == want:
            found.append(i)
            if len(found) == 2:
                break
    return found


def _anchor(old_bodies: list[str], lo: int, hi: int, cursor: int) -> str:
    """The ``@@`` line a model writes for the hunk of lines ``lo:hi``: the nearest ``def`` or
    ``class`` line before it indented less than the hunk's first non-blank line, else the nearest
    line so indented (a heading, a block opener), else a bare ``@@`` (also when the line is before
    ``cursor``, the previous hunk's end: the hunks share it)."""
    first = next((body for body in old_bodies[lo:hi] if body.strip()), "")
    indent = len(first) - len(first.lstrip())
    nearest = None
    for j in range(lo - 1, cursor - 1, -1):
        body = old_bodies[j]
        stripped = body.lstrip()
        if not stripped or len(body) - len(stripped) >= indent:
            continue
        if stripped.startswith(("def ", "async def ", "class ")):
            return "@@ " + body
        nearest = body if nearest is None else nearest
    return "@@" if nearest is None else "@@ " + nearest


def codex_hunks(
    old_bodies: list[str], blocks: list[tuple[int, int, list[str]]], *, as_model: bool = False
) -> list[str]:
    """Codex hunk lines for ``blocks``: each hunk gets ``CONTEXT`` lines around it, more until its
    old lines occur once only after the previous hunk (where the applier searches), there where
    the change is; ``*** End of File`` where a hunk reaches the end (the end is one place).

    ``as_model``: as a model writes them instead: ``CONTEXT`` lines whatever they match, and an
    ``@@`` line naming the def or class the hunk is in (:func:`_anchor`)."""
    n = len(old_bodies)
    extra = [CONTEXT] * len(blocks)
    while True:
        # Hunks: (context start, context stop, blocks in it); overlapping contexts merge.
        groups: list[list[int]] = []
        spans: list[tuple[int, int]] = []
        for k, (a, b, _new) in enumerate(blocks):
            lo, hi = max(a - extra[k], 0), min(b + extra[k], n)
            if spans and lo <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(hi, spans[-1][1]))
                groups[-1].append(k)
            else:
                spans.append((lo, hi))
                groups.append([k])
        out: list[str] = []
        cursor, widen = 0, None
        for (lo, hi), members in zip(spans, groups, strict=True):
            old = old_bodies[lo:hi]
            at_end = hi == n and n > 0
            ok = (
                as_model
                or not old
                or (at_end and n - len(old) >= cursor)
                or (not at_end and _places(old_bodies, old, cursor) == [lo])
            )
            if not ok:
                widen = members
                break
            out.append(_anchor(old_bodies, lo, hi, cursor) if as_model else "@@")
            pos = lo
            for k in members:
                a, b, new = blocks[k]
                out.extend(" " + body for body in old_bodies[pos:a])
                out.extend("-" + body for body in old_bodies[a:b])
                out.extend("+" + body for body in new)
                pos = b
            out.extend(" " + body for body in old_bodies[pos:hi])
            if at_end:
                out.append("*** End of File")
            cursor = hi
        if widen is None:
            return out
        for k in widen:
            extra[k] = extra[k] * 2 + 1


def _predict(
    old_ends: list[str], old_n: int, blocks: list[tuple[int, int, list[str]]]
) -> list[str]:
    """The endings the applier gives the new file: kept for untouched lines, the old dominant one
    for added lines, and a line left without one gets one unless it is last."""
    newline = _dominant(old_ends)
    ends: list[str] = []
    pos = 0
    for a, b, new in blocks:
        ends.extend(old_ends[pos:a])
        ends.extend(newline for _ in new)
        pos = b
    ends.extend(old_ends[pos:old_n])
    return [e or newline for e in ends[:-1]] + ends[-1:]


def _check_markers(lines: Sequence[str]) -> None:
    for line in lines:
        stripped = line.strip()
        if line[:1] == " " and (stripped == "*** End of File" or stripped.startswith(_MARKERS)):
            raise Inexpressible("context line reads as a Codex marker")


def to_codex(diff: bytes, old_blob: Callable[[str], bytes], *, as_model: bool = False) -> str:
    """Convert ``git diff`` output into a Codex ``apply_patch`` patch of the same change.

    ``old_blob(path)`` returns a file of the diff's base (hunks are widened with its lines until
    they are unique; ``as_model``: not widened, with ``@@`` anchors, see :func:`codex_hunks`).
    Raises :class:`Inexpressible` with the reason when Codex cannot say it.
    """
    out = ["*** Begin Patch"]
    for fp in parse_git_diff(diff):
        for mode, reason in (("160000", "submodule"), ("120000", "symlink")):
            if mode in fp.modes:
                raise Inexpressible(reason)
        if fp.old_path is None:
            assert fp.new_path is not None
            if fp.binary:
                raise Inexpressible("binary")
            if fp.new_mode not in (None, "100644"):
                raise Inexpressible("mode of a new file")
            text = _decode(new_bytes(b"", fp.hunks))
            if "\r\n" in text:
                raise Inexpressible("CRLF line endings")  # Add File lines end in LF
            if text and not text.endswith("\n"):
                raise Inexpressible("no final newline")
            out.append("*** Add File: " + fp.new_path)
            out.extend("+" + line for line in text.split("\n")[:-1])
            continue
        if fp.new_path is None:
            out.append("*** Delete File: " + fp.old_path)
            continue
        if fp.old_mode != fp.new_mode:
            raise Inexpressible("mode change")
        moved = fp.new_path != fp.old_path
        if not fp.hunks:
            if fp.binary:
                raise Inexpressible("binary")
            if moved:  # a pure rename
                out += ["*** Update File: " + fp.old_path, "*** Move to: " + fp.new_path]
            continue
        old_raw = old_blob(fp.old_path)
        old_text = _decode(old_raw)
        new_text = _decode(new_bytes(old_raw, fp.hunks))
        bom, old_bodies, old_ends = _split(old_text)
        new_bom, new_bodies, new_ends = _split(new_text)
        if bom != new_bom:
            raise Inexpressible("byte order mark change")
        blocks = _blocks(old_bodies, new_bodies, fp.hunks)
        predicted = _predict(old_ends, len(old_bodies), blocks)
        if predicted != new_ends:
            wrong = [pair for pair in zip(predicted, new_ends, strict=True) if pair[0] != pair[1]]
            raise Inexpressible(
                "no final newline" if any("" in pair for pair in wrong) else "line endings"
            )
        hunks = codex_hunks(old_bodies, blocks, as_model=as_model)
        _check_markers(hunks)
        out.append("*** Update File: " + fp.old_path)
        if moved:
            out.append("*** Move to: " + fp.new_path)
        out.extend(hunks)
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- the replay


@dataclass
class Result:
    """One commit in one format: ``exact``, ``skipped`` (with its reason) or ``failed``."""

    commit: str
    fmt: Format
    outcome: Literal["exact", "skipped", "failed"]
    reason: str = ""
    detail: str = ""
    seconds: float = 0.0

    def line(self) -> str:
        text = f"{self.commit[:12]} {self.fmt:<7} {self.outcome}"
        return (
            text
            + (f" ({self.reason})" if self.reason else "")
            + (f": {self.detail}" if self.detail else "")
        )


def _git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> bytes:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=input,
        capture_output=True,
        env={**os.environ, **GIT_ENV},
        check=False,
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def non_merge_commits(bundle: Path | str = BUNDLE) -> list[str]:
    """Every non-merge commit of the bundle's history, oldest first."""
    with tempfile.TemporaryDirectory(prefix="aoreplay-") as top:
        clone = Path(top) / "r"
        _git(Path(top), "clone", "-q", "--bare", str(bundle), str(clone))
        out = _git(clone, "rev-list", "--reverse", "--topo-order", "--no-merges", "HEAD")
    return out.decode().split()


def diffs(bundle: Path | str, commits: Sequence[str]) -> Iterator[bytes]:
    """``git diff -M P C`` of each commit (against the empty tree for a root commit)."""
    with tempfile.TemporaryDirectory(prefix="aoreplay-") as top:
        clone = Path(top) / "r"
        _git(Path(top), "clone", "-q", "--bare", str(bundle), str(clone))
        for commit in commits:
            parents = _git(clone, "rev-parse", f"{commit}^@").decode().split()
            yield _git(clone, "diff", "-M", parents[0] if parents else EMPTY_TREE, commit)


@dataclass
class _Attempt:
    exit_code: int
    message: str


class CliRun(Protocol):
    returncode: int
    stdout: str
    stderr: str


CliRunner = Callable[..., CliRun]


def run_applyonce(
    *args: str, input: bytes, cwd: Path, env: dict[str, str], timeout: float = 120
) -> CliRun:
    """The real ``applyonce`` in its own process (the shape of ``tests.conftest.run_cli``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", *args],
        input=input,
        capture_output=True,
        cwd=cwd,
        env={**os.environ, **env},
        timeout=timeout,
        check=False,
    )
    return SimpleNamespace(
        returncode=proc.returncode,
        stdout=proc.stdout.decode(errors="replace"),
        stderr=proc.stderr.decode(errors="replace"),
    )


def _scratch_root() -> str | None:
    """``/dev/shm`` where there is one: every call fsyncs its objects, ref, receipt and ledger,
    which a replay of hundreds of calls need not wait for."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


@contextlib.contextmanager
def scratch_clone(bundle: Path | str, workdir: Path | None = None) -> Iterator[Path]:
    """A clone of ``bundle`` with ``core.autocrlf`` off, removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="aoreplay-", dir=workdir or _scratch_root()))
    try:
        clone = top / "repo"
        _git(top, "clone", "-q", "--no-checkout", str(bundle), str(clone))
        _git(clone, "config", "core.autocrlf", "false")
        _git(clone, "config", "gc.auto", "0")
        yield clone
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _reset_to(clone: Path, parent: str | None, *, clean: bool) -> None:
    """Branch ``main`` at ``parent`` (unborn for a root commit), checked out, nothing else."""
    if parent is None:
        _git(clone, "symbolic-ref", "HEAD", "refs/heads/main")
        _git(clone, "update-ref", "-d", "refs/heads/main", check=False)
        _git(clone, "read-tree", "--empty")
        clean = True
    else:
        _git(clone, "checkout", "-q", "-f", "-B", "main", parent)
    if clean:
        _git(clone, "clean", "-q", "-ffdx")


def _apply_api(clone: Path, text: str, fmt: Format, state: Path, skip: Sequence[str]) -> _Attempt:
    from applyonce.errors import ApplyOnceError
    from applyonce.executor import CallOptions, Executor

    options = CallOptions(format=fmt)
    if skip and hasattr(options, "skip_checks"):
        options.skip_checks = tuple(skip)
    executor = Executor(clone, state_dir=str(state))
    try:
        receipt = executor.apply(text, options)
    except ApplyOnceError as exc:
        return _Attempt(exc.exit_code, exc.one_line())
    finally:
        executor.close()
    if receipt.status != "committed":
        error = receipt.error or {}
        return _Attempt(receipt.exit_code or 1, f"{error.get('message')}; {error.get('hint')}")
    return _Attempt(0, receipt.output)


@functools.cache
def _cli_has_skip_check() -> bool:
    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", "apply", "--help"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    return "--skip-check" in proc.stdout


def _apply_cli(
    clone: Path, data: bytes, fmt: Format, state: Path, skip: Sequence[str], cli: CliRunner
) -> _Attempt:
    args = ["apply", "-", "--format", fmt, "--state-dir", str(state)]
    if skip and _cli_has_skip_check():
        for name in skip:
            args += ["--skip-check", name]
    run = cli(*args, input=data, cwd=clone, env=GIT_ENV, timeout=120)
    return _Attempt(run.returncode, run.stderr or run.stdout)


def replay(
    bundle: Path | str,
    commits: Sequence[str],
    fmt: Format,
    *,
    cli: CliRunner | None = None,
    skip_checks: Sequence[str] = (),
    workdir: Path | None = None,
) -> list[Result]:
    """Replay ``commits`` of ``bundle`` (a bundle or a repository) in ``fmt``, each on its own
    parent; one :class:`Result` each, in order. In process through :class:`Executor`, or through
    the real CLI when ``cli`` runs it (``tests.conftest.run_cli``, :func:`run_applyonce`).

    ``skip_checks``: built-in checks to turn off (``syntax``, ``markers``), where the engine offers
    that; none by default, so a check that rejects real history is a failure to look at.
    """
    import pygit2

    results: list[Result] = []
    with scratch_clone(bundle, workdir) as clone:
        repo = pygit2.Repository(str(clone))
        dirty = True
        for commit in commits:
            started = time.perf_counter()
            try:
                result, dirty = _replay_one(clone, repo, commit, fmt, cli, skip_checks, dirty)
            except Exception as exc:  # a bug here is a failed commit, reported with the rest
                result = Result(
                    commit, fmt, "failed", "replay error", f"{type(exc).__name__}: {exc}"
                )
                dirty = True
            result.seconds = time.perf_counter() - started
            results.append(result)
    return results


def _replay_one(
    clone: Path,
    repo: pygit2.Repository,
    commit: str,
    fmt: Format,
    cli: CliRunner | None,
    skip: Sequence[str],
    dirty: bool,
) -> tuple[Result, bool]:
    """One commit; also whether the checkout may hold leftovers (then the next one cleans it)."""
    import pygit2

    c = repo.revparse_single(commit).peel(pygit2.Commit)
    commit = str(c.id)
    if len(c.parent_ids) > 1:
        return Result(
            commit, fmt, "failed", "merge commit", "merge commits are not replayed"
        ), dirty
    parent = str(c.parent_ids[0]) if c.parent_ids else None
    diff = _git(clone, "diff", "-M", parent or EMPTY_TREE, commit)
    refused = refusal_reason(parse_git_diff(diff))
    if fmt == "unified":
        data = diff
    else:
        # SEARCH/REPLACE blocks: their generator (``realworld_blocks.py``) imports this module.
        from tests.peers.realworld_blocks import NO_BLOCKS, to_search_replace

        convert, no_spelling = (
            (to_codex, NO_CODEX) if fmt == "codex" else (to_search_replace, NO_BLOCKS)
        )
        try:
            tree = repo[parent or EMPTY_TREE].peel(pygit2.Tree)
            data = convert(diff, lambda path: tree[path].data).encode("utf-8", "surrogateescape")
        except Inexpressible as exc:
            return Result(commit, fmt, "skipped", f"{no_spelling}{exc}"), dirty
        refused = None
    _reset_to(clone, parent, clean=dirty)
    before = ("refs/heads/main", parent or "", "")
    with tempfile.TemporaryDirectory(prefix="state-", dir=clone.parent) as state:
        if cli is None:
            text = data.decode("utf-8", "surrogateescape")
            attempt = _apply_api(clone, text, fmt, Path(state), skip)
        else:
            attempt = _apply_cli(clone, data, fmt, Path(state), skip, cli)
    after = _state(clone)
    dirty = bool(after[2])
    message = attempt.message.strip()
    if refused is not None:
        problems = []
        if attempt.exit_code != 1:
            problems.append(f"exit {attempt.exit_code}, not 1")
        if "\n" in message or not message:
            problems.append(f"error is not one line: {message[:300]!r}")
        if after != before:
            problems.append(f"something was written: {before} -> {after}")
        if problems:
            why = f"{refused} not refused cleanly"
            return Result(commit, fmt, "failed", why, "; ".join(problems)), dirty
        return Result(commit, fmt, "skipped", f"{REFUSED}{refused}", message), dirty
    if attempt.exit_code != 0:
        return Result(commit, fmt, "failed", f"exit {attempt.exit_code}", message[:500]), True
    problems = []
    tip = after[1]
    new = _git(clone, "rev-list", tip, *([f"^{parent}"] if parent else [])).decode().split()
    if len(new) != 1:
        problems.append(f"{len(new)} new commits")
    want, got = str(c.tree_id), str(repo[tip].peel(pygit2.Commit).tree_id)
    if want != got:
        changed = _git(clone, "diff", "--stat=200", "-M", commit, tip).decode().strip()
        problems.append(f"tree {got[:12]} is not {want[:12]}: {changed[-600:]}")
    if after[2]:
        problems.append(f"checkout not clean: {after[2][:300]!r}")
    if after[0] != "refs/heads/main":
        problems.append(f"HEAD is {after[0]}")
    if problems:
        return Result(commit, fmt, "failed", "not exact", "; ".join(problems)), dirty
    return Result(commit, fmt, "exact"), dirty


def _state(clone: Path) -> tuple[str, str, str]:
    """(HEAD's ref, main's commit, ``git status --porcelain --ignored``): what a call may change.
    Read by git itself, not by the libgit2 applyonce uses."""
    out = _git(
        clone, "status", "--porcelain=v2", "--branch", "--ignored", "--untracked-files=all"
    ).decode(errors="replace")
    head = tip = ""
    status = []
    for line in out.splitlines():
        if line.startswith("# branch.head "):
            head = "refs/heads/" + line[len("# branch.head ") :]
        elif line.startswith("# branch.oid "):
            tip = line[len("# branch.oid ") :]
        elif not line.startswith("# "):
            status.append(line)
    if tip == "(initial)":
        tip = ""
    return head, tip, "\n".join(status)


# ----------------------------------------------------------------------------- hard cases

# Each step: (message, files to write (bytes; None deletes), extra git commands). The packaging
# history has no CRLF, mode change, symlink, submodule or non-UTF-8 text; these commits do.
HARD_STEPS: list[tuple[str, dict[str, bytes | None], list[list[str]]]] = [
    (
        "base",
        {
            "lf.txt": b"one\ntwo\nthree\n",
            "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
            "mixed.txt": b"one\r\ntwo\nthree\r\nfour\r\n",
            "noeol.txt": b"one\ntwo",
            "script.sh": b"#!/bin/sh\necho hi\n",
            "latin1.txt": "caf\u00e9\nna\u00efve\n".encode("latin-1"),
            "blob.bin": b"\x00\x01\x02binary\n",
            "bom.txt": "\ufeffone\ntwo\n".encode(),
            "docs.rst": b"Title\n\nText.\n",
            "old_name.py": b"def f():\n    return 1\n\n\ndef g():\n    return 2\n",
        },
        [],
    ),
    ("add a CRLF file", {"new_crlf.txt": b"a\r\nb\r\n"}, []),
    ("LF to CRLF", {"lf.txt": b"one\r\ntwo\r\nthree\r\n"}, []),
    ("CRLF to LF", {"crlf.txt": b"one\ntwo\nthree\n"}, []),
    ("edit a CRLF line of a mixed file", {"mixed.txt": b"one\r\nTWO\r\nthree\r\nfour\r\n"}, []),
    ("edit the last line, still no final newline", {"noeol.txt": b"one\nTWO"}, []),
    ("add the final newline", {"noeol.txt": b"one\nTWO\n"}, []),
    ("mode change only", {}, [["update-index", "--chmod=+x", "script.sh"]]),
    (
        "mode change and edit",
        {"script.sh": b"#!/bin/sh\necho bye\n"},
        [["update-index", "--chmod=-x", "script.sh"]],
    ),
    (
        "add an executable file",
        {"run.sh": b"#!/bin/sh\n"},
        [["update-index", "--chmod=+x", "run.sh"]],
    ),
    ("edit non-UTF-8 text", {"latin1.txt": "caf\u00e9\nna\u00efvet\u00e9\n".encode("latin-1")}, []),
    ("edit a binary file", {"blob.bin": b"\x00\x01\x03binary\n"}, []),
    ("add a symlink", {}, [["symlink", "lf.txt", "link"]]),
    (
        "add a submodule",
        {},
        [
            [
                "update-index",
                "--add",
                "--cacheinfo",
                "160000,1111111111111111111111111111111111111111,sub",
            ]
        ],
    ),
    ("an rst heading", {"docs.rst": b"Title\n=======\n\nText.\n"}, []),
    (
        "rename with an edit",
        {
            "old_name.py": None,
            "new_name.py": b"def f():\n    return 1\n\n\ndef g():\n    return 3\n",
        },
        [],
    ),
    (
        "pure rename",
        {
            "new_name.py": None,
            "renamed.py": b"def f():\n    return 1\n\n\ndef g():\n    return 3\n",
        },
        [],
    ),
    ("delete a file", {"renamed.py": None}, []),
    ("add an empty file", {"empty.txt": b""}, []),
    ("edit a file with a BOM", {"bom.txt": "\ufeffone\nTWO\n".encode()}, []),
    ("delete the binary file", {"blob.bin": None}, []),
]


def build_hard_history(path: Path) -> list[str]:
    """A repository at ``path`` with one commit per :data:`HARD_STEPS` entry; their ids."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "core.autocrlf", "false")
    commits = []
    for message, files, commands in HARD_STEPS:
        for name, content in files.items():
            if content is None:
                _git(path, "rm", "-q", name)
            else:
                (path / name).write_bytes(content)
                _git(path, "add", name)
        for command in commands:
            if command[0] == "symlink":
                os.symlink(command[1], path / command[2])
                _git(path, "add", command[2])
            else:
                _git(path, *command)
        _git(path, "commit", "-q", "--allow-empty", "-m", message)
        commits.append(_git(path, "rev-parse", "HEAD").decode().strip())
    return commits


# ----------------------------------------------------------------------------- as a model writes it


def replay_as_model(
    bundle: Path | str, commits: Sequence[str], binary: str, workdir: Path | None = None
) -> list[tuple[str, str, str]]:
    """Each commit (with one parent) as the Codex patch a model writes (:func:`to_codex` with
    ``as_model``), applied to the files it touches by applyonce's engine and by the real Codex
    binary: ``(commit, outcome, detail)``, the outcome naming what each tool did against the
    commit's files (``exact``, ``wrong``, ``refused (kind)``) — ``refused (ambiguous-context),
    Codex exact`` is an ambiguity refusal where Codex reproduces the commit."""
    import pygit2

    from tests.peers.codex_differential import run_applyonce as engine
    from tests.peers.codex_differential import run_codex

    out: list[tuple[str, str, str]] = []
    with scratch_clone(bundle, workdir) as clone:
        repo = pygit2.Repository(str(clone))
        for commit in commits:
            c = repo.revparse_single(commit).peel(pygit2.Commit)
            if len(c.parent_ids) != 1:
                continue
            parent = repo[c.parent_ids[0]].peel(pygit2.Commit)
            diff = _git(clone, "diff", "-M", str(parent.id), str(c.id))
            try:
                base = parent.tree
                text = to_codex(diff, lambda path, base=base: base[path].data, as_model=True)
            except Inexpressible as exc:
                out.append((str(c.id), "skipped", str(exc)))
                continue
            before: dict[str, bytes] = {}
            after: dict[str, bytes] = {}
            for fp in parse_git_diff(diff):
                if fp.old_path is not None:
                    before[fp.old_path] = parent.tree[fp.old_path].data
            after = dict(before)
            for fp in parse_git_diff(diff):
                if fp.old_path is not None:
                    after.pop(fp.old_path, None)
            for fp in parse_git_diff(diff):
                if fp.new_path is not None:
                    after[fp.new_path] = c.tree[fp.new_path].data
            ours = engine(before, text)
            if len(text.encode()) >= 128 * 1024:
                # Codex takes the patch as one argument, which Linux caps at 128 KiB.
                out.append((str(c.id), "skipped", "patch too long for Codex's argument"))
                continue
            with tempfile.TemporaryDirectory(prefix="codex-", dir=clone.parent) as top:
                theirs = run_codex(binary, before, text, workdir=Path(top))
            said = []
            for name, result in (("applyonce", ours), ("Codex", theirs)):
                if not result.ok:
                    kind = result.message.split(":", 1)[0] if name == "applyonce" else "failed"
                    said.append(f"{name} refused ({kind})")
                else:
                    said.append(f"{name} {'exact' if dict(result.tree) == after else 'wrong'}")
            out.append((str(c.id), ", ".join(said), ours.message[:300]))
    return out
