"""An agent loop over applyonce's tool-call adapter, in the OpenAI and the Anthropic shapes.

A scripted model (no network, no API key) works on a repository the way a real one does: it adds
a file, sends a fix whose context is stale and gets the failure with its repair data, reads the
file through another tool (routed by ``fallback=``), sends the corrected patch, and then the
harness retries a turn whose results it lost (a timeout): the retry is answered from the stored
result and commits nothing. Everything the loop needs is in this file; swap ``ScriptedModel`` for
a real client (``client.chat.completions.create``, ``client.messages.create``) and nothing else
changes.

    python examples/agent_loop.py path/to/repo [--api openai|anthropic|both]

Each API gets its own file (``cart_openai.py``, ``cart_anthropic.py``); what the model reads is
printed as the transcript.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from applyonce.agents import ToolCall, ToolCallAdapter

ADD = """*** Begin Patch
*** Add File: {path}
+def total(prices):
+    return sum(prices)
*** End Patch
"""

# Stale: the model remembers a line the file does not have.
STALE = """*** Begin Patch
*** Update File: {path}
@@
 def total(prices):
-    return sum(prices) + 0
+    return round(sum(prices), 2)
*** End Patch
"""

FIX = """*** Begin Patch
*** Update File: {path}
@@
 def total(prices):
-    return sum(prices)
+    return round(sum(prices), 2)
*** End Patch
"""


class ScriptedModel:
    """Stands in for a model API: each turn answers the conversation so far, in the API's shape
    (``openai``: a Chat Completions assistant message with ``tool_calls``; ``anthropic``: a
    Messages API assistant message with ``tool_use`` blocks)."""

    def __init__(self, api: str, path: str) -> None:
        self.api = api
        self.path = path
        self.turn = 0

    def respond(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.turn += 1
        last = _last_results(self.api, messages)
        if self.turn == 1:
            return self._calls(("apply_patch", {"patch": ADD.format(path=self.path)}))
        if self.turn == 2:
            return self._calls(("apply_patch", {"patch": STALE.format(path=self.path)}))
        if self.turn == 3:
            # The failure says what it expected and shows the file's lines: read the file.
            assert last and last[0][1] and "expected lines not found" in last[0][0], last
            return self._calls(("read_file", {"path": self.path}))
        if self.turn == 4:
            assert last and "return sum(prices)\n" in last[0][0], last
            return self._calls(("apply_patch", {"patch": FIX.format(path=self.path)}))
        return self._text("The total is rounded to cents now.")

    def _calls(self, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
        ids = [f"call_{self.turn}_{n}" for n in range(len(calls))]
        if self.api == "openai":
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for id, (name, arguments) in zip(ids, calls, strict=True)
                ],
            }
        return {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": f"toolu_{id}", "name": name, "input": arguments}
                for id, (name, arguments) in zip(ids, calls, strict=True)
            ],
        }

    def _text(self, text: str) -> dict[str, Any]:
        if self.api == "openai":
            return {"role": "assistant", "content": text}
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _last_results(api: str, messages: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """The tool results the model read last: (text, is_error) each."""
    if api == "openai":
        found = []
        for message in reversed(messages):
            if message.get("role") != "tool":
                break
            text = message["content"]
            found.append((text, text.startswith("error")))
        return found[::-1]
    last = messages[-1]
    if last.get("role") != "user" or not isinstance(last.get("content"), list):
        return []
    return [(block["content"], block["is_error"]) for block in last["content"]]


def read_file(repo: Path) -> Callable[[ToolCall], str]:
    """The harness's own tools (here: ``read_file``), for ``fallback=``."""

    def answer(call: ToolCall) -> str:
        if call.name != "read_file":
            raise LookupError(f"no tool named {call.name}")
        arguments = call.arguments
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
        return (repo / str(arguments["path"])).read_text(encoding="utf-8")

    return answer


def run(api: str, repo: Path) -> list[dict[str, Any]]:
    """One conversation, to its end; the messages."""
    path = f"cart_{api}.py"
    model = ScriptedModel(api, path)
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Round {path}'s total."}]
    with ToolCallAdapter(repo, fallback=read_file(repo)) as adapter:
        while True:
            reply = model.respond(messages)
            messages.append(reply)
            results = adapter.run(reply)  # the tool calls in it, answered in its shape
            if not results:
                break
            _show(api, f"turn {model.turn}", results)
            if model.turn == 4:
                # The harness lost these results (a timeout) and runs the turn again: each call
                # is answered from its stored result (a replay), and nothing is committed twice.
                results = adapter.run(reply)
                _show(api, "the same turn, retried by the harness", results)
            if api == "anthropic":
                messages.append({"role": "user", "content": results})
            else:
                messages.extend(results)
    return messages


def _show(api: str, what: str, results: list[dict[str, Any]]) -> None:
    for result in results:
        text = result.get("content", result.get("output"))
        error = result.get("is_error", False)
        print(f"--- {api}, {what}{' (is_error)' if error else ''}")
        print(text, end="" if str(text).endswith("\n") else "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a Git repository (a scratch one: it commits)")
    parser.add_argument("--api", choices=["openai", "anthropic", "both"], default="both")
    args = parser.parse_args(argv)
    for api in ("openai", "anthropic") if args.api == "both" else (args.api,):
        run(api, args.repo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
