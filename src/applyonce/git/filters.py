"""Clean/smudge filter drivers (``filter=<driver>`` in .gitattributes), run by the real git.

libgit2 runs only its built-in filters (end-of-line, ident): it silently skips a configured driver,
so it would hash a work-tree file as the wrong blob (a false "uncommitted changes") and write the
committed bytes instead of the smudged ones. For a path whose attributes name a driver, git itself
cleans (``git hash-object --path``) and smudges (``git cat-file --filters``). As in git, a name with
no driver configured (no clean, smudge or process command) passes the bytes through unchanged,
unless ``filter.<name>.required`` is set; a configured driver whose command fails is an error (git
alone would pass the bytes through unchanged there).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2

from applyonce.errors import UsageError

# Variables that would point git at another repository, index or work tree than ``-C <root>``'s.
_REPO_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_NAMESPACE")


class FilterDriverError(UsageError):
    """A path's ``filter`` attribute names a failing driver, or a required one that is missing."""

    kind = "filter-driver"
    default_hint = (
        "configure the driver (git config filter.<name>.clean / .smudge) or fix its command, "
        "then repeat the call"
    )


def filter_of(repo: pygit2.Repository, path: str) -> str | None:
    """The filter driver ``path``'s attributes name, if git would run one for it: a name with no
    command configured is a pass-through in git (see gitattributes(5)), unless it is required."""
    try:
        value = repo.get_attr(path, "filter")
    except pygit2.GitError:
        return None
    if not isinstance(value, str) or not value:
        return None
    if _has_command(repo.config, value) or _required(repo.config, value):
        return value
    return None


def autocrlf_of(repo: pygit2.Repository) -> str:
    """``core.autocrlf`` as libgit2 reads it: ``false`` (also when unset), ``true``, ``input``,
    or ``other`` (a value libgit2 would not take: left to libgit2 to judge)."""
    config = repo.config
    try:
        if "core.autocrlf" not in config:
            return "false"
        return "true" if config.get_bool("core.autocrlf") else "false"
    except (KeyError, ValueError, pygit2.GitError):
        pass
    try:
        value = config["core.autocrlf"]
    except (KeyError, ValueError, pygit2.GitError):
        return "other"
    return "input" if isinstance(value, str) and value.lower() == "input" else "other"


def builtin_filters_apply(repo: pygit2.Repository, path: str, *, autocrlf: str) -> bool:
    """Whether libgit2's built-in filters may change the bytes of ``path`` on their way to the
    work tree (``autocrlf``: :func:`autocrlf_of`). False only where they certainly do not: no
    ``ident``, and no end-of-line conversion (libgit2's crlf.c: a path converts LF to CRLF on
    checkout only if ``text``/``crlf``/``eol`` say so, or none is set and core.autocrlf is
    true)."""
    if repo.get_attr(path, "ident") is not None:
        return True
    text = repo.get_attr(path, "text")
    if text is None:
        text = repo.get_attr(path, "crlf")
    if text is False:  # -text (or -crlf): binary, never converted, whatever eol says
        return False
    if text is not None or repo.get_attr(path, "eol") is not None:
        return True  # a text or eol setting: libgit2 judges it
    return autocrlf not in ("false", "input")  # input converts only on the way in


def _has_command(config: pygit2.Config, driver: str) -> bool:
    return any(f"filter.{driver}.{key}" in config for key in ("clean", "smudge", "process"))


def _required(config: pygit2.Config, driver: str) -> bool:
    try:
        return bool(config.get_bool(f"filter.{driver}.required"))
    except (KeyError, pygit2.GitError, ValueError):
        return False


def clean_blob(
    repo: pygit2.Repository, root: Path, path: str, driver: str, *, write: bool = False
) -> str:
    """The blob ID git would commit the work-tree file ``path`` as (through ``driver``'s clean);
    ``write``: the blob is written too, as ``git add`` would."""
    with open(root / path, "rb") as stream:
        data = stream.read()
    args = ["hash-object", *(["-w"] if write else []), f"--path={path}", "--stdin"]
    out = _git(repo, root, driver, "clean", args, data, path)
    return out.decode().strip()


def smudged(repo: pygit2.Repository, root: Path, path: str, blob: str, driver: str) -> bytes:
    """The bytes git would write to the work tree for ``blob`` at ``path`` (through the smudge)."""
    return _git(
        repo, root, driver, "smudge", ["cat-file", "--filters", f"--path={path}", blob], b"", path
    )


def _git(
    repo: pygit2.Repository,
    root: Path,
    driver: str,
    step: str,
    args: list[str],
    data: bytes,
    path: str,
) -> bytes:
    config = repo.config
    configured = {key for key in (step, "process") if f"filter.{driver}.{key}" in config}
    if not _has_command(config, driver):
        raise FilterDriverError(
            f"{path}: .gitattributes names the required filter '{driver}', but no driver is "
            f"configured (filter.{driver}.clean / .smudge)",
            path=path,
        )
    env = {k: v for k, v in os.environ.items() if k not in _REPO_ENV}
    if configured:
        # Without 'required', git passes the bytes through unchanged when the command fails.
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": f"filter.{driver}.required",
            "GIT_CONFIG_VALUE_0": "true",
        }
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], input=data, capture_output=True, env=env, check=False
        )
    except OSError as exc:
        raise FilterDriverError(
            f"{path}: cannot run git for the filter '{driver}' ({exc})"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
        raise FilterDriverError(f"{path}: the {step} filter '{driver}' failed ({last})", path=path)
    return done.stdout
