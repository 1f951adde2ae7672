"""The trailer reader's own rules (the differential against git is tests/e2e/crash/test_audit_trailers.py)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.core.identity import CallIdentity
from applyonce.core.message import build_message, identity_from_trailers
from applyonce.core.plan import FileChange, TreePlan
from applyonce.core.trailers import _by_rules, _plain_block, parse_trailers


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


_LINE = st.sampled_from(
    [
        b"Title",
        b"",
        b" ",
        b"Call-Id: abc",
        b"Tool: apply_patch",
        b"Token : spaced",
        b"Empty: ",
        b"  continued value",
        b"# a comment",
        b"Signed-off-by: A <a@b>",
        b"(cherry picked from commit 123)",
        b"Conflicts:",
        b"\tfile.txt",
        b"plain words",
        b"---",
        b"Key: caf\xc3\xa9 \xff",
        b"Crlf: v\r",
        b"# ------------------------ >8 ------------------------",
    ]
)


_TITLE = st.sampled_from([b"Title", b"plain words", b"Call-Id: abc", b"", b"\xff"])
# Mostly trailer lines after the last blank line, so that both readers are compared often.
_TRAILER = st.sampled_from(
    [b"Call-Id: abc", b"Tool: apply_patch", b"Empty: ", b"Key: caf\xc3\xa9 \xff"]
)


@settings(max_examples=400, deadline=None)
@given(
    head=st.one_of(st.lists(_LINE, max_size=6), st.lists(_TITLE, min_size=1, max_size=3)),
    tail=st.one_of(
        st.lists(_TRAILER, min_size=1, max_size=6), st.lists(st.one_of(_TRAILER, _LINE), max_size=6)
    ),
    end=st.sampled_from([b"\n", b"\n", b"\n", b"", b"\n\n"]),
    comment=st.sampled_from([b"#", b"C"]),
)
def test_the_shortcut_for_plain_blocks_reads_what_the_rules_read(
    head: list[bytes], tail: list[bytes], end: bytes, comment: bytes
) -> None:
    message = b"\n".join([*head, b"", *tail]) + end
    expected = _by_rules(message, comment).pairs
    assert parse_trailers(message, comment_char=comment).pairs == expected
    if _plain_block(message, comment) is not None:
        assert expected  # the shortcut only takes messages that end in a trailer block


def test_applyonce_messages_take_the_shortcut() -> None:
    ident = CallIdentity.compute("a" * 64, attempt=2)
    plan = TreePlan((FileChange("a.txt", "add", b"x\n", 0o100644),))
    message = build_message(plan, ident, tool_call_id="call_1").encode()
    assert _plain_block(message, b"#") is not None
