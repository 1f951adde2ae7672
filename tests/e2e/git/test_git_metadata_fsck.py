"""Every commit applyonce makes passes ``git fsck --strict`` (issue 11, item 4).

For each rule: the same file committed by plain git makes the real ``git fsck --strict`` complain
with that rule's message ID, and applyonce refuses the patch (exit 1, one line naming the rule)
and leaves the branch as it was, with ``git fsck --strict`` still clean.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from applyonce.adapters.cli import app
from tests.conftest import Repo, Run, apply, make_repo


def _modules(line: str, header: str = '[submodule "lib"]\n\tpath = lib\n') -> str:
    return f"{header}\t{line}\n"


# (fsck message ID, path, content); git fsck --strict fails on each.
FSCK_ERRORS = [
    ("gitmodulesUrl", ".gitmodules", _modules("url = --upload-pack=touch${IFS}pwned")),
    ("gitmodulesUrl", ".gitmodules", _modules("url = ./lib%0ahost=evil.example")),
    ("gitmodulesUrl", ".gitmodules", _modules("url = https://user%0a@example.com/lib.git")),
    ("gitmodulesUrl", ".gitmodules", _modules("url = https:///evil.example/lib.git")),
    ("gitmodulesUrl", ".gitmodules", _modules("url = ../../:evil.example/lib")),
    ("gitmodulesPath", ".gitmodules", '[submodule "lib"]\n\tpath = -lib\n\turl = ./lib\n'),
    ("gitmodulesName", ".gitmodules", '[submodule "../../hooks"]\n\tpath = lib\n\turl = ./lib\n'),
    ("gitmodulesUpdate", ".gitmodules", _modules("update = !touch pwned")),
    # Names HFS+ and NTFS fold to .gitmodules, in any folder: git checks them too.
    ("gitmodulesUrl", "sub/.GitModules", _modules("url = -lib")),
    ("gitmodulesUrl", "gitmod~1", _modules("url = -lib")),
    ("gitmodulesUrl", "GI7EBA~1", _modules("url = -lib")),
    ("gitmodulesUrl", ".gitmodules.", _modules("url = -lib")),
    ("gitattributesLineLength", ".gitattributes", "*.txt" + " " * 2100 + "text\n"),
]


def _git(cwd: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, check=False)


def _plain_git_fsck(tmp_path: Path, entries: list[tuple[str, str, bytes]]) -> tuple[int, str]:
    """Commit ``(mode, path, content)`` entries with plain git in a new repository (as git's
    plumbing allows, unchecked), then run ``git fsck --strict`` there."""
    plain = tmp_path / "plain"
    _git(tmp_path, "init", "-q", str(plain))
    lines = []
    for mode, path, content in entries:
        blob = _git(plain, "hash-object", "-w", "--stdin", input=content).stdout.decode().strip()
        lines.append(f"{mode} blob {blob}\t{path}\n")
    if any("/" in path for _, path, _ in entries):
        for line in lines:
            mode_type, path = line.rstrip("\n").split("\t")
            mode, _, blob = mode_type.split()
            _git(plain, "update-index", "--add", "--cacheinfo", f"{mode},{blob},{path}")
        tree = _git(plain, "write-tree").stdout.decode().strip()
    else:
        tree = _git(plain, "mktree", input="".join(lines).encode()).stdout.decode().strip()
    commit = _git(plain, "commit-tree", "-m", "plain", tree).stdout.decode().strip()
    _git(plain, "update-ref", "refs/heads/main", commit)
    fsck = _git(plain, "fsck", "--strict")
    return fsck.returncode, fsck.stderr.decode() + fsck.stdout.decode()


def _add_patch(path: str, content: str) -> str:
    body = "".join(f"+{line}\n" for line in content.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def _apply_in_process(repo: Repo, patch: str) -> Run:
    """The CLI in this process (typer's runner): the many cases below stay fast."""
    result = CliRunner().invoke(app, ["apply", "-", "--repo", str(repo.path)], input=patch)
    return Run(result.exit_code, result.stdout, result.stderr)


def _assert_refused(repo: Repo, patch: str, rule: str, *, in_process: bool = False) -> None:
    head = repo.head()
    result = _apply_in_process(repo, patch) if in_process else apply(repo, patch)
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert f"git fsck: {rule}" in result.stderr
    assert "Traceback" not in result.stderr
    assert repo.head() == head
    assert repo.git("fsck", "--strict").strip() == ""


@pytest.mark.parametrize(
    ("rule", "path", "content"),
    FSCK_ERRORS,
    ids=[f"{r}-{p}-{i}" for i, (r, p, _) in enumerate(FSCK_ERRORS)],
)
def test_what_git_fsck_strict_refuses_is_refused(
    repo: Repo, tmp_path: Path, rule: str, path: str, content: str
) -> None:
    code, report = _plain_git_fsck(tmp_path, [("100644", path, content.encode())])
    assert code != 0 and f"{rule}: " in report, report
    # One case through a real process; the others in this one, to stay fast.
    _assert_refused(repo, _add_patch(path, content), rule, in_process=content != FSCK_ERRORS[0][2])


def test_an_unparsable_gitmodules_is_refused(repo: Repo, tmp_path: Path) -> None:
    content = '[submodule "lib"]\n\tpath = lib\n\turl = "./lib\n'  # an unterminated quote
    # git reports it (gitmodulesParse is an 'info' message: a warning, not a failure).
    code, report = _plain_git_fsck(tmp_path, [("100644", ".gitmodules", content.encode())])
    assert code == 0 and "warning in blob" in report and "gitmodulesParse: " in report, report
    _assert_refused(repo, _add_patch(".gitmodules", content), "gitmodulesParse", in_process=True)


def test_an_absolute_submodule_name_is_refused(repo: Repo) -> None:
    # Stricter than git, which only refuses '..' components in a name.
    content = '[submodule "/etc/lib"]\n\tpath = lib\n\turl = ./lib\n'
    _assert_refused(repo, _add_patch(".gitmodules", content), "gitmodulesName", in_process=True)


def test_a_gitmodules_symlink_is_refused(repo: Repo, tmp_path: Path) -> None:
    code, report = _plain_git_fsck(tmp_path, [("120000", ".gitmodules", b"elsewhere")])
    assert code != 0 and "gitmodulesSymlink: " in report, report
    diff = (
        "diff --git a/.gitmodules b/.gitmodules\nnew file mode 120000\n--- /dev/null\n"
        "+++ b/.gitmodules\n@@ -0,0 +1 @@\n+elsewhere\n\\ No newline at end of file\n"
    )
    head = repo.head()
    result = apply(repo, diff)
    assert result.returncode == 1 and "symbolic link" in result.stderr, result
    assert repo.head() == head


@pytest.mark.parametrize("name", [".GIT.", ".git.", "git~1", "GIT~1", ".g\u200cit", ".Git:stream"])
def test_names_file_systems_fold_to_dot_git_are_refused(
    repo: Repo, tmp_path: Path, name: str
) -> None:
    code, report = _plain_git_fsck(tmp_path, [("100644", name, b"x\n")])
    assert code != 0 and "hasDotgit: " in report, report
    head = repo.head()
    result = _apply_in_process(repo, _add_patch(name, "x"))
    assert result.returncode == 1 and "is inside .git" in result.stderr, result
    assert repo.head() == head and repo.git("fsck", "--strict").strip() == ""


def test_a_valid_gitmodules_is_committed_and_passes_fsck(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "valid", {"README.md": "# x\n"})
    content = (
        "# submodules\n"
        '[submodule "lib/one"]\n'
        "\tpath = lib/one\n"
        "\turl = https://example.com/one.git ; a comment\n"
        "\tupdate = rebase\n"
        '[submodule "two"]\n'
        '\tpath = "lib/two" \n'
        "\turl = ../two.git\n"
        "\tbranch = main\n"
        '[submodule "three"]\n\turl = git@example.com:three.git\n\tshallow\n'
    )
    result = apply(repo, _add_patch(".gitmodules", content))
    assert result.returncode == 0, result
    assert repo.git("fsck", "--strict").strip() == ""
    listed = repo.git("config", "--file", ".gitmodules", "--list")
    assert "submodule.two.path=lib/two" in listed and "submodule.three.shallow" in listed
