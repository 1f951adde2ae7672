"""Call identity: canonical JSON, normalised args, the call_id formula of docs/design.md §3."""

from __future__ import annotations

import hashlib

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from applyonce.core.identity import (
    EMPTY_CONTRACT_SHA256,
    ApplyPatchArgs,
    CallIdentity,
    canonical,
)
from applyonce.errors import UsageError
from applyonce.patch import parse

PATCH = "*** Begin Patch\n*** Update File: ./src//a.py\n@@\n-x\n+y\n*** End Patch\n"


def test_canonical_sorts_keys_without_whitespace() -> None:
    assert canonical({"b": 1, "a": [1, "é"]}) == '{"a":[1,"é"],"b":1}'.encode()


def test_canonical_refuses_floats() -> None:
    with pytest.raises(TypeError):
        canonical({"a": [1.5]})


def test_args_normalise_paths_and_defaults() -> None:
    args = ApplyPatchArgs.from_patch(parse(PATCH), ref="refs/heads/main", repo_root="/r")
    dumped = args.model_dump(mode="json")
    op = dumped["operations"][0]
    assert op["path"] == "src/a.py"
    assert op["move_to"] is None  # defaults are explicit
    assert op["hunks"][0]["end_of_file"] is False
    assert "source_line" not in op["hunks"][0]  # where a hunk sat in the text is not identity


def test_call_id_matches_the_documented_formula() -> None:
    args_sha = hashlib.sha256(b"x").hexdigest()
    ident = CallIdentity.compute(args_sha, attempt=3)
    body = {
        "v": 1,
        "contract_sha256": EMPTY_CONTRACT_SHA256,
        "attempt": 3,
        "tool": "apply_patch",
        "tool_version": "applyonce-patch/2",
        "args_sha256": args_sha,
    }
    expected = hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()
    assert ident.call_id == expected
    assert ident.recompute() == expected
    assert hashlib.sha256(b"").hexdigest() == EMPTY_CONTRACT_SHA256


def test_key_mode_ignores_args_and_attempt() -> None:
    one = CallIdentity.compute("a" * 64, attempt=1, idempotency_key="k1")
    two = CallIdentity.compute("b" * 64, attempt=9, idempotency_key="k1")
    assert one.call_id == two.call_id
    assert one.args_sha256 != two.args_sha256
    assert CallIdentity.compute("a" * 64, idempotency_key="k2").call_id != one.call_id


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"contract_sha256": "xyz"}, "not 64 lowercase hex"),
        ({"attempt": 0}, "attempt must be from 1"),
        ({"attempt": 2**63}, "attempt must be from 1"),
        ({"idempotency_key": "has space"}, "idempotency key"),
    ],
)
def test_bad_identity_inputs_are_usage_errors(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(UsageError, match=message):
        CallIdentity.compute("a" * 64, **kwargs)


@given(st.integers(min_value=1, max_value=10_000), st.integers(min_value=1, max_value=10_000))
def test_different_attempts_never_collide(a: int, b: int) -> None:
    ida = CallIdentity.compute("c" * 64, attempt=a).call_id
    idb = CallIdentity.compute("c" * 64, attempt=b).call_id
    assert (ida == idb) == (a == b)
