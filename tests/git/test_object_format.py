"""A SHA-256 repository (``git init --object-format=sha256``): libgit2, through which applyonce
reads and writes every object, reads SHA-1 repositories only. Every command refuses it with one
line (exit 2) and writes nothing: no state directory, no object, no ref."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import git, run_cli, snapshot


def _sha256_repo(root: Path) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main", "--object-format=sha256")
    (root / "a.txt").write_text("a\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def _everything(root: Path) -> dict[str, bytes]:
    """Every file under the repository, ``.git`` included."""
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize(
    "command",
    [
        ["apply", "-", "--repo", "{repo}"],
        ["apply", "-", "--repo", "{repo}", "--json"],
        ["recover", "--repo", "{repo}"],
        ["audit", "--repo", "{repo}"],
        ["log", "--repo", "{repo}"],
    ],
    ids=["apply", "apply-json", "recover", "audit", "log"],
)
def test_a_sha256_repository_is_refused_with_one_line_and_nothing_written(
    tmp_path: Path, command: list[str]
) -> None:
    repo = _sha256_repo(tmp_path / "repo")
    before = _everything(repo)
    patch = "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch\n"
    result = run_cli(*(part.format(repo=repo) for part in command), input=patch)
    assert result.returncode == 2, result
    if "--json" in command:
        assert orjson.loads(result.stdout)["error"]["kind"] == "unsupported-object-format"
    else:
        assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("error: ") and "SHA-256 repository" in result.stderr
    assert "SHA-1 repositor" in result.stderr  # what applyonce works in
    assert "Traceback" not in result.stderr
    assert _everything(repo) == before
    assert not (repo / ".git" / "applyonce").exists()
    assert snapshot(repo) == {"a.txt": b"a\n"}
    fsck = subprocess.run(["git", "-C", str(repo), "fsck"], capture_output=True, check=False)
    assert fsck.returncode == 0
