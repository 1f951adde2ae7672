"""``applyonce demo``: a workspace's recorded agent calls, run end to end on a scratch repo.

A workspace is a folder with ``files/`` (the project), ``contract.md`` (the task contract) and
``calls.jsonl`` (one agent tool call a line: ``tool_call_id``, ``note``, ``patch`` or
``repeat_of``, and optionally ``fault``, a fault point at which that process is killed with
SIGKILL; or a step ``{"run": "recover"|"audit"}``). Each runs as a real ``applyonce`` process, so
the crash is a real one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import orjson

from applyonce.errors import UsageError
from applyonce.faults import ENV as FAULT_ENV

Echo = Callable[[str], None]
SOURCE_WORKSPACE = Path(__file__).resolve().parents[3] / "workspaces" / "demo"
# Installed from a wheel there is no source tree: the build copies the workspace to applyonce/_demo
# (setup.py).
PACKAGED_WORKSPACE = Path(__file__).resolve().parents[1] / "_demo"


def _git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return result.stdout


def _build_repo(workspace: Path, into: Path) -> None:
    shutil.copytree(workspace / "files", into, dirs_exist_ok=True)
    _git(into, "init", "--quiet", "--initial-branch=main")
    _git(into, "config", "user.name", "applyonce demo")
    _git(into, "config", "user.email", "demo@example.invalid")
    _git(into, "add", "--all")
    _git(
        into,
        "-c",
        "user.name=demo",
        "-c",
        "commit.gpgsign=false",
        "commit",
        "--quiet",
        "--no-verify",
        "--message",
        "the example project",
    )


def _commits_with(repo: Path, call_id: str) -> int:
    out = _git(repo, "log", "--format=%(trailers:key=Call-Id,valueonly)")
    return sum(1 for line in out.splitlines() if line.strip() == call_id)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "applyonce", *args], capture_output=True, env=env)


def run_demo(workspace: Path | None, into: Path | None, *, echo: Echo) -> int:
    """Run the workspace; return the exit code (0 when every step behaved as promised)."""
    if workspace is None:
        packaged = not (SOURCE_WORKSPACE / "calls.jsonl").is_file()
        workspace = PACKAGED_WORKSPACE if packaged else SOURCE_WORKSPACE
    if not (workspace / "calls.jsonl").is_file():
        raise UsageError(
            f"no demo workspace at {workspace}",
            hint="pass --workspace with a folder holding calls.jsonl",
        )
    if into is not None and into.exists() and any(into.iterdir()):
        raise UsageError(f"{into} is not empty", hint="pass --into with a new or empty folder")
    target = into or Path(tempfile.mkdtemp(prefix="applyonce-demo-"))
    _build_repo(workspace, target)
    contract = workspace / "contract.md"
    steps = [
        orjson.loads(line)
        for line in (workspace / "calls.jsonl").read_bytes().splitlines()
        if line.strip()
    ]
    calls = sum("run" not in s for s in steps)
    echo(f"applyonce demo: {calls} recorded agent calls on a scratch repo")
    echo(f"  {target}")
    failures = 0
    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    repo = str(target)
    for number, step in enumerate(steps, start=1):
        if step.get("run") in ("recover", "audit"):
            echo(f"\n[{number}] applyonce {step['run']}: {step['note']}")
            proc = _cli(step["run"], "--repo", repo, env=env)
            for line in proc.stdout.decode().splitlines():
                echo(f"    {line}")
            failures += proc.returncode != 0
            continue
        source = steps[step["repeat_of"]] if "repeat_of" in step else step
        echo(f"\n[{number}] {step['tool_call_id']}: {step['note']}")
        patch_file = target / ".git" / f"demo-call-{number}.patch"
        patch_file.write_text(source["patch"])
        run_env = dict(env)
        if step.get("fault"):
            run_env[FAULT_ENV] = step["fault"]
        before = _git(target, "rev-parse", "HEAD").strip()
        proc = _cli(
            "apply",
            str(patch_file),
            "--repo",
            repo,
            "--contract",
            str(contract),
            "--tool-call-id",
            step["tool_call_id"],
            "--json",
            env=run_env,
        )
        after = _git(target, "rev-parse", "HEAD").strip()
        if proc.returncode < 0:
            echo(f"    killed by SIGKILL at {step['fault']} (a real crash, via APPLYONCE_FAULT)")
            echo(
                f"    the branch {'moved' if before != after else 'did not move'}; "
                "no receipt says so yet"
            )
            continue
        if not proc.stdout:
            echo(f"    exit {proc.returncode}: {proc.stderr.decode().strip()}")
            failures += 1
            continue
        receipt = orjson.loads(proc.stdout)
        call_id = receipt["call_id"]
        if receipt["status"] == "committed":
            if before != after:
                how = "new commit"
            elif receipt["reconciled"]:
                how = "settled by recover earlier; returned, not applied again"
            else:
                how = "replayed: the stored receipt, nothing ran"
            files = ", ".join(f"{f['action']} {f['path']}" for f in receipt["files"])
            echo(f"    committed {receipt['commit'][:12]} ({how})")
            echo(f"    {files}")
            count = _commits_with(target, call_id)
            echo(f"    commits carrying Call-Id {call_id[:12]}: {count}")
            failures += count != 1
        else:
            echo(f"    {receipt['status']}, exit {proc.returncode}: {receipt['output'].strip()}")
            clean = not _git(target, "status", "--porcelain", "-uno")
            echo(
                f"    the branch {'moved' if before != after else 'did not move'}; "
                f"checkout {'unchanged' if clean else 'CHANGED'}"
            )
            failures += before != after or not clean
    echo("\ngit log --format='%h %s' plus each commit's Call-Id trailer:")
    log = _git(target, "log", "--format=%h %s%n        Call-Id: %(trailers:key=Call-Id,valueonly)")
    for line in log.splitlines():
        if line.strip() and line.strip() != "Call-Id:":
            echo(f"  {line}")
    fsck = subprocess.run(["git", "-C", repo, "fsck", "--strict"], capture_output=True)
    echo(f"\ngit fsck --strict: {'clean' if fsck.returncode == 0 else 'PROBLEMS'}")
    failures += fsck.returncode != 0
    verdict = "every step behaved as promised" if not failures else f"{failures} step(s) went wrong"
    echo(f"{verdict}; the scratch repo stays at {target}")
    return 0 if failures == 0 else 1
