"""``applyonce schema``: tool definitions for OpenAI, Anthropic and MCP, and the patch grammar.

The OpenAI custom tool holds the model to a Lark grammar. It is checked with ``lark`` itself (a
test-only dependency): it must build as an LALR(1) grammar (no ambiguity for the model's
constrained decoder to trip on), accept every canonical patch the renderer can produce, and refuse
what the parser refuses.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lark import Lark
from lark.exceptions import LarkError
from typer.testing import CliRunner

from applyonce import Executor
from applyonce.adapters.cli import app
from applyonce.adapters.schemas import CODEX_LARK_GRAMMAR, EXAMPLE_PATCH
from applyonce.patch import AddFile, DeleteFile, Hunk, HunkLine, Patch, UpdateFile
from applyonce.patch.codex import parse_codex, render_codex
from tests.conftest import make_repo

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def schema(*args: str) -> Any:
    result = CliRunner().invoke(app, ["schema", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


GRAMMAR = Lark(CODEX_LARK_GRAMMAR, parser="lalr")


# --- the definitions ----------------------------------------------------------------------------


def test_openai_responses_tools() -> None:
    tools = schema("--for", "openai")
    assert set(tools) == {"function", "custom"}
    function, custom = tools["function"], tools["custom"]
    assert function["type"] == "function" and function["name"] == "apply_patch"
    assert function["strict"] is True
    # Strict mode: every property required (an optional one nullable), nothing else allowed.
    properties = function["parameters"]["properties"]
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "patch": {"type": "string", "description": properties["patch"]["description"]},
            # Optional in strict mode: required, and null allowed.
            "attempt": {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": 2**53 - 1},
                    {"type": "null"},
                ],
                "description": properties["attempt"]["description"],
            },
            "summary": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": properties["summary"]["description"],
            },
        },
        "required": ["patch", "attempt", "summary"],
        "additionalProperties": False,
    }
    assert custom["type"] == "custom" and custom["name"] == "apply_patch"
    assert set(custom) == {"type", "name", "description", "format"}
    assert custom["format"] == {
        "type": "grammar",
        "syntax": "lark",
        "definition": CODEX_LARK_GRAMMAR,
    }
    assert schema("--for", "openai", "--variant", "custom") == custom


def test_openai_chat_completions_tools() -> None:
    tools = schema("--for", "openai", "--api", "chat")
    assert tools["function"]["type"] == "function"
    assert tools["function"]["function"]["name"] == "apply_patch"
    assert tools["function"]["function"]["parameters"]["required"] == [
        "patch",
        "attempt",
        "summary",
    ]
    custom = tools["custom"]
    assert custom["type"] == "custom" and custom["custom"]["name"] == "apply_patch"
    assert custom["custom"]["format"] == {
        "type": "grammar",
        "grammar": {"syntax": "lark", "definition": CODEX_LARK_GRAMMAR},
    }
    assert schema("--for", "openai", "--api", "chat", "--variant", "function") == tools["function"]


def test_anthropic_tool() -> None:
    tool = schema("--for", "anthropic")
    assert set(tool) == {"name", "description", "input_schema"}
    assert tool["name"] == "apply_patch"
    assert tool["input_schema"]["required"] == ["patch"]
    assert tool["input_schema"]["additionalProperties"] is False


def test_mcp_tools() -> None:
    tools = {tool["name"]: tool for tool in schema("--for", "mcp")}
    assert set(tools) == {"apply_patch", "patch_receipt", "revert_patch", "land_lane"}
    apply_patch = tools["apply_patch"]
    assert set(apply_patch["inputSchema"]["properties"]) == {
        "patch",
        "tool_call_id",
        "dry_run",
        "attempt",
        "summary",
        "lane",
    }
    assert apply_patch["inputSchema"]["properties"]["dry_run"]["type"] == "boolean"
    assert apply_patch["inputSchema"]["required"] == ["patch"]
    for tool in tools.values():  # the structured result's schema: an object, as MCP requires
        assert tool["outputSchema"]["type"] == "object"
        assert tool["name"] == "land_lane" or "status" in tool["outputSchema"]["required"]
    land = tools["land_lane"]
    assert set(land["inputSchema"]["properties"]) == {"lane", "all", "onto"}
    assert land["inputSchema"]["additionalProperties"] is False
    assert {"target", "landed", "blocked", "already", "exit_code"} <= set(
        land["outputSchema"]["required"]
    )
    assert land["annotations"]["idempotentHint"] is True
    assert "receipt" in tools["patch_receipt"]["outputSchema"]["properties"]
    assert apply_patch["annotations"]["idempotentHint"] is True
    assert apply_patch["annotations"]["readOnlyHint"] is False
    assert tools["patch_receipt"]["annotations"]["readOnlyHint"] is True
    assert tools["patch_receipt"]["inputSchema"]["required"] == ["call_id"]


def test_every_target_teaches_the_same_description() -> None:
    descriptions = {
        schema("--for", "anthropic")["description"],
        schema("--for", "openai")["function"]["description"],
        schema("--for", "openai", "--api", "chat")["custom"]["custom"]["description"],
        schema("--for", "mcp")[0]["description"],
    }
    [description] = descriptions
    for taught in (
        "*** Begin Patch",
        "*** Update File: ",
        "*** Move to: ",
        "@@",
        "exactly once",
        "one Git commit",
        "returns the stored result",
        EXAMPLE_PATCH,
    ):
        assert taught in description


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--for", "gemini"], "error: unknown target 'gemini'"),
        (["--for", "openai", "--variant", "regex"], "error: unknown variant 'regex'"),
        (["--for", "openai", "--api", "assistants"], "error: unknown OpenAI API 'assistants'"),
        (["--for", "anthropic", "--variant", "custom"], "error: --api and --variant are for"),
    ],
)
def test_bad_targets_are_usage_errors(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["schema", *args])
    assert result.exit_code == 2 and result.output.startswith(message)


# --- the example in the description really works ------------------------------------------------


def test_the_taught_example_applies_as_one_commit(tmp_path: Path) -> None:
    GRAMMAR.parse(EXAMPLE_PATCH)
    repo = make_repo(
        tmp_path / "r",
        {
            "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
            "old_notes.txt": "todo\n",
        },
    )
    receipt = Executor(repo.path).apply(EXAMPLE_PATCH)
    assert receipt.status == "committed", receipt.output
    assert receipt.output == (
        "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\nD old_notes.txt\n"
    )


# --- the grammar --------------------------------------------------------------------------------


def scenario_patches() -> list[Patch]:
    patches = []
    for patch_file in sorted(SCENARIOS.glob("*/patch.txt")):
        try:
            patches.append(parse_codex(patch_file.read_text()))
        except Exception:  # bad-patch scenarios: nothing to render
            continue
    return patches


def test_the_grammar_accepts_every_scenario_in_its_canonical_form() -> None:
    patches = scenario_patches()
    assert len(patches) >= 20
    for patch in patches:
        GRAMMAR.parse(render_codex(patch))


HANDWRITTEN = [
    # A bare first hunk, several anchors, End of File, a move without hunks, an empty new file.
    "*** Begin Patch\n*** Update File: a.py\n ctx\n-a\n+b\n@@ class A:\n@@     def f(self):\n"
    " x\n-1\n+2\n*** End of File\n*** Update File: b.py\n*** Move to: c/b.py\n"
    "*** Add File: empty.txt\n*** Delete File: gone.txt\n*** End Patch",
    "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n*** End Patch\n",
    # The rename idiom: a context-only hunk.
    "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n x\n*** End Patch\n",
]


@pytest.mark.parametrize("text", HANDWRITTEN)
def test_what_the_grammar_accepts_the_parser_accepts(text: str) -> None:
    GRAMMAR.parse(text)
    assert parse_codex(text).operations


REFUSED = [
    "garbage\n",
    "*** Begin Patch\n*** End Patch\n",  # no operations
    "*** Begin Patch\n*** Update File: a.py\n*** End Patch\n",  # nothing to change
    "*** Begin Patch\n*** Update File: a.py\n@@\n*** End Patch\n",  # an empty hunk
    "*** Begin Patch\n*** Add File: a.py\nno plus\n*** End Patch\n",
    "*** Begin Patch\n*** Add File: a.py\n+x\n",  # no end marker
    "*** Begin Patch\n*** Frobnicate File: a.py\n*** End Patch\n",
]


@pytest.mark.parametrize("text", REFUSED)
def test_what_the_parser_refuses_the_grammar_refuses(text: str) -> None:
    with pytest.raises(LarkError):
        GRAMMAR.parse(text)
    with pytest.raises(Exception):  # noqa: B017 - PatchSyntaxError, whatever its wording
        parse_codex(text)


def test_the_grammar_has_no_lalr_conflicts(caplog: pytest.LogCaptureFixture) -> None:
    # Lark refuses reduce/reduce conflicts outright and resolves shift/reduce ones silently,
    # logging them only in debug mode: an unambiguous grammar has neither.
    with caplog.at_level(logging.DEBUG, logger="lark"):
        Lark(CODEX_LARK_GRAMMAR, parser="lalr", debug=True)
    assert not [r for r in caplog.records if "conflict" in r.getMessage()]
    Lark(CODEX_LARK_GRAMMAR, parser="earley").parse(EXAMPLE_PATCH)


line_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=12
)
path = st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,2}\.(py|md|txt)", fullmatch=True)
hunk_line = st.builds(HunkLine, kind=st.sampled_from([" ", "-", "+"]), text=line_text)
edit_line = st.builds(HunkLine, kind=st.sampled_from(["-", "+"]), text=line_text)
hunk = st.builds(
    lambda before, edit, after, anchors, eof: Hunk(
        anchors=tuple(anchors), lines=(*before, edit, *after), end_of_file=eof
    ),
    st.lists(st.builds(HunkLine, kind=st.just(" "), text=line_text), max_size=3),
    edit_line,
    st.lists(hunk_line, max_size=3),
    st.lists(line_text.filter(lambda s: s.strip() == s and s != ""), max_size=2),
    st.booleans(),
)
operation = st.one_of(
    st.builds(
        AddFile,
        path=path,
        content=st.lists(line_text, max_size=4).map(
            lambda lines: "".join(line + "\n" for line in lines)
        ),
    ),
    st.builds(DeleteFile, path=path),
    st.builds(
        UpdateFile,
        path=path,
        move_to=st.none() | path,
        hunks=st.lists(hunk, min_size=1, max_size=3).map(tuple),
    ),
)


@given(st.lists(operation, min_size=1, max_size=4))
def test_every_rendered_patch_is_in_the_grammar(operations: list[Any]) -> None:
    GRAMMAR.parse(render_codex(Patch(operations=tuple(operations))))
