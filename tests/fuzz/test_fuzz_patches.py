"""Fuzz: mutated patches in all three formats through the real executor and the real CLI.

Bounded for CI (hypothesis's "ci" profile derandomizes it; a few dozen cases). The long run is
``benchmarks/bench_fuzz.py``. The properties are in ``tests/fuzz/harness.py``: no internal error,
no write on failure, one good commit on success.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

from tests.fuzz.harness import Harness, apply_cli, files_under, run_cli_case
from tests.fuzz.inputs import Case, cases

FUZZ = settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path, fsck_every=5)
    yield h
    h.close()


def test_mutated_patches_in_process(harness: Harness) -> None:
    @FUZZ
    @given(case=cases())
    # Hostile paths, well-formed: each is refused before anything is written.
    @example(Case("codex", b"*** Begin Patch\n*** Add File: .GIT/config\n+x\n*** End Patch\n"))
    @example(Case("codex", b"*** Begin Patch\n*** Add File: out/x.txt\n+x\n*** End Patch\n"))
    @example(
        Case(
            "unified",
            b"diff --git a/x b/../x\nnew file mode 100644\n--- /dev/null\n"
            b"+++ b/../x\n@@ -0,0 +1 @@\n+x\n",
        )
    )
    @example(Case("edit-json", b'[{"command": "create", "path": "a\\u0000b", "file_text": "x"}]'))
    # And one that commits, so the success path is checked by every run.
    @example(
        Case("auto", b"*** Begin Patch\n*** Update File: crlf.txt\n@@\n-two\n+TWO\n*** End Patch\n")
    )
    def run(case: Case) -> None:
        result = harness.run(case)
        assert result.ok, harness.report()

    run()
    assert harness.outcomes["committed"] >= 1 and harness.fscks >= 1


def test_mutated_patches_through_the_cli(harness: Harness) -> None:
    @settings(FUZZ, max_examples=2)
    @given(case=cases())
    @example(
        Case(
            "auto",
            b"\xef\xbb\xbf*** Begin Patch\r\n*** Delete File: .gitmodules\r\n*** End Patch\r\n",
        )
    )
    def run(case: Case) -> None:
        result = run_cli_case(harness, case)
        assert result.ok, harness.report()

    run()


@pytest.mark.parametrize(("command", "code"), [(b"echo \xe9; false", 1), (b"true \xe9", 0)])
def test_a_check_command_that_is_not_utf8_is_recorded_not_a_crash(
    harness: Harness, command: bytes, code: int
) -> None:
    """Found by fuzzing the options: a ``--check`` in bytes that are not UTF-8 (surrogate escapes
    in argv) made the receipt unwritable, an exit 3 that left the call prepared."""
    before = files_under(harness.root)
    patch = b"*** Begin Patch\n*** Add File: n.txt\n+x\n*** End Patch\n"
    proc = apply_cli(harness, patch, "--check", command)
    assert proc.returncode == code, proc.stderr
    assert b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr
    if code:
        assert files_under(harness.root) == before
    receipt = harness.executor.show(harness.executor.calls()[-1].call_id)
    assert receipt.status == ("rejected" if code else "committed")
    assert (
        receipt.checks[-1].name
        == command.decode("utf-8", "surrogateescape").encode("utf-8", "backslashreplace").decode()
    )


@pytest.mark.parametrize("order", ["parent-first", "child-first"])
def test_a_patch_adding_a_file_and_a_file_under_it_is_not_committed(
    harness: Harness, order: str
) -> None:
    """Found by atheris: 'Add File: a' and 'Add File: a/b' in one patch said "Success" for both,
    and the commit had only a/b. Now refused by the plan, nothing written."""
    ops = [b"*** Add File: a\n+x\n", b"*** Add File: a/b\n+y\n"]
    if order == "child-first":
        ops.reverse()
    result = harness.run(Case("codex", b"*** Begin Patch\n" + b"".join(ops) + b"*** End Patch\n"))
    assert result.ok and result.known is None, harness.report()
    assert result.outcome == "rejected:plan", result
