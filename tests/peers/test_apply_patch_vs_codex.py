"""The ``apply_patch`` command beside the real Codex binary, as a harness runs them.

Each case is run in two fresh repositories holding the same files: by the real ``codex``
(``@openai/codex@0.169.0``: ``codex --codex-run-as-apply-patch PATCH``; for the patch on stdin or
in a heredoc, which that flag does not read, the binary run under the name ``apply_patch``, its
own tool's entry point) and by applyonce's ``apply_patch``, each in its own process, the patch
given as the argument, on stdin, or as a shell heredoc. Compared: the exit code,
stdout byte for byte, the files left in the work tree, and on a failure Codex's stderr, which
``apply_patch`` prints first (the directory named as ``<dir>``), before applyonce's repair lines.

Where the two tools differ on purpose (docs/reference/apply-patch.md), a test below says how.
The binary: ``$APPLYONCE_CODEX_BIN``, else the cache folder ``.ci/run`` installs it in. Missing,
these tests are skipped, unless ``APPLYONCE_REQUIRE_CODEX=1`` (CI), then they fail.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import Repo, make_repo
from tests.peers.codex_differential import codex_binary_or_skip, find_codex_binary

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

BINARY = find_codex_binary()
# The command as installed (the console script is this function); run through the interpreter so
# the tests do not depend on a venv's bin being on PATH.
OURS = [sys.executable, "-c", "from applyonce.adapters.apply_patch_cmd import main; main()"]

FILES = {
    "app.py": "import os\n\n\ndef greet(name):\n    return 'hello ' + name\n\n\ndef bye():\n    return 'bye'\n",
    "notes.txt": "one\ntwo\nthree\n",
    "old.txt": "to be removed\n",
    "pkg/mod.py": "VALUE = 1\nOTHER = 2\n",
    "pkg/sub/leaf.txt": "leaf\n",
}


@dataclass(frozen=True)
class Case:
    name: str
    patch: str
    form: str = "arg"  # arg, stdin or heredoc (a shell runs 'apply_patch <<'EOF' … EOF')
    cwd: str = ""  # the folder the command runs in, inside the repository
    files: dict[str, str] = field(default_factory=lambda: dict(FILES))


CASES = [
    Case("add", "*** Begin Patch\n*** Add File: hello.txt\n+hello\n+world\n*** End Patch\n"),
    Case(
        "add-nested",
        "*** Begin Patch\n*** Add File: docs/guide/intro.md\n+# Intro\n*** End Patch\n",
    ),
    Case(
        "update-with-context",
        "*** Begin Patch\n*** Update File: app.py\n@@ def greet(name):\n-    return 'hello ' + name\n"
        "+    return 'Hello, ' + name\n*** End Patch\n",
    ),
    Case(
        "update-two-hunks",
        "*** Begin Patch\n*** Update File: app.py\n@@\n import os\n+import sys\n@@ def bye():\n"
        "-    return 'bye'\n+    return 'goodbye'\n*** End Patch\n",
    ),
    Case(
        "move",
        "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: archive/notes.txt\n@@\n one\n"
        "-two\n+TWO\n three\n*** End Patch\n",
    ),
    Case("delete", "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n"),
    Case(
        "codex-order",  # D, M, A, move in the patch: Codex says A, then M, then D
        "*** Begin Patch\n*** Delete File: old.txt\n*** Update File: notes.txt\n@@\n-one\n+ONE\n"
        "*** Add File: new.txt\n+new\n*** Update File: pkg/mod.py\n*** Move to: pkg/moved.py\n"
        "@@\n-VALUE = 1\n+VALUE = 10\n*** Add File: another.txt\n+x\n*** End Patch\n",
    ),
    Case(
        "stdin",
        "*** Begin Patch\n*** Update File: pkg/mod.py\n@@\n VALUE = 1\n-OTHER = 2\n+OTHER = 3\n"
        "*** End Patch\n",
        form="stdin",
    ),
    Case(
        "heredoc",
        "*** Begin Patch\n*** Add File: from_heredoc.txt\n+it's here\n*** Update File: notes.txt\n"
        "@@\n two\n-three\n+3\n*** End Patch\n",
        form="heredoc",
    ),
    Case(
        "subfolder-paths",  # relative to the current directory, '..' included, as Codex reads them
        "*** Begin Patch\n*** Update File: leaf.txt\n@@\n-leaf\n+LEAF\n*** Update File: ../mod.py\n"
        "@@\n-VALUE = 1\n+VALUE = 2\n*** Add File: ./new_here.txt\n+here\n*** End Patch\n",
        cwd="pkg/sub",
    ),
    Case(
        "end-of-file-hunk",
        "*** Begin Patch\n*** Update File: notes.txt\n@@\n two\n-three\n+THREE\n+four\n"
        "*** End of File\n*** End Patch\n",
    ),
    Case(
        "fuzzy-context",  # trailing blanks and typographic quotes in the file, plain in the patch
        "*** Begin Patch\n*** Update File: fuzzy.txt\n@@\n-it's here\n+it is here\n end\n"
        "*** End Patch\n",
        files={**FILES, "fuzzy.txt": "it\u2019s here   \nend\n"},
    ),
    Case(
        "pure-addition-at-end",
        "*** Begin Patch\n*** Update File: pkg/mod.py\n@@\n OTHER = 2\n+THIRD = 3\n*** End Patch\n",
    ),
    Case(
        "missing-file",
        "*** Begin Patch\n*** Update File: nope.txt\n@@\n-a\n+b\n*** End Patch\n",
    ),
    Case(
        "bad-context",
        "*** Begin Patch\n*** Update File: notes.txt\n@@\n-four\n-five\n+six\n*** End Patch\n",
    ),
    Case(
        "bad-context-in-subfolder",
        "*** Begin Patch\n*** Update File: ../mod.py\n@@\n-VALUE = 7\n+VALUE = 8\n*** End Patch\n",
        cwd="pkg/sub",
    ),
    Case("delete-missing", "*** Begin Patch\n*** Delete File: gone.txt\n*** End Patch\n"),
    Case("malformed-no-begin", "*** Update File: notes.txt\n@@\n-one\n+1\n*** End Patch\n"),
    Case("malformed-no-end", "*** Begin Patch\n*** Add File: cut.txt\n+cut off\n"),
    Case("malformed-prose", "Please change notes.txt so that it says four."),
    Case(
        "malformed-heredoc-no-end",
        "*** Begin Patch\n*** Add File: cut.txt\n+cut off\n",
        form="heredoc",
    ),
]


@pytest.fixture
def binary() -> str:
    return codex_binary_or_skip(BINARY)


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str
    files: dict[str, bytes]


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def run_tool(
    command: list[str],
    repo: Repo,
    case: Case,
    *,
    executable: str | None = None,
    env: dict[str, str] | None = None,
) -> Ran:
    """One tool on one case in ``repo``, in its own process, the patch given in the case's form.
    ``command[0]`` is argv[0]; ``executable`` the program run under that name."""
    cwd = repo.path / case.cwd
    cwd.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    if case.form == "heredoc":
        # What a harness's shell runs: the command, its patch in a quoted heredoc (Codex's
        # binary under the name apply_patch).
        program = (
            shlex.join(command)
            if executable is None
            else f"exec -a apply_patch {shlex.quote(executable)}"
        )
        script = f"{program} <<'EOF'\n{case.patch}EOF\n"
        proc = subprocess.run(
            ["bash", "-c", script], cwd=cwd, capture_output=True, env=full_env, timeout=60
        )
    else:
        args = [case.patch] if case.form == "arg" else []
        stdin = case.patch.encode() if case.form == "stdin" else None
        proc = subprocess.run(
            [*command, *args],
            executable=executable,
            cwd=cwd,
            input=stdin,
            capture_output=True,
            env=full_env,
            timeout=60,
        )
    top = os.path.realpath(repo.path)
    return Ran(
        proc.returncode,
        proc.stdout.decode(),
        proc.stderr.decode().replace(top, "<dir>"),
        _files(repo.path),
    )


def both(binary: str, case: Case, tmp_path: Path) -> tuple[Ran, Ran]:
    """The case run by Codex and by ``apply_patch``, each in a repository of its own."""
    codex_repo = make_repo(tmp_path / "codex", case.files)
    our_repo = make_repo(tmp_path / "ours", case.files)
    if case.form == "arg":
        theirs = run_tool([binary, "--codex-run-as-apply-patch"], codex_repo, case)
    else:  # that flag takes no stdin: the binary named apply_patch does, as Codex runs it
        theirs = run_tool(["apply_patch"], codex_repo, case, executable=binary)
    ours = run_tool(OURS, our_repo, case)
    return theirs, ours


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_apply_patch_answers_as_codex(binary: str, case: Case, tmp_path: Path) -> None:
    theirs, ours = both(binary, case, tmp_path)
    assert (ours.code, ours.stdout) == (theirs.code, theirs.stdout), ours.stderr
    assert ours.files == theirs.files
    # A failure: Codex's own lines first, then applyonce's 'error:' line and its repair data.
    assert ours.stderr.startswith(theirs.stderr), (theirs.stderr, ours.stderr)
    if theirs.code:
        rest = ours.stderr[len(theirs.stderr) :]
        assert rest.startswith("error: "), ours.stderr
        assert "Traceback" not in ours.stderr
    else:
        assert theirs.stdout.startswith("Success. Updated the following files:\n")


def test_the_codex_order_is_added_modified_deleted(binary: str, tmp_path: Path) -> None:
    """The case above pins it; this one names it, so a change of Codex's order is read as such."""
    case = next(c for c in CASES if c.name == "codex-order")
    theirs, ours = both(binary, case, tmp_path)
    expected = (
        "Success. Updated the following files:\nA new.txt\nA another.txt\nM notes.txt\n"
        "M pkg/moved.py\nD old.txt\n"
    )
    assert theirs.stdout == ours.stdout == expected


