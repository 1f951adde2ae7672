"""Differential cases: applyonce's pure engine against the real ``git apply``.

One case, from one seed: random text files (lines from a small vocabulary, so lines repeat; blank
lines; sometimes no final newline; sometimes a name with spaces or non-ASCII letters that git
quotes), random edits to them (replace, delete and insert line ranges, add and drop the final
newline, add, delete, rename, copy and chmod files), the patch made by the real ``git diff`` with
random options (context 0/1/3/5 lines, diff algorithm, rename and copy detection, ``--no-prefix``,
mnemonic prefixes), then applied:

* by ``git apply`` in a checkout of the base (``--unidiff-zero`` for ``-U0``; its default ``-p1``
  for every diff, as applyonce has no ``-p``: a ``--no-prefix`` diff loses each name's first
  directory in both, so both refuse it, or both change the same files), and
* by applyonce's pure engine: ``parse`` + ``plan`` over the base files on disk,

and the two resulting trees (bytes and executable bits) are compared.

A ``drift`` case first perturbs the base (inserts and deletes lines of the edited files) and applies
the same patch to it, so the hunks must be found away from their line numbers, or not at all. Then
both tools must fail, or both succeed with the same bytes (``agree``). Three more outcomes are
differences by design, each classified from the files the tools disagree on (a file git refused,
a file applyonce refused, or a file whose bytes differ), and counted apart from ``disagree``:

* ``lenient`` — git refused and applyonce applied with its matching ladder below the exact level
  (context that differs only in whitespace; the receipt records the level);
* ``context-less`` — the file has a hunk without context lines: git (without ``--unidiff-zero``)
  pins it to both ends of the file, applyonce places it by its line numbers as ``git apply
  --unidiff-zero`` does;
* ``eof-marker`` — the file has a ``\\ No newline at end of file`` hunk: git compares that last line
  as a byte prefix, so it can match it mid-file and join it to the next line; applyonce keeps such
  a hunk at the end of the file.

On the exact base the tree the diff was made from is known, and it is the ground truth: a case in
which ``git apply`` does not reproduce it (it can misread an added line such as ``++ x``, written
``+++ x``, as a file header) is ``git-misread`` when applyonce does reproduce it, else ``disagree``.

Used by ``tests/peers/test_differential_gitapply.py`` (a bounded number of seeds) and
``benchmarks/bench_differential.py`` (as many as asked).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from applyonce.core.plan import MODE_EXEC, MODE_FILE, EntryKind, plan
from applyonce.errors import ApplyOnceError
from applyonce.patch import CopyFile, Hunk, MatchLevel, UpdateFile, parse

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Differential",
    "GIT_AUTHOR_EMAIL": "diff@example.invalid",
    "GIT_COMMITTER_NAME": "Differential",
    "GIT_COMMITTER_EMAIL": "diff@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
}

# Lines repeat on purpose (ambiguous context); whitespace variants exercise exact matching.
VOCABULARY = [
    "",
    "",
    "}",
    "{",
    "    return x",
    "    return y",
    "def f():",
    "def g():",
    "x = 1",
    "x = 2",
    "# comment",
    "pass",
    "    pass",
    "\tpass",
    "end",
    "-- dashes",
    "++ plus",
    "@@ at",
    "\\ backslash",
    "caf\u00e9 \u2014 \u201cquoted\u201d",
]
NAMES = ["a.txt", "src/b.py", "dir with space/c.md", "d\u00e9j\u00e0/\u00fc.txt", "e.txt", "f.cfg"]


@dataclass
class Files:
    """A tree of text files: path -> (bytes, executable)."""

    files: dict[str, tuple[bytes, bool]] = field(default_factory=dict)

    def write(self, root: Path) -> None:
        for path, (data, executable) in self.files.items():
            full = root / path
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_bytes(data)
            full.chmod(0o755 if executable else 0o644)


@dataclass
class Outcome:
    """What one tool did: the resulting tree, or the failure."""

    tree: dict[str, tuple[bytes, bool]] | None
    error: str = ""
    lenient: bool = False  # applyonce only: some hunk matched below the exact level


@dataclass
class Case:
    seed: int
    drift: bool
    diff_args: list[str]
    apply_args: list[str]
    patch: str
    git: Outcome
    ours: Outcome
    # On the exact base: the tree the diff was made from, the ground truth for both tools.
    intended: dict[str, tuple[bytes, bool]] | None = None

    @property
    def verdict(self) -> str:
        """``agree``, ``disagree``, or a difference by design (see the module docstring)."""
        if (
            self.intended is not None
            and self.git.tree is not None
            and (self.git.tree != self.intended)
        ):
            # git apply misread git's own diff (an added line that looks like a header, say):
            # what counts then is whether applyonce produced the tree the diff was made from.
            return "git-misread" if self.ours.tree == self.intended else "disagree"
        if self.git.tree is None and self.ours.tree is None:
            return "agree"
        if self.git.tree is not None and self.git.tree == self.ours.tree:
            return "agree"
        if self.git.tree is None and self.ours.tree is not None and self.ours.lenient:
            return "lenient"
        blamed = self._blamed_paths()
        if not blamed:
            return "disagree"
        hunks = _hunks_by_path(self.patch)
        kinds = set()
        for path in blamed:
            file_hunks = hunks.get(path, ())
            if any(hunk.old_no_final_newline or hunk.new_no_final_newline for hunk in file_hunks):
                kinds.add("eof-marker")
            elif any(all(line.kind != " " for line in hunk.lines) for hunk in file_hunks):
                kinds.add("context-less")
            else:
                return "disagree"
        return "eof-marker" if "eof-marker" in kinds else "context-less"

    def _blamed_paths(self) -> set[str]:
        if self.git.tree is not None and self.ours.tree is not None:
            return {
                path
                for path in set(self.git.tree) | set(self.ours.tree)
                if self.git.tree.get(path) != self.ours.tree.get(path)
            }
        if self.git.tree is None:
            match = re.match(r"error: (.+): patch does not apply$", self.git.error)
            return {match.group(1)} if match else set()
        match = re.match(r"(.+?): hunk \d+ ", self.ours.error)
        return {match.group(1)} if match else set()

    def describe(self) -> str:
        return (
            f"seed {self.seed} (drift={self.drift}) git diff {' '.join(self.diff_args)} / "
            f"git apply {' '.join(self.apply_args)}\n"
            f"git: {self.git.error or 'applied'}; applyonce: {self.ours.error or 'applied'}\n"
            f"--- patch ---\n{self.patch}"
        )


def _hunks_by_path(patch_text: str) -> dict[str, tuple[Hunk, ...]]:
    hunks: dict[str, tuple[Hunk, ...]] = {}
    for op in parse(patch_text).operations:
        if isinstance(op, UpdateFile | CopyFile):
            for path in (op.path, op.move_to if isinstance(op, UpdateFile) else op.copy_to):
                if path is not None:
                    hunks[path] = hunks.get(path, ()) + op.hunks
    return hunks


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(
        ["git", "-C", str(root), *args],
        capture_output=True,
        env={**os.environ, **GIT_ENV},
        check=False,
    )
    if check and result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {result.stderr.decode(errors='replace')}")
    return result


def _random_lines(rng: random.Random, count: int, tag: str) -> list[str]:
    return [
        rng.choice(VOCABULARY) if rng.random() < 0.7 else f"{tag} line {rng.randrange(1000)}"
        for _ in range(count)
    ]


def _text(lines: list[str], final_newline: bool) -> bytes:
    if not lines:
        return b""
    return ("\n".join(lines) + ("\n" if final_newline else "")).encode()


def _lines(data: bytes) -> tuple[list[str], bool]:
    text = data.decode()
    if not text:
        return [], True
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), text.endswith("\n")


def _edit(rng: random.Random, data: bytes, tag: str) -> bytes:
    lines, final_newline = _lines(data)
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        at = rng.randint(0, len(lines))
        size = rng.randint(1, 3)
        if roll < 0.35 and lines:
            lines[at : at + size] = _random_lines(rng, rng.randint(0, 3), tag)
        elif roll < 0.55 and lines:
            del lines[at : at + size]
        elif roll < 0.85:
            lines[at:at] = _random_lines(rng, size, tag)
        else:
            final_newline = not final_newline
    return _text(lines, final_newline)


def _base(rng: random.Random) -> Files:
    base = Files()
    for name in rng.sample(NAMES, rng.randint(1, 3)):
        lines = _random_lines(rng, rng.randint(0, 30), "base")
        base.files[name] = (_text(lines, rng.random() > 0.2), rng.random() < 0.15)
    return base


def _change(rng: random.Random, base: Files) -> Files:
    new = Files(dict(base.files))
    for path, (data, executable) in list(base.files.items()):
        roll = rng.random()
        if roll < 0.6:
            new.files[path] = (_edit(rng, data, "new"), executable)
        elif roll < 0.67:
            del new.files[path]
        elif roll < 0.77:
            free = [n for n in NAMES if n not in new.files]
            if free:
                del new.files[path]
                target = rng.choice(free)
                new.files[target] = (
                    _edit(rng, data, "new") if rng.random() < 0.5 else data,
                    executable,
                )
        elif roll < 0.84:
            free = [n for n in NAMES if n not in new.files]
            if free:
                new.files[rng.choice(free)] = (data, executable)  # a copy
                new.files[path] = (_edit(rng, data, "new"), executable)
        elif roll < 0.92:
            new.files[path] = (
                data if rng.random() < 0.5 else _edit(rng, data, "new"),
                not executable,
            )
    if rng.random() < 0.25:
        free = [n for n in NAMES if n not in new.files]
        if free:
            lines = _random_lines(rng, rng.randint(0, 8), "added")
            new.files[rng.choice(free)] = (_text(lines, rng.random() > 0.2), rng.random() < 0.2)
    if new.files == base.files:
        path = rng.choice(sorted(base.files))
        data, executable = base.files[path]
        new.files[path] = (
            data + b"appended\n" if data.endswith(b"\n") or not data else data + b"\n",
            executable,
        )
    return new


def _drift(rng: random.Random, base: Files, new: Files) -> Files:
    """The base with lines inserted and deleted in the files the patch edits."""
    drifted = Files(dict(base.files))
    for path, (data, executable) in base.files.items():
        if new.files.get(path) == (data, executable) or not data:
            continue
        lines, final_newline = _lines(data)
        for _ in range(rng.randint(1, 2)):
            # Mostly at the top (every hunk moves by the same offset), sometimes anywhere (some
            # hunks move, and some lose their context).
            roll = rng.random()
            at = 0 if roll < 0.6 else rng.randint(0, len(lines))
            if roll < 0.4 or 0.6 <= roll < 0.8:
                lines[at:at] = _random_lines(rng, rng.randint(1, 4), "drift")
            elif lines:
                del lines[at : at + rng.randint(1, 2)]
        drifted.files[path] = (_text(lines, final_newline), executable)
    return drifted


def _snapshot(root: Path) -> dict[str, tuple[bytes, bool]]:
    tree: dict[str, tuple[bytes, bool]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            full = Path(dirpath) / name
            executable = bool(full.stat().st_mode & stat.S_IXUSR)
            tree[full.relative_to(root).as_posix()] = (full.read_bytes(), executable)
    return tree


class _DirReader:
    def __init__(self, root: Path) -> None:
        self.root = root

    def kind(self, path: str) -> EntryKind | None:
        full = self.root / path
        if full.is_symlink():
            return "symlink"
        if full.is_dir():
            return "dir"
        return "file" if full.is_file() else None

    def read(self, path: str) -> tuple[bytes, int]:
        full = self.root / path
        return full.read_bytes(), MODE_EXEC if full.stat().st_mode & stat.S_IXUSR else MODE_FILE


def _ours(root: Path, patch_text: str) -> Outcome:
    tree = _snapshot(root)
    try:
        tree_plan = plan(parse(patch_text), _DirReader(root))
    except ApplyOnceError as exc:
        return Outcome(None, exc.one_line())
    for path in tree_plan.removed:
        tree.pop(path, None)
    for change in tree_plan.changes:
        if change.content is None:
            tree.pop(change.path, None)
        else:
            tree[change.path] = (change.content, change.mode == MODE_EXEC)
    lenient = any(
        level is not MatchLevel.EXACT
        for change in tree_plan.changes
        for level in change.match_levels
    )
    return Outcome(tree, lenient=lenient)


def _git_apply(root: Path, patch_file: Path, apply_args: list[str]) -> Outcome:
    result = _git(root, "apply", *apply_args, str(patch_file), check=False)
    if result.returncode != 0:
        return Outcome(None, result.stderr.decode(errors="replace").strip().splitlines()[-1])
    return Outcome(_snapshot(root))


def run_case(seed: int, *, drift: bool = False, workdir: Path | None = None) -> Case:
    """Build, diff and apply one seeded case; see the module docstring."""
    rng = random.Random(seed)
    base = _base(rng)
    new = _change(rng, base)
    context = rng.choice([3, 3, 3, 1, 5, 0])
    diff_args = ["--cached", f"-U{context}"]
    apply_args: list[str] = []
    if rng.random() < 0.5:
        diff_args.append(rng.choice(["-M", "-C", "-C -C"]))
    diff_args.append(
        rng.choice(["--diff-algorithm=myers", "--minimal", "--patience", "--histogram"])
    )
    prefix_style = rng.random()
    config: list[str] = []
    if prefix_style < 0.15:
        diff_args.append("--no-prefix")
    elif prefix_style < 0.25:
        config = ["-c", "diff.mnemonicPrefix=true"]
    if context == 0:
        apply_args.append("--unidiff-zero")
    diff_args = [arg for group in diff_args for arg in group.split(" ")]
    owned = workdir is None
    top = Path(tempfile.mkdtemp(prefix="aodiff-")) if owned else workdir
    assert top is not None
    try:
        repo = top / f"case-{seed}"
        if repo.exists():
            shutil.rmtree(repo)
        repo.mkdir(parents=True)
        _git(repo, "init", "-q")
        _git(repo, "config", "core.autocrlf", "false")
        base.write(repo)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "--allow-empty", "-m", "base")
        for path in base.files:
            (repo / path).unlink()
        new.write(repo)
        _git(repo, "add", "-A")
        patch_text = _git(repo, *config, "diff", *diff_args).stdout.decode("utf-8")
        _git(repo, "reset", "-q", "--hard")
        _git(repo, "clean", "-qfdx")
        start = base
        if drift:
            start = _drift(rng, base, new)
            for path in base.files:
                (repo / path).unlink()
            start.write(repo)
        patch_file = top / f"case-{seed}.diff"
        patch_file.write_text(patch_text, encoding="utf-8")
        ours = _ours(repo, patch_text)
        git = _git_apply(repo, patch_file, apply_args)
        # A --no-prefix diff read with -p1 does not name the files it was made from.
        intended = None if drift or "--no-prefix" in diff_args else new.files
        return Case(seed, drift, diff_args, apply_args, patch_text, git, ours, intended)
    finally:
        if owned:
            shutil.rmtree(top, ignore_errors=True)
