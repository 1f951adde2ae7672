"""The trailer reader's own rules (the differential against git is tests/e2e/crash/test_audit_trailers.py)."""

from __future__ import annotations

from applyonce.core.identity import CallIdentity
from applyonce.core.message import build_message, identity_from_trailers
from applyonce.core.plan import FileChange, TreePlan
from applyonce.core.trailers import parse_trailers


def test_applyonce_messages_read_back_to_their_identity() -> None:
    ident = CallIdentity.compute("a" * 64, attempt=3, idempotency_key="run-1")
    plan = TreePlan((FileChange("x.py", "add", b"x\n", 0o100644),))
    message = build_message(plan, ident, tool_call_id="call_1").encode()
    trailers = parse_trailers(message)
    assert identity_from_trailers(trailers) == ident
    assert trailers["Tool-Call-Id"] == "call_1"


def test_keys_ignore_case_and_every_value_is_kept() -> None:
    trailers = parse_trailers(b"s\n\ncall-id: one\nCALL-ID:two\nCall-Id:\nTool: t\n  folded\n")
    assert trailers.get("Call-Id") == "one"
    assert trailers.all("Call-Id") == ["one", "two"]  # an empty value names nothing
    assert trailers["tool"] == "t folded"
    assert list(trailers) == ["call-id", "Tool"]


def test_a_divider_line_does_not_hide_the_block_but_the_title_is_never_one() -> None:
    assert parse_trailers(b"s\n\ntext\n---\n\nCall-Id: x\n").all("Call-Id") == ["x"]
    assert parse_trailers(b"Call-Id: x\n").all("Call-Id") == []
    assert parse_trailers(b"s\n\nCall-Id: x\n;c\n", comment_char=b";").all("Call-Id") == ["x"]
    assert parse_trailers(b"s\n\nCall-Id: x\n;c\n").all("Call-Id") == []