def test_a_bad_context_is_repaired_with_the_files_lines(binary: str, tmp_path: Path) -> None:
    case = next(c for c in CASES if c.name == "bad-context")
    theirs, ours = both(binary, case, tmp_path)
    assert theirs.stderr == "Failed to find expected lines in <dir>/notes.txt:\nfour\nfive\n"
    repair = ours.stderr[len(theirs.stderr) :]
    assert repair.startswith("error: notes.txt: hunk 1: expected lines not found")
    assert " 1 | one\n 2 | two\n 3 | three\n" in repair


# ------------------------------------------------------------------ the stated differences


def test_a_failing_file_leaves_no_other_file_changed(binary: str, tmp_path: Path) -> None:
    """Codex writes the files before the one that fails; applyonce's call is one commit or
    nothing. Both fail (exit 1) with Codex's line."""
    case = Case(
        "partial",
        "*** Begin Patch\n*** Update File: notes.txt\n@@\n-one\n+1\n*** Update File: nope.txt\n"
        "@@\n-a\n+b\n*** End Patch\n",
    )
    theirs, ours = both(binary, case, tmp_path)
    assert theirs.code == ours.code == 1
    assert theirs.files["notes.txt"] == b"1\ntwo\nthree\n"  # Codex: half the patch
    assert ours.files == {p: c.encode() for p, c in FILES.items()}  # applyonce: nothing
    assert ours.stderr.startswith(theirs.stderr)


