"""An unknown ``applyonce.*`` git config key warns, naming the nearest known key: one line on the
CLI's stderr (also under ``applyonce mcp``), a warning and a list on the Python API; the call runs
as it would without the key."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from applyonce import Executor
from applyonce.executor import UnknownConfigKeyWarning
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, run_cli

TYPO = "warning: unknown git config key applyonce.leasesecond is ignored; did you mean "
TYPO += "applyonce.leaseSeconds?\n"


def test_the_cli_warns_in_one_line_on_stderr_and_the_call_runs(repo: Repo) -> None:
    repo.git("config", "applyonce.leaseSecond", "5")
    done = apply(repo, PATCH, "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == TYPO
    assert json.loads(done.stdout)["status"] == "committed"  # stdout stays the receipt
    assert repo.commit_count() == 2
    # Any command that reads the repository says it, a known key says nothing.
    repo.git("config", "--unset", "applyonce.leaseSecond")
    repo.git("config", "applyonce.leaseSeconds", "5")
    quiet = run_cli("log", "--repo", str(repo.path))
    assert (quiet.returncode, quiet.stderr) == (0, "")


def test_the_python_api_warns_and_lists_the_keys(repo: Repo) -> None:
    repo.git("config", "applyonce.dirtty", "commit")
    with pytest.warns(UnknownConfigKeyWarning, match=r"applyonce\.dirtty .*applyonce\.dirty\?"):
        executor = Executor(repo.path)
    with executor:
        assert executor.config_warnings == [
            "unknown git config key applyonce.dirtty is ignored; did you mean applyonce.dirty?"
        ]
        assert executor.apply(PATCH).status == "committed"


def test_the_mcp_server_warns_on_its_stderr(repo: Repo) -> None:
    repo.git("config", "applyonce.leaseSecond", "5")
    # A client that closes at once: the server opens the repository, then ends.
    done = subprocess.run(
        [sys.executable, "-m", "applyonce", "mcp", "--repo", str(repo.path)],
        input=b"",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == b""
    assert done.stderr.decode() == TYPO


def test_the_apply_patch_command_warns_in_one_line_and_prints_what_codex_prints(repo: Repo) -> None:
    repo.git("config", "applyonce.leaseSecond", "5")
    done = subprocess.run(
        [sys.executable, "-c", "from applyonce.adapters.apply_patch_cmd import main; main()"],
        input=PATCH,
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Success. Updated the following files:\nM src/util.py\n"
    assert done.stderr == TYPO
