"""The repository's commit hooks, found and run as ``git commit`` finds and runs them (git 2.39,
``githooks(5)``), but in a scratch checkout of the staged tree, never in the user's checkout.

* Where: ``core.hooksPath`` (``~`` expanded; a relative path is taken from the work tree's root,
  where git runs hooks), else ``hooks`` in the repository's common directory: a linked work tree
  uses its main repository's hooks.
* Which: a regular file, executable (git ignores one that is not, and so does applyonce).
* How: the hook file is executed with its arguments (through ``/bin/sh`` when it has no ``#!``
  line, as git falls back), its working directory the root of the checkout, its standard input
  ``/dev/null``, its standard output and error together; with ``GIT_DIR`` and
  ``GIT_INDEX_FILE`` naming the scratch checkout's repository and index and ``GIT_EDITOR=:`` (a
  message given, not edited), the variables that would point git at another repository removed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from applyonce.git.store import GitStore

# The hooks 'git commit' runs before it makes its commit, in the order it runs them.
COMMIT_HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg")
# What the --no-verify of 'git commit' skips (prepare-commit-msg still runs).
VERIFY_HOOKS = frozenset({"pre-commit", "commit-msg"})
# Variables that point git at a repository other than the one a hook runs in (git's
# local_repo_env, environment.c), and applyonce's own fault switch.
_REPO_ENV = (
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_DIR",
    "GIT_GRAFT_FILE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_OBJECT_DIRECTORY",
    "GIT_PREFIX",
    "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE",
    "GIT_WORK_TREE",
    "APPLYONCE_FAULT",
)


def hooks_dir(store: GitStore) -> Path:
    """The directory git takes the repository's hooks from."""
    configured = store.config_value("core.hooksPath")
    if configured:
        path = Path(os.path.expanduser(configured))
        if not path.is_absolute():
            path = (store.workdir or store.common_dir) / path
        return path
    return store.common_dir / "hooks"


def find_hooks(store: GitStore, names: tuple[str, ...] = COMMIT_HOOKS) -> dict[str, Path]:
    """The hooks of ``names`` the repository has (executable regular files), by name."""
    base = hooks_dir(store)
    found: dict[str, Path] = {}
    for name in names:
        path = base / name
        if path.is_file() and os.access(path, os.X_OK):
            found[name] = path
    return found


def hook_command(path: Path, args: tuple[str, ...]) -> str:
    """The shell command that runs the hook ``path`` with ``args``: ``/bin/sh`` executes the file,
    and runs it as a shell script itself when it has no ``#!`` line, as git does."""
    return shlex.join([str(path), *args])


def hook_env(
    root: Path, *, author: tuple[str, str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment a hook runs with in the checkout at ``root``: ``GIT_DIR`` and
    ``GIT_INDEX_FILE`` of that checkout, ``GIT_EDITOR=:``, and the commit's author as
    ``GIT_AUTHOR_NAME``/``GIT_AUTHOR_EMAIL`` (git exports them to its commit hooks)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _REPO_ENV}
    gitdir = root / ".git"
    env.update(
        GIT_DIR=str(gitdir),
        GIT_INDEX_FILE=str(gitdir / "index"),
        GIT_EDITOR=":",
    )
    env["GIT_AUTHOR_NAME"], env["GIT_AUTHOR_EMAIL"] = author
    return env