def test_an_add_onto_an_existing_file_is_refused(binary: str, tmp_path: Path) -> None:
    """Codex overwrites the file; applyonce refuses (exit 1), the file kept."""
    case = Case("add-over", "*** Begin Patch\n*** Add File: notes.txt\n+over\n*** End Patch\n")
    theirs, ours = both(binary, case, tmp_path)
    assert (theirs.code, theirs.files["notes.txt"]) == (0, b"over\n")
    assert (ours.code, ours.stdout) == (1, "")
    assert ours.stderr.startswith("error: cannot add notes.txt: it already exists;")
    assert ours.files["notes.txt"] == b"one\ntwo\nthree\n"


def test_a_heredoc_wrapper_inside_the_argument_is_read(binary: str, tmp_path: Path) -> None:
    """A model that puts the shell's heredoc in the argument: Codex refuses it, applyonce reads
    the patch inside (a patch's identity ignores the wrapper, docs/design.md §3)."""
    patch = "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: w.txt\n+w\n*** End Patch\nEOF\n"
    theirs, ours = both(binary, Case("wrapped", patch), tmp_path)
    assert theirs.code == 1
    assert theirs.stderr.startswith("Invalid patch: The first line of the patch must be")
    assert (ours.code, ours.stdout) == (0, "Success. Updated the following files:\nA w.txt\n")


def test_usage_errors_exit_2_as_codex(binary: str, tmp_path: Path) -> None:
    codex_repo = make_repo(tmp_path / "codex", FILES)
    our_repo = make_repo(tmp_path / "ours", FILES)
    for args in (["one", "two"], []):
        theirs = subprocess.run(
            ["apply_patch", *args],
            executable=binary,
            cwd=codex_repo.path,
            input=b"",
            capture_output=True,
            timeout=60,
        )
        ours = subprocess.run(
            [*OURS, *args], cwd=our_repo.path, input=b"", capture_output=True, timeout=60
        )
        assert (ours.returncode, ours.stdout, ours.stderr) == (
            theirs.returncode,
            theirs.stdout,
            theirs.stderr,
        )
        assert ours.returncode == 2
    assert _files(our_repo.path) == _files(codex_repo.path)
