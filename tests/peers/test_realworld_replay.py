"""Replay real history: every commit of a window of pypa/packaging, as ``git diff -M P C`` and as a
Codex patch, must land as one commit with C's exact tree, or be refused cleanly when applyonce must
refuse it (binary content, symlinks, submodules); a synthetic history covers what packaging lacks
(CRLF, modes, non-UTF-8 text).

The bundle is ``../shared/realworld/packaging.bundle``; without it the window is skipped, unless
``APPLYONCE_REQUIRE_REALWORLD=1`` (CI sets it when the bundle is there), then that is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.peers.codex_differential import find_codex_binary
from tests.peers.realworld import (
    BUNDLE,
    HARD_STEPS,
    NO_CODEX,
    REFUSED,
    Format,
    Result,
    build_hard_history,
    diffs,
    non_merge_commits,
    parse_git_diff,
    replay,
    replay_as_model,
)

# Commits [186, 420) of the history, oldest first (Dec 2018 - Jul 2021): files without a final newline, rst
# headings, renames with edits, the manylinux/musllinux work with binary ELF fixtures added
# (refused) and renamed, new executable files. test_window_is_hard checks it still holds those.
WINDOW = (186, 420)
# Found at import: the autouse fixture points HOME (where the binary is cached) at a temp dir.
CODEX_BINARY = find_codex_binary()
CHUNKS = 6
HARD_KINDS = frozenset(
    {"binary", "rename", "rename with edits", "new executable", "rst heading", "no final newline"}
)
FORMATS: tuple[Format, ...] = ("unified", "codex")


def _bundle() -> Path:
    if not BUNDLE.exists():
        if os.environ.get("APPLYONCE_REQUIRE_REALWORLD") == "1":
            pytest.fail(f"APPLYONCE_REQUIRE_REALWORLD=1 but {BUNDLE} is missing")
        pytest.skip(f"{BUNDLE} is not there")
    return BUNDLE


@pytest.fixture(scope="session")
def window() -> list[str]:
    commits = non_merge_commits(_bundle())
    start, stop = WINDOW
    assert len(commits) >= stop, f"the bundle has {len(commits)} non-merge commits"
    return commits[start:stop]


def _report(results: list[Result]) -> str:
    return "\n".join(r.line()[:600] for r in results if r.outcome != "exact")


def _assert_replayed(results: list[Result], commits: list[str], fmt: Format) -> None:
    assert [r.commit for r in results] == commits
    failed = [r for r in results if r.outcome == "failed"]
    assert not failed, f"{len(failed)} of {len(results)} failed:\n{_report(failed)}"
    # The reasons a commit may be skipped for; anything else is a failure.
    for r in results:
        if r.outcome == "skipped":
            allowed = (REFUSED,) if fmt == "unified" else (REFUSED, NO_CODEX)
            assert r.reason.startswith(allowed), r.line()


# .ci/run replays half the chunks of each format, the other half at the next commit
# (tests/conftest.py).
@pytest.mark.sampled(every=4, by="fmt")
@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_window_replays_exactly(window: list[str], fmt: Format, chunk: int) -> None:
    """Each chunk clones the bundle once; xdist spreads the chunks over the workers."""
    size = -(-len(window) // CHUNKS)
    commits = window[chunk * size : (chunk + 1) * size]
    results = replay(_bundle(), commits, fmt)
    _assert_replayed(results, commits, fmt)


def test_window_as_a_model_writes_it_is_placed_where_codex_reproduces_it(window: list[str]) -> None:
    """Each window commit as the Codex patch a model writes (three context lines, an ``@@`` line
    naming the def or class): wherever the real Codex reproduces the commit, applyonce does too;
    never an ambiguity refusal where the patch's anchor and order decide, never a wrong file."""
    binary = CODEX_BINARY
    if binary is None:
        if os.environ.get("APPLYONCE_REQUIRE_CODEX") == "1":
            pytest.fail("the Codex binary is missing; APPLYONCE_REQUIRE_CODEX=1")
        pytest.skip("the Codex binary is missing (set APPLYONCE_CODEX_BIN or run .ci/run)")
    results = replay_as_model(_bundle(), window, binary)
    bad = [
        f"{commit[:12]} {outcome}: {detail}"
        for commit, outcome, detail in results
        if "applyonce wrong" in outcome
        or (outcome.startswith("applyonce refused") and outcome.endswith("Codex exact"))
    ]
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="session")
def window_kinds(window: list[str]) -> dict[str, set[str]]:
    """Each window commit's hard kinds, read from its ``git diff``."""
    return {c: _kinds(diff) for c, diff in zip(window, diffs(_bundle(), window), strict=True)}


