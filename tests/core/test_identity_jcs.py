"""The call identity's canonical form is RFC 8785 (JCS): checked against the independent ``rfc8785``
package on random identities, and recomputed from a real commit's trailers as docs/design.md shows.

The identities are random in every field the canonical form sees: patch texts with non-ASCII and
astral-plane characters, control characters and bytes that are not UTF-8; line numbers up to
JCS's largest integer; random contract digests, attempts, tool versions and idempotency keys.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.core.identity import ApplyPatchArgs, CallIdentity, canonical
from applyonce.executor import Executor
from applyonce.patch.codex import PatchSyntaxError
from applyonce.patch.editjson import parse_edit_json
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    CreateCommand,
    DeleteCommand,
    DeleteFile,
    EditFile,
    Hunk,
    HunkLine,
    InsertCommand,
    StrReplaceCommand,
    UpdateFile,
)
from tests.conftest import Repo

JCS_MAX_INT = 2**53 - 1

# Any Unicode scalar value (surrogates are not text), weighted towards what breaks serialisers:
# control characters, quotes and backslashes, non-ASCII, astral-plane (UTF-16 pairs), and the
# private use area, which sorts after surrogates in UTF-16 but before astral code points in UTF-8.
SPECIAL = st.sampled_from(
    [
        "\x00",
        "\x1f",
        "\x7f",
        '"',
        "\\",
        "\u2028",
        "é",
        "\ue000",
        "\uffff",
        "\U0001f600",
        "\U0010ffff",
    ]
)
TEXT = st.text(st.one_of(st.characters(exclude_categories=["Cs"]), SPECIAL), max_size=40)
# Bytes that are not UTF-8 reach the model as surrogate escapes (unified diffs); they dump as
# {"utf8b": base64}.
RAW_TEXT = st.binary(max_size=20).map(lambda b: (b + b"\xff").decode("utf-8", "surrogateescape"))
ANY_TEXT = st.one_of(TEXT, RAW_TEXT)
NON_EMPTY = TEXT.filter(bool)
PATH = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20)
LINE_NO = st.one_of(st.none(), st.integers(0, 2**31 - 1))
MODE = st.sampled_from([None, "100644", "100755"])
HEX64 = st.text("0123456789abcdef", min_size=64, max_size=64)
KEY = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=200)

hunks = st.builds(
    Hunk,
    anchors=st.tuples(TEXT) | st.just(()),
    lines=st.lists(
        st.builds(HunkLine, kind=st.sampled_from([" ", "-", "+"]), text=ANY_TEXT), max_size=4
    ).map(tuple),
    end_of_file=st.booleans(),
    old_no_final_newline=st.booleans(),
    new_no_final_newline=st.booleans(),
    old_start=LINE_NO,
    new_start=LINE_NO,
)
commands = st.one_of(
    st.builds(CreateCommand, file_text=TEXT),
    st.builds(StrReplaceCommand, old_str=NON_EMPTY, new_str=TEXT),
    st.builds(InsertCommand, insert_line=st.integers(0, JCS_MAX_INT), insert_text=NON_EMPTY),
    st.builds(DeleteCommand),
)
operations = st.one_of(
    st.builds(AddFile, path=PATH, content=ANY_TEXT, mode=MODE),
    st.builds(DeleteFile, path=PATH),
    st.builds(
        UpdateFile,
        path=PATH,
        move_to=st.none() | PATH,
        hunks=st.lists(hunks, max_size=3).map(tuple),
        mode=MODE,
    ),
    st.builds(
        CopyFile, path=PATH, copy_to=PATH, hunks=st.lists(hunks, max_size=2).map(tuple), mode=MODE
    ),
    st.builds(EditFile, path=PATH, commands=st.lists(commands, min_size=1, max_size=3).map(tuple)),
)
args_strategy = st.builds(
    ApplyPatchArgs,
    ref=st.just("refs/heads/main") | TEXT.map(lambda t: "refs/heads/" + t),
    operations=st.lists(operations, min_size=1, max_size=3).map(tuple),
)


@settings(max_examples=60)
@given(args_strategy)
def test_args_serialise_as_rfc8785(args: ApplyPatchArgs) -> None:
    dumped = args.model_dump(mode="json")
    assert args.canonical() == rfc8785.dumps(dumped)
    assert args.sha256() == hashlib.sha256(rfc8785.dumps(dumped)).hexdigest()


def documented_body(ident: CallIdentity) -> dict[str, Any]:
    """The call_id body as core/identity.py's docstring lists it."""
    body: dict[str, Any] = {
        "v": 1,
        "contract_sha256": ident.contract_sha256,
        "tool": ident.tool,
        "tool_version": ident.tool_version,
    }
    if ident.idempotency_key is None:
        body |= {"attempt": ident.attempt, "args_sha256": ident.args_sha256}
    else:
        body["idempotency_key"] = ident.idempotency_key
    return body


