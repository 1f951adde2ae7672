"""What the CLI prints, pinned: a fixed session of calls whose exit codes, stdout, stderr and
receipts must stay byte-identical (after masking what differs by nature: commit IDs, times,
execution IDs, temp paths). A change to the code's layout must not change a byte of it.

``APPLYONCE_UPDATE_GOLDEN=1 pytest tests/adapters/test_golden_cli.py`` rewrites
``tests/golden/cli_session.json`` after a deliberate change; the diff of that file is then the
change a user sees.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson

from tests.conftest import Repo, Run, make_repo, run_cli

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cli_session.json"

FILES = {
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
    "src/util.py": "VALUE = 1\nVALUE = 1\n",
    "notes.txt": "one\ntwo\n",
}
UPDATE = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet(name):\n"
    "-    return 'hello ' + name\n+    return f'Hello, {name}!'\n"
    "*** Add File: tests/test_app.py\n+from src.app import greet\n*** End Patch\n"
)
AMBIGUOUS = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
)
MISMATCH = "*** Begin Patch\n*** Update File: notes.txt\n@@\n-three\n+3\n*** End Patch\n"
SYNTAX = "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n"
BROKEN_PY = "*** Begin Patch\n*** Add File: bad.py\n+def f(:\n*** End Patch\n"
UNIFIED = "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
UPDATE_UTIL = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n VALUE = 1\n-VALUE = 1\n+VALUE = 2\n"
    "*** End Patch\n"
)
ADD = "*** Begin Patch\n*** Add File: docs/added.md\n+# added\n*** End Patch\n"
ADD_TWO = "*** Begin Patch\n*** Add File: docs/second.md\n+# second\n*** End Patch\n"
EDIT_JSON = '[{"command": "str_replace", "path": "notes.txt", "old_str": "one", "new_str": "ONE"}]'

_HEX40 = re.compile(r"\b[0-9a-f]{40}\b")
_HEX_SHORT = re.compile(r"\b[0-9a-f]{7,12}\b")
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_DURATION = re.compile(r'"duration_ms": \d+')
# A check's time in show's text ("exit 0 in 0 ms") is 0 on a quiet machine, more under load.
_CHECK_TIME = re.compile(r"(: exit -?\d+) in \d+ ms")


class _Masker:
    """Replaces what differs between runs by nature with stable names, in order of appearance."""

    def __init__(self, root: Path) -> None:
        self.root = str(root)
        self.names: dict[str, str] = {}

    def _name(self, kind: str, value: str) -> str:
        if value not in self.names:
            self.names[value] = (
                f"<{kind}{sum(v.startswith(f'<{kind}') for v in self.names.values())}>"
            )
        return self.names[value]

    def __call__(self, text: str) -> str:
        text = text.replace(self.root, "<tmp>")
        text = _TIME.sub("<time>", text)
        text = _DURATION.sub('"duration_ms": <ms>', text)
        text = _CHECK_TIME.sub(r"\1 in <ms> ms", text)
        text = re.sub(r'"execution_id": "[0-9a-f]+"', '"execution_id": "<exec>"', text)
        text = _HEX40.sub(lambda m: self._name("commit", m.group()), text)
        # Short commit IDs (git log, the replay line) are prefixes of the full ones seen before.
        for full, name in list(self.names.items()):
            text = re.sub(rf"\b{full[:7]}[0-9a-f]{{0,5}}\b", name, text)
        return text


def _session(repo: Repo, tmp: Path) -> list[dict[str, object]]:
    steps: list[tuple[str, list[str], str | None]] = [
        ("apply", ["apply", "-", "--tool-call-id", "call_1"], UPDATE),
        ("apply --json (replay)", ["apply", "-", "--json", "--tool-call-id", "call_1"], UPDATE),
        ("apply ambiguous", ["apply", "-", "--json"], AMBIGUOUS),
        ("apply mismatch", ["apply", "-"], MISMATCH),
        ("apply syntax error", ["apply", "-"], SYNTAX),
        ("apply broken python", ["apply", "-", "--json"], BROKEN_PY),
        ("apply unified", ["apply", "-", "--format", "unified"], UNIFIED),
        ("apply edit-json --dry-run", ["apply", "-", "--dry-run"], EDIT_JSON),
        ("apply bad option", ["apply", "-", "--skip-check", "lint"], UNIFIED),
        ("log", ["log"], None),
        ("audit", ["audit"], None),
        ("recover", ["recover"], None),
        ("replay", ["replay"], None),
    ]
    runs: list[tuple[str, Run]] = []
    for name, args, stdin in steps:
        runs.append((name, run_cli(*args, "--repo", str(repo.path), input=stdin)))
    # Dirty path: the user edits a file the patch touches.
    (repo.path / "notes.txt").write_text("one\nTWO\nmine\n")
    runs.append(
        (
            "apply over a dirty path",
            run_cli("apply", "-", "--repo", str(repo.path), input=EDIT_JSON),
        )
    )
    first = orjson.loads(runs[1][1].stdout)["call_id"]
    more: list[tuple[str, list[str], str | None, dict[str, str] | None]] = [
        ("apply --dry-run --json", ["apply", "-", "--dry-run", "--json"], UPDATE_UTIL, None),
        ("show", ["show", first[:10]], None, None),
        ("show --json", ["show", first, "--json"], None, None),
        ("log --json", ["log", "--json"], None, None),
        ("audit --json", ["audit", "--json"], None, None),
        ("replay --json", ["replay", "--json"], None, None),
        (
            "resolve a committed call",
            ["resolve", first, "--as", "rejected", "--note", "x"],
            None,
            None,
        ),
        ("show an unknown call", ["show", "abcdef0123"], None, None),
        (
            "apply killed after the publish",
            ["apply", "-"],
            ADD,
            {"APPLYONCE_FAULT": "after-publish"},
        ),
        ("recover after the crash", ["recover"], None, None),
        ("recover --json (nothing left)", ["recover", "--json"], None, None),
        ("apply the crashed call again", ["apply", "-"], ADD, None),
        (
            "apply killed before the publish",
            ["apply", "-"],
            ADD_TWO,
            {"APPLYONCE_FAULT": "after-commit-object"},
        ),
        ("recover --json after that crash", ["recover", "--json"], None, None),
        ("audit after the crashes", ["audit"], None, None),
    ]
    for name, args, stdin, env in more:
        runs.append((name, run_cli(*args, "--repo", str(repo.path), input=stdin, env=env)))
    # Every commit gets its name by its place in history, whichever output shows it first.
    mask = _Masker(tmp)
    for commit in repo.git("rev-list", "--reverse", "HEAD").split():
        mask(commit)
    return [
        {"step": name, "exit": r.returncode, "stdout": mask(r.stdout), "stderr": mask(r.stderr)}
        for name, r in runs
    ]


def test_cli_session_is_byte_identical_to_the_golden_one(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", FILES)
    got = _session(repo, tmp_path)
    if os.environ.get("APPLYONCE_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_bytes(orjson.dumps(got, option=orjson.OPT_INDENT_2) + b"\n")
    want = orjson.loads(GOLDEN.read_bytes())
    for got_step, want_step in zip(got, want, strict=True):
        assert got_step == want_step, got_step["step"]
