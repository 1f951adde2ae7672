"""docs/reference/python.md runs as written: its ``python`` code blocks, in order, in one real
process, in a repository as the page describes. What they assert (which outcomes return, which
raise, retry and recover, replays and ``attempt``, the tool-call adapter's ``fallback=``) is what
applyonce does, so the page cannot drift from the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import Repo, make_repo

GUIDE = Path(__file__).parents[2] / "docs" / "reference" / "python.md"


def guide_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.S | re.M)


def test_the_guide_has_its_sections() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    for words in ("What **returns**", "What **raises**", "### Retry and recover", "`fallback=`"):
        assert words in text
    assert len(guide_blocks()) >= 6


def test_the_python_guide_runs_as_written(tmp_path: Path) -> None:
    repo: Repo = make_repo(
        tmp_path / "repo", {"app.py": 'GREETING = "hello"\n', "README.md": "# demo\n"}
    )
    script = tmp_path / "guide.py"
    script.write_text("\n\n".join(guide_blocks()), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=repo.path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["Success. Updated the following files:", "M app.py"]
    assert lines[2].startswith("error: the patch format was not recognised")
    assert lines[3].startswith("replayed call ")
    # One commit per call that ran: the first, the README once clean, the revert, the new
    # attempt, the adapter's; the rejections, the replays and the raised call none.
    # (The threads' example: six calls of two threads sharing one executor, a file each.)
    logged = repo.git("log", "--format=%s").splitlines()
    shared = [s for s in logged if s.startswith(("apply_patch: A alice/", "apply_patch: A bob/"))]
    assert len(shared) == 6, logged
    subjects = [s for s in logged if s not in shared][:6]
    assert subjects[:5] == [
        "apply_patch: M app.py",
        "apply_patch: M app.py",
        "revert_patch: M app.py",
        "apply_patch: M README.md",
        "apply_patch: M app.py",
    ]
    assert (repo.path / "app.py").read_text() == 'GREETING = "hello, wide world"\n'
    assert repo.git("status", "--porcelain") == ""
