"""Through ``applyonce serve`` a call gives what it gives in its own process, byte for byte: the
same stdout, stderr and exit code, the same commit message and tree, the same receipt and files
(docs/design.md §13). Each case runs on two repositories built the same way, one call through the
server, one in process; commit IDs and times are the only differences, and are named before the
comparison."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Repo, git, make_repo, snapshot
from tests.e2e.serve.support import IN_PROCESS, THROUGH, call, serving

FILES = {
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
    "src/util.py": "VALUE = 1\n",
    "README.md": "# demo\n",
}
PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
ADD = "*** Begin Patch\n*** Add File: notes.md\n+notes\n*** End Patch\n"
BAD = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 9\n+VALUE = 2\n*** End Patch\n"


def _normalised(repo: Path, text: str, *, commits_named: bool = True) -> str:
    commits = []
    if commits_named and (repo / ".git").exists():
        commits = git(repo, "rev-list", "--all", "--reflog").split()
    for n, sha in enumerate(commits):
        text = text.replace(sha, f"<commit {n}>").replace(sha[:12], f"<commit {n}>")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "<time>", text)
    # a receipt's output_sha256 hashes an error that names the repository's folder
    text = re.sub(
        r'"(execution_id|duration_ms|output_sha256)": ("[0-9a-f]{32}"|"[0-9a-f]{64}"|\d+)',
        r'"\1": <x>',
        text,
    )
    return text.replace(str(repo), "<repo>")


def _outcome(repo: Path, run: object, *, commits_named: bool = True) -> dict[str, object]:
    state = repo / ".git" / "applyonce" / "receipts"
    receipts = {
        p.name: _normalised(repo, p.read_text(), commits_named=commits_named)
        for p in sorted(state.glob("*.json"))
    }
    head = git(repo, "rev-parse", "-q", "--verify", "HEAD", check=False).strip()
    return {
        "run": (
            run.returncode,
            _normalised(repo, run.stdout, commits_named=commits_named),
            _normalised(repo, run.stderr, commits_named=commits_named),
        ),  # type: ignore[attr-defined]
        "message": git(repo, "log", "-1", "--format=%B", check=False) if head else "",
        "tree": git(repo, "rev-parse", "HEAD^{tree}", check=False).strip() if head else "",
        "receipts": receipts,
        "files": snapshot(repo),
        "status": git(repo, "status", "--porcelain"),
    }


Setup = Callable[[Path], None]


def _plain(root: Path) -> None:
    make_repo(root, FILES)


def _unborn(root: Path) -> None:
    make_repo(root)


def _detached(root: Path) -> None:
    make_repo(root, FILES).git("checkout", "-q", "--detach")


def _dirty(root: Path) -> None:
    make_repo(root, FILES)
    (root / "src/util.py").write_text("VALUE = 5\n")


CASES: dict[str, tuple[Setup, str, list[str], list[str]]] = {
    # name: (setup, command, arguments, what runs first in both: arguments of an earlier call)
    "commit --json": (_plain, "applyonce", ["apply", "-", "--json"], []),
    "commit summary": (_plain, "applyonce", ["apply", "-"], []),
    "replay": (_plain, "applyonce", ["apply", "-", "--json"], ["apply", "-"]),
    "rejected": (_plain, "applyonce", ["apply", "-", "--json", "BAD"], []),
    "usage": (_plain, "applyonce", ["apply", "-", "--bogus"], []),
    "dirty path": (_dirty, "applyonce", ["apply", "-"], []),
    "detached HEAD": (_detached, "applyonce", ["apply", "-"], []),
    "unborn branch": (_unborn, "applyonce", ["apply", "-", "ADD"], []),
    "apply_patch": (_plain, "apply_patch", ["PATCH"], []),
    "apply_patch replay": (_plain, "apply_patch", ["PATCH"], ["PATCH"]),
    "apply_patch rejected": (_plain, "apply_patch", ["BAD"], []),
}
PATCHES = {"PATCH": PATCH, "BAD": BAD, "ADD": ADD}


def _run(kind: str, args: list[str], repo: Path, env: dict[str, str]):  # type: ignore[no-untyped-def]
    patch = next((PATCHES[a] for a in args if a in PATCHES), PATCH)
    args = [a for a in args if a not in PATCHES or kind == "apply_patch"]
    args = [PATCHES.get(a, a) for a in args]
    if kind == "applyonce":
        args = [*args[:2], "--repo", str(repo), *args[2:]]
    return call(kind, args, input=patch if kind == "applyonce" else b"", cwd=repo, env=env)


@pytest.mark.sampled(every=2)  # .ci/run: half the cases, the other half at the next commit
@pytest.mark.parametrize("case", list(CASES))
def test_through_the_server_as_in_process(tmp_path: Path, case: str) -> None:
    setup, kind, args, before = CASES[case]
    served, alone = tmp_path / "a" / "repo", tmp_path / "b" / "repo"
    setup(served)
    setup(alone)
    with serving(served):
        outcomes = []
        for repo, env in ((served, THROUGH), (alone, IN_PROCESS)):
            if before:
                _run(kind, before, repo, env)
            outcomes.append(_outcome(repo, _run(kind, args, repo, env)))
    through, in_process = outcomes
    assert through == in_process
    assert through["run"][0] in (0, 1, 2, 4)  # type: ignore[index]


def test_a_call_from_a_subfolder_and_a_linked_worktree_uses_the_repositorys_one_server(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", "-b", "side", str(linked))
    with serving(repo.path):
        inside = call("apply_patch", [PATCH], cwd=repo.path / "src" / "..", env=THROUGH)
        assert (inside.returncode, inside.stderr) == (0, ""), inside.stderr
        there = call("apply_patch", [ADD], cwd=linked, env=THROUGH)
        assert there.returncode == 0, there.stderr
    assert (linked / "notes.md").read_text() == "notes\n"
    assert not (repo.path / "notes.md").exists()
    assert (
        Repo(repo.path)
        .git("log", "-1", "--format=%s", "side")
        .startswith("apply_patch: A notes.md")
    )
    assert not (repo.path / ".git" / "worktrees" / "linked" / "applyonce").exists()


def test_a_shallow_clone_through_the_server_as_in_process(tmp_path: Path) -> None:
    origin = make_repo(tmp_path / "origin", FILES)
    origin.git("commit", "-q", "--allow-empty", "-m", "second")
    outcomes = []
    for name, env in (("a", THROUGH), ("b", IN_PROCESS)):
        clone = tmp_path / name / "clone"
        clone.parent.mkdir()
        git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin.path}", str(clone))
        with serving(clone):
            outcomes.append(_outcome(clone, call("apply_patch", [PATCH], cwd=clone, env=env)))
    assert outcomes[0] == outcomes[1]


def test_a_revert_through_the_server_as_in_process(tmp_path: Path) -> None:
    outcomes = []
    for name, env in (("a", THROUGH), ("b", IN_PROCESS)):
        repo = tmp_path / name / "repo"
        _plain(repo)
        with serving(repo):
            applied = call("applyonce", ["apply", "-", "--repo", str(repo), "--json"], input=PATCH)
            call_id = json.loads(applied.stdout)["call_id"]
            undo = call("applyonce", ["revert", call_id, "--repo", str(repo)], env=env)
            outcome = _outcome(repo, undo, commits_named=False)
            receipts: dict[str, str] = outcome.pop("receipts")  # type: ignore[assignment]
            # The call's receipt, then the revert's (their file names are their IDs).
            texts = sorted(receipts.values(), key=lambda text: "revert" in text)
            outcomes.append(_ids_named(repr([sorted(outcome.items()), texts])))
    # A revert's identity holds the reverted commit's ID, which differs between the two
    # repositories as their commits' times do: every ID is named by its first appearance.
    assert outcomes[0] == outcomes[1]
    assert "('run', (0, " in outcomes[0]


def _ids_named(text: str) -> str:
    names: dict[str, str] = {}
    return re.sub(
        r"\b[0-9a-f]{12}(?:[0-9a-f]{28}(?:[0-9a-f]{24})?)?\b",
        lambda m: names.setdefault(m.group(0), f"<id {len(names)}>"),
        text,
    )
