"""The architecture contracts hold, and they bite.

The contracts live in pyproject.toml under ``[tool.importlinter]``: the layers of applyonce, of
its adapters and of its use cases (a call, recovery, the read-only commands, the shared record);
the read-only commands import no publisher and no lock; only ``applyonce.git`` imports pygit2,
only ``applyonce.state.sqlite`` imports sqlite3, only adapters import the package's own
``__init__``, no cycle between siblings. ``lint-imports`` checks them here
on this checkout's ``src/``, then on copies of it with one bad import injected each, which must
fail naming the contract they break. A last check, with grimp (import-linter's graph), finds any
cycle in the whole module graph, packages' ``__init__`` modules included.

Every run is a subprocess with ``PYTHONPATH`` at the tree under test, so it sees that tree and not
whatever ``applyonce`` this interpreter imported; import-linter's cache is off.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"
SRC = ROOT / "src"

# Runs lint-imports in this interpreter, after saying which applyonce it will analyse.
LINT = """
import importlib.util, sys
print("applyonce from", importlib.util.find_spec("applyonce").origin, file=sys.stderr)
from importlinter.cli import lint_imports_command
lint_imports_command([sys.argv[1], "--no-cache", "--no-logo"])
"""

# Every cycle in applyonce's module graph, each printed once; exit 1 if there is one.
CYCLES = """
import importlib.util, sys
print("applyonce from", importlib.util.find_spec("applyonce").origin, file=sys.stderr)
import grimp
graph = grimp.build_graph("applyonce", cache_dir=None)
cycles = set()
for importer in sorted(graph.modules):
    for imported in sorted(graph.find_modules_directly_imported_by(importer)):
        back = graph.find_shortest_chain(imported, importer)
        if back:
            cycle = (importer, *back[:-1])
            start = cycle.index(min(cycle))
            cycles.add(cycle[start:] + cycle[:start])
for cycle in sorted(cycles):
    print("cycle: " + " -> ".join((*cycle, cycle[0])))
print(f"{len(graph.modules)} modules, {len(cycles)} cycles")
sys.exit(1 if cycles else 0)
"""


def run(script: str, src: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src), "COLUMNS": "1000", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # The tree under test, not an installed applyonce.
    assert f"applyonce from {src / 'applyonce' / '__init__.py'}" in result.stderr, result.stderr
    return result


def contract_lines(output: str, status: str) -> set[str]:
    """The names of the contracts lint-imports reports with ``status`` (KEPT or BROKEN)."""
    pattern = re.compile(rf"^(?P<name>.+) {status}(?: \(\d+ ignored imports?\))?$")
    return {m["name"] for line in output.splitlines() if (m := pattern.match(line))}


def contract_name(contract_id: str) -> str:
    contracts = tomllib.loads(CONFIG.read_text())["tool"]["importlinter"]["contracts"]
    (name,) = (c["name"] for c in contracts if c["id"] == contract_id)
    return str(name)


def test_contracts_hold_on_src() -> None:
    result = run(LINT, SRC, str(CONFIG))
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"lint-imports failed on src/:\n{output}"
    assert "0 broken" in output, output


def test_no_import_cycle_in_src() -> None:
    result = run(CYCLES, SRC)
    assert result.returncode == 0, result.stdout + result.stderr


# (file under src/applyonce, code appended to it, the contract it breaks, the import reported).
INJECTIONS = [
    pytest.param(
        "core/plan.py",
        "import applyonce.flow\n",
        "layers",
        "applyonce.core.plan -> applyonce.flow",
        id="core-imports-flow",
    ),
    pytest.param(
        "state/receipts.py",
        # A function-level import counts as much as a module-level one.
        "def _injected() -> None:\n    from applyonce.executor import Executor\n",
        "layers",
        "applyonce.state.receipts -> applyonce.executor",
        id="state-imports-executor-in-a-function",
    ),
    pytest.param(
        "flow/checkouts/sync.py",
        "import pygit2\n",
        "pygit2-only-in-git",
        "applyonce.flow.checkouts.sync -> pygit2",
        id="flow-imports-pygit2",
    ),
    pytest.param(
        "state/receipts.py",
        "import sqlite3\n",
        "sqlite3-only-in-state-sqlite",
        "applyonce.state.receipts -> sqlite3",
        id="state-receipts-imports-sqlite3",
    ),
    pytest.param(
        "core/paths.py",
        "import applyonce\n",
        "facade-init-is-an-adapter",
        "applyonce.core.paths -> applyonce",
        id="core-imports-package-init",
    ),
    pytest.param(
        "flow/record/settle.py",
        # apply imports settle: settle importing apply closes a cycle inside applyonce.flow.
        "def _injected() -> None:\n    from applyonce.flow.call import apply\n",
        "acyclic",
        ".record -> .call",
        id="cycle-in-flow",
    ),
    pytest.param(
        "adapters/results.py",
        "def _injected() -> None:\n    from applyonce.adapters import console\n",
        "adapter-layers",
        "applyonce.adapters.results -> applyonce.adapters.console",
        id="results-imports-console",
    ),
    pytest.param(
        "flow/inspect/replay.py",
        # The read-only commands sit below recovery: replay may not reach resolve's writes.
        "def _injected() -> None:\n    from applyonce.flow.recovery import resolve\n",
        "flow-layers",
        "applyonce.flow.inspect.replay -> applyonce.flow.recovery.resolve",
        id="inspect-imports-recovery",
    ),
    pytest.param(
        "flow/record/verify.py",
        # The shared record is below every use case: verify may not reach the corridor.
        "def _injected() -> None:\n    from applyonce.flow.call import checks\n",
        "flow-layers",
        "applyonce.flow.record.verify -> applyonce.flow.call.checks",
        id="record-imports-call",
    ),
    pytest.param(
        "flow/inspect/view.py",
        "def _injected() -> None:\n    from applyonce.git import publisher\n",
        "inspect-writes-nothing",
        "applyonce.flow.inspect.view -> applyonce.git.publisher",
        id="inspect-imports-publisher",
    ),
]


def broken_copy(tmp_path: Path, relpath: str, code: str) -> Path:
    src = tmp_path / "src"
    shutil.copytree(
        SRC / "applyonce", src / "applyonce", ignore=shutil.ignore_patterns("__pycache__")
    )
    target = src / "applyonce" / relpath
    text = target.read_text()
    target.write_text(text + ("" if text.endswith("\n") else "\n") + "\n" + code)
    return src


@pytest.mark.parametrize(("relpath", "code", "contract_id", "reported"), INJECTIONS)
def test_contracts_bite(
    tmp_path: Path, relpath: str, code: str, contract_id: str, reported: str
) -> None:
    src = broken_copy(tmp_path, relpath, code)
    result = run(LINT, src, str(CONFIG))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert contract_name(contract_id) in contract_lines(output, "BROKEN"), output
    assert reported in output, output


def test_cycle_check_bites(tmp_path: Path) -> None:
    src = broken_copy(tmp_path, "flow/record/settle.py", "from applyonce.flow.call import apply\n")
    result = run(CYCLES, src)
    assert result.returncode == 1, result.stdout + result.stderr
    cycle = "applyonce.flow.call.apply -> applyonce.flow.record.settle -> applyonce.flow.call.apply"
    assert cycle in result.stdout, result.stdout
