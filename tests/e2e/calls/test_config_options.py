"""Options in git config, where a patch cannot change them: ``applyonce.check`` (multi-valued),
``applyonce.protect``, ``applyonce.skipCheck``, ``applyonce.dirty``, from the repository's config
and the user's; the command line replaces them. A bad value is a usage error naming the key."""

from __future__ import annotations

import orjson

from applyonce.adapters.agents import PatchRunner
from tests.conftest import APP_PATCH as PATCH
from tests.conftest import UTIL_PATCH, Repo, apply, git, run_cli

PYTHON_2 = '*** Begin Patch\n*** Add File: legacy.py\n+print "hello"\n*** End Patch\n'


def checks_of(stdout: str) -> list[str]:
    return [c["name"] for c in orjson.loads(stdout)["checks"]]


def test_config_checks_run_and_a_failing_one_rejects(repo: Repo) -> None:
    repo.git("config", "--add", "applyonce.check", "true")
    repo.git("config", "--add", "applyonce.check", "exit 3")
    head = repo.head()
    rejected = apply(repo, UTIL_PATCH, "--json")
    assert rejected.returncode == 1
    assert checks_of(rejected.stdout)[-2:] == ["true", "exit 3"]
    assert "check 'exit 3' failed (exit 3)" in orjson.loads(rejected.stdout)["output"]
    assert repo.head() == head
    # --check on the command line replaces every configured one.
    replaced = apply(repo, UTIL_PATCH, "--json", "--attempt", "2", "--check", "true")
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    assert checks_of(replaced.stdout)[-1:] == ["true"]
    assert "exit 3" not in checks_of(replaced.stdout)


def test_config_protect_needs_approval_and_the_command_line_replaces_it(repo: Repo) -> None:
    repo.git("config", "applyonce.protect", "src/*")
    head = repo.head()
    refused = apply(repo, UTIL_PATCH)
    assert refused.returncode == 1
    assert "touches protected paths (src/util.py) and needs approval" in refused.stderr
    assert repo.head() == head
    replaced = apply(repo, UTIL_PATCH, "--attempt", "2", "--protect", "docs/*")
    assert replaced.returncode == 0, replaced.stderr


def test_config_skip_check_skips_a_builtin_check(repo: Repo) -> None:
    repo.git("config", "applyonce.skipCheck", "syntax")
    result = apply(repo, PYTHON_2, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    checks = {c["name"]: c for c in orjson.loads(result.stdout)["checks"]}
    assert checks["builtin:syntax"]["output_tail"] == "skipped (--skip-check syntax)"
    # --skip-check on the command line replaces the configured skips.
    other = PYTHON_2.replace("legacy.py", "legacy2.py")
    assert apply(repo, other, "--skip-check", "markers").returncode == 1


def test_config_dirty_commit_snapshots_and_the_command_line_overrides_it(repo: Repo) -> None:
    # The user's own config counts too (HOME is the test's own).
    git(repo.path, "config", "--global", "applyonce.dirty", "commit")
    (repo.path / "src/app.py").write_text("def greet(name):\n    return 'hello ' + name\n# mine\n")
    refused = apply(repo, PATCH, "--dirty", "refuse")
    assert refused.returncode == 4
    assert "pass --dirty commit" in refused.stderr
    result = apply(repo, PATCH, "--attempt", "2")
    assert result.returncode == 0, result.stderr
    subjects = repo.git("log", "--format=%s").splitlines()
    assert subjects[1].startswith("applyonce: uncommitted changes before ")
    assert repo.commit_count() == 3


def test_the_python_adapter_reads_the_config_too(repo: Repo) -> None:
    repo.git("config", "applyonce.check", "exit 7")
    output = PatchRunner(repo.path).run(UTIL_PATCH)
    assert output.is_error
    assert "check 'exit 7' failed (exit 7)" in output.text


def test_bad_config_values_are_usage_errors_naming_the_key(repo: Repo) -> None:
    head = repo.head()
    repo.git("config", "applyonce.dirty", "maybe")
    result = apply(repo, UTIL_PATCH)
    assert result.returncode == 2
    assert result.stderr == (
        "error: git config applyonce.dirty is 'maybe', which is not refuse or commit; "
        "fix it with 'git config applyonce.dirty refuse' (or commit)\n"
    )
    # --dirty on the command line is not read from the config, so it is not refused.
    repo.git("config", "--unset", "applyonce.dirty")
    repo.git("config", "--add", "applyonce.skipCheck", "syntax")
    repo.git("config", "--add", "applyonce.skipCheck", "spelling")
    result = apply(repo, UTIL_PATCH)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "error: git config applyonce.skipCheck is 'spelling', which is not syntax or markers; "
    )
    assert len(result.stderr.splitlines()) == 1
    assert repo.head() == head
    assert not repo.state_dir().exists()
    assert repo.git("status", "--porcelain") == ""


def test_a_config_key_without_a_value_is_quoted_as_written(repo: Repo) -> None:
    """'[applyonce] dirty' with no '=' has no value: the refusal quotes '', not 'None'."""
    with (repo.path / ".git" / "config").open("a") as config:
        config.write("[applyonce]\n\tdirty\n")
    result = apply(repo, UTIL_PATCH)
    assert result.returncode == 2
    assert result.stderr.startswith("error: git config applyonce.dirty is '', which is not ")
    assert not repo.state_dir().exists()


def test_mcp_refuses_a_bad_dirty_value_before_serving(repo: Repo) -> None:
    result = run_cli("mcp", "--repo", str(repo.path), "--dirty", "maybe")
    assert result.returncode == 2
    assert result.stderr == "error: unknown --dirty 'maybe'; use refuse or commit\n"