@settings(max_examples=60)
@given(
    args=args_strategy,
    contract=HEX64,
    attempt=st.integers(1, JCS_MAX_INT),
    tool=st.sampled_from(["apply_patch"]) | TEXT,
    tool_version=st.sampled_from(["applyonce-patch/2"]) | TEXT,
    key=st.none() | KEY,
)
def test_call_id_is_the_sha256_of_the_rfc8785_body(
    args: ApplyPatchArgs, contract: str, attempt: int, tool: str, tool_version: str, key: str | None
) -> None:
    ident = CallIdentity.compute(
        args.sha256(),
        contract_sha256=contract,
        attempt=attempt,
        idempotency_key=key,
        tool=tool,
        tool_version=tool_version,
    )
    body = documented_body(ident)
    assert ident.call_id == hashlib.sha256(rfc8785.dumps(body)).hexdigest()
    assert ident.recompute() == ident.call_id


@settings(max_examples=60)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-JCS_MAX_INT, JCS_MAX_INT)
        | ANY_TEXT.filter(lambda t: not any("\udc80" <= c <= "\udcff" for c in t)),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.text(st.characters(max_codepoint=0x7F), max_size=8), inner, max_size=4
            )
        ),
        max_leaves=12,
    )
)
def test_canonical_is_rfc8785_for_ascii_keys(value: Any) -> None:
    """The serialiser itself, on any JSON value identities can hold: ASCII names (the only
    kind they have), any strings, integers within JCS's range."""
    assert canonical(value) == rfc8785.dumps(value)


def test_an_insert_line_past_jcs_integers_is_refused() -> None:
    """JCS numbers are doubles: 2**53 has no exact JCS form, so the parser refuses such an
    insert_line (no file has that many lines) and no identity needs one; 2**53-1 is taken."""
    command = '{"command": "insert", "path": "a.txt", "insert_line": %d, "insert_text": "x"}'
    with pytest.raises(PatchSyntaxError, match="insert_line"):
        parse_edit_json(command % 2**53)
    patch = parse_edit_json(command % (2**53 - 1))
    args = ApplyPatchArgs(ref="refs/heads/main", operations=patch.operations)
    assert args.canonical() == rfc8785.dumps(args.model_dump(mode="json"))


# The "How to recompute a Call-Id" of docs/design.md §3, run as written in a repository with one call.
DESIGN_EXAMPLE = """\
import hashlib, subprocess, rfc8785
log = ["git", "log", "-1", "--format=%(trailers:only,unfold)"]
t = dict(line.split(": ", 1) for line in subprocess.check_output(log, text=True).splitlines() if line)
body = {"v": 1, "contract_sha256": t["Contract-Sha256"], "tool": t["Tool"], "tool_version": t["Tool-Version"]}
body |= {"idempotency_key": t["Idempotency-Key"]} if "Idempotency-Key" in t else {"attempt": int(t["Attempt"]), "args_sha256": t["Args-Sha256"]}
print(hashlib.sha256(rfc8785.dumps(body)).hexdigest() == t["Call-Id"], t["Call-Id"])
"""


def test_the_design_shows_the_example_as_tested() -> None:
    design = (Path(__file__).resolve().parents[2] / "docs" / "design.md").read_text()
    assert f"```python\n{DESIGN_EXAMPLE}```" in design


def test_the_design_example_recomputes_call_ids_from_the_trailers(repo: Repo) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("*** Begin Patch\n*** Add File: notes/é😀.md\n+ünïcode\n*** End Patch\n", {"attempt": 7}),
        (
            "*** Begin Patch\n*** Add File: notes/b.md\n+b\n*** End Patch\n",
            {"idempotency_key": "run-1/step-2"},
        ),
    ]
    for patch, options in calls:
        executor = Executor(repo.path)
        try:
            assert executor.apply(patch, **options).status == "committed"
        finally:
            executor.close()
        done = subprocess.run(
            [sys.executable, "-c", DESIGN_EXAMPLE],
            cwd=repo.path,
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},
            check=False,
            timeout=60,
        )
        assert done.stderr == ""
        assert done.stdout == f"True {repo.call_ids()[0]}\n"
