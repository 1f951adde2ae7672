"""Every path rule of ``paths.py``: each refusal is its own test, named for the case."""

from __future__ import annotations

import pytest

from applyonce.core.paths import (
    MAX_COMPONENT_BYTES,
    MAX_PATH_BYTES,
    UnsafePathError,
    normalise_path,
    parents,
)

REPO = "/home/dev/repo"


def refused(raw: str, *, repo_root: str | None = REPO) -> UnsafePathError:
    with pytest.raises(UnsafePathError) as info:
        normalise_path(raw, repo_root=repo_root)
    err = info.value
    assert err.kind == "unsafe-path"
    assert err.details["path"] == raw
    assert "\n" not in err.one_line()
    return err


# ---------------------------------------------------------------- accepted, normalised


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a.py", "a.py"),
        ("src/pkg/mod.py", "src/pkg/mod.py"),
        ("./a//b", "a/b"),
        ("  spaced.txt  ", "spaced.txt"),
        ("dir with space/f.txt", "dir with space/f.txt"),
        ("...", "..."),
        ("..foo/bar..", "..foo/bar.."),
        (".gitignore", ".gitignore"),
        (".github/workflows/ci.yml", ".github/workflows/ci.yml"),
        ("sub/.gitmodules", "sub/.gitmodules"),
        ("git/x", "git/x"),
        ("git~2/x", "git~2/x"),
        ("naïve/日本語.txt", "naïve/日本語.txt"),
    ],
)
def test_accepted_paths_are_normalised(raw: str, expected: str) -> None:
    assert normalise_path(raw, repo_root=REPO) == expected


def test_absolute_path_inside_repo_becomes_relative() -> None:
    assert normalise_path(f"{REPO}/src/a.py", repo_root=REPO) == "src/a.py"
    assert normalise_path(f"{REPO}/./src//a.py", repo_root=REPO) == "src/a.py"


def test_repo_root_with_trailing_slash() -> None:
    assert normalise_path(f"{REPO}/src/a.py", repo_root=REPO + "/") == "src/a.py"


# ---------------------------------------------------------------- refused


@pytest.mark.parametrize("raw", ["..", "../etc/passwd", "a/../../b", "a/..", "a/../b", "./../x"])
def test_dotdot_component_is_refused(raw: str) -> None:
    assert "'..'" in refused(raw).message


def test_absolute_path_outside_repo_is_refused() -> None:
    assert "outside the repository" in refused("/etc/passwd").message


def test_absolute_path_in_a_sibling_with_the_same_prefix_is_refused() -> None:
    refused(REPO + "-other/a.py")
    refused(REPO + "x")


def test_absolute_path_escaping_with_dotdot_is_refused() -> None:
    # refused as an absolute path outside the repo, before the '..' component rule is reached
    assert "outside the repository" in refused(f"{REPO}/../secret").message
    assert "outside the repository" in refused(f"{REPO}/a/../../secret").message


def test_absolute_path_without_a_repo_root_is_refused() -> None:
    refused(f"{REPO}/a.py", repo_root=None)


def test_absolute_path_naming_the_repo_root_is_refused() -> None:
    assert "repository root" in refused(REPO).message
    refused(REPO + "/")


@pytest.mark.parametrize("raw", ["", "   ", "/"])
def test_empty_path_is_refused(raw: str) -> None:
    refused(raw, repo_root=None)


@pytest.mark.parametrize("raw", [".", "./", ".//."])
def test_path_naming_the_repo_root_is_refused(raw: str) -> None:
    assert "repository root" in refused(raw).message


@pytest.mark.parametrize(
    "raw",
    [
        ".git",
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.git/HEAD",
        ".GIT/config",
        ".Git/config",
        ".git./config",
        ".git../config",
        ".git /config",
        ".GiT . /config",
        "git~1/config",
        "GIT~1/config",
        "sub/Git~1",
        "./.git//objects",
    ],
)
def test_git_directory_component_is_refused(raw: str) -> None:
    assert "inside .git" in refused(raw).message


@pytest.mark.parametrize("raw", ["a\x00b", "\x00", "a/b\x00.txt"])
def test_nul_byte_is_refused(raw: str) -> None:
    assert "NUL" in refused(raw).message


@pytest.mark.parametrize(
    "raw",
    [
        "a\nb",
        "a\rb",
        "a\tb",
        "\x1b[31mred",
        "a\x7fb",
        "a\x01",
        # C1 controls (regression: only C0 and DEL were refused)
        "a\x85b",
        "a\x9b31mb",
    ],
)
def test_control_character_is_refused(raw: str) -> None:
    assert "control character" in refused(raw).message


def test_control_character_is_refused_even_at_the_edges() -> None:
    # strip() would remove "\n" and "\t": the check runs on the raw path first.
    refused("a.txt\n")
    refused("\ta.txt")


def _path_of(total_bytes: int) -> str:
    """A path of exactly ``total_bytes`` bytes whose components are all within the limit."""
    components = ["d" * MAX_COMPONENT_BYTES] * 15 + ["e" * 200]
    rest = total_bytes - len("/".join(components)) - 1
    path = "/".join([*components, "f" * rest])
    assert len(path.encode()) == total_bytes
    return path


def test_path_longer_than_the_limit_is_refused() -> None:
    assert "longer than" in refused(_path_of(MAX_PATH_BYTES + 1)).message


def test_path_at_the_limit_is_accepted() -> None:
    raw = _path_of(MAX_PATH_BYTES)
    assert normalise_path(raw) == raw


def test_component_longer_than_255_bytes_is_refused() -> None:
    assert "component longer than" in refused("a/" + "x" * (MAX_COMPONENT_BYTES + 1)).message


def test_component_limit_counts_utf8_bytes() -> None:
    ok = "é" * (MAX_COMPONENT_BYTES // 2)  # 254 bytes
    assert normalise_path(ok) == ok
    refused("é" * (MAX_COMPONENT_BYTES // 2 + 1))  # 128 characters, 256 bytes
    assert normalise_path("x" * MAX_COMPONENT_BYTES) == "x" * MAX_COMPONENT_BYTES


# ---------------------------------------------------------------- parents


def test_parents() -> None:
    assert parents("a/b/c.txt") == ["a", "a/b"]
    assert parents("top.txt") == []


def test_refuses_a_path_naming_a_directory() -> None:
    with pytest.raises(UnsafePathError, match="names a directory, not a file"):
        normalise_path("a/./b/")


@pytest.mark.parametrize(
    "raw", [".\u200cgit/config", ".g\u200dit/x", ".git\ufeff/x", ".git::$INDEX_ALLOCATION/config"]
)
def test_refuses_dot_git_hidden_by_ignorable_characters_or_streams(raw: str) -> None:
    with pytest.raises(UnsafePathError, match=r"is inside \.git"):
        normalise_path(raw)