def test_window_is_hard(window_kinds: dict[str, set[str]]) -> None:
    """The window keeps the kinds of commit that broke replays before, or it tests little."""
    missing = HARD_KINDS - set().union(*window_kinds.values())
    assert not missing, f"the window has no {sorted(missing)} commit any more"


def _kinds(diff: bytes) -> set[str]:
    kinds = set()
    if b"\n\\ No newline at end of file" in diff:
        kinds.add("no final newline")
    for fp in parse_git_diff(diff):
        if fp.binary:
            kinds.add("binary")
        if fp.old_path and fp.new_path and fp.old_path != fp.new_path:
            kinds.add("rename with edits" if fp.hunks else "rename")
        if fp.old_path is None and fp.new_mode == "100755":
            kinds.add("new executable")
        if (
            fp.new_path
            and fp.new_path.endswith(".rst")
            and any(
                kind == "+" and text.startswith(b"===") for h in fp.hunks for kind, text in h.lines
            )
        ):
            kinds.add("rst heading")
    return kinds


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_few_through_the_cli(
    window: list[str], window_kinds: dict[str, set[str]], fmt: Format
) -> None:
    """The real ``applyonce apply`` process, on the window's first commit and on the first of each
    hard kind, gives what the API gives: exact trees, clean refusals."""
    picks = {window[0]: None}
    for kind in sorted(HARD_KINDS):
        picks.setdefault(next(c for c in window if kind in window_kinds[c]), None)
    commits = list(picks)
    results = replay(_bundle(), commits, fmt, cli=run_cli)
    _assert_replayed(results, commits, fmt)


# What the synthetic history must give, by commit message: the skip reason (prefix), or "" for an
# exact replay. Derived from the README's rules, not from a run.
HARD_EXPECTED: dict[Format, dict[str, str]] = {
    "unified": {
        "edit a binary file": REFUSED + "binary",
        "add a symlink": REFUSED + "symlink",
        "add a submodule": REFUSED + "submodule",
        "delete the binary file": REFUSED + "binary",
        "base": REFUSED + "binary",
    },
    "codex": {
        "base": NO_CODEX + "binary",
        "add a CRLF file": NO_CODEX + "CRLF line endings",
        "LF to CRLF": NO_CODEX + "line endings",
        "CRLF to LF": NO_CODEX + "line endings",
        "edit the last line, still no final newline": NO_CODEX + "no final newline",
        "mode change only": NO_CODEX + "mode change",
        "mode change and edit": NO_CODEX + "mode change",
        "add an executable file": NO_CODEX + "mode of a new file",
        "edit non-UTF-8 text": NO_CODEX + "non-UTF-8 text",
        "edit a binary file": NO_CODEX + "binary",
        "add a symlink": NO_CODEX + "symlink",
        "add a submodule": NO_CODEX + "submodule",
    },
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_hard_cases(tmp_path: Path, fmt: Format) -> None:
    """CRLF, LF<->CRLF, mixed endings, modes, symlinks, a submodule, non-UTF-8 text, a BOM."""
    commits = build_hard_history(tmp_path / "hard")
    results = replay(tmp_path / "hard", commits, fmt)
    failed = [r for r in results if r.outcome == "failed"]
    assert not failed, "\n".join(r.line()[:600] for r in failed)
    got = {step[0]: r.reason for step, r in zip(HARD_STEPS, results, strict=True)}
    want = {step[0]: HARD_EXPECTED[fmt].get(step[0], "") for step in HARD_STEPS}
    assert got == want
