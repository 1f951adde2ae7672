"""The import paths the docs name as public API stay importable wherever the code lives."""

from __future__ import annotations

import applyonce
import applyonce.agents
from applyonce.adapters import agents


def test_the_tool_call_adapter_is_importable_from_applyonce_agents() -> None:
    assert applyonce.agents.ToolCallAdapter is agents.ToolCallAdapter
    assert set(applyonce.agents.__all__) == set(agents.__all__)


def test_the_facade_names_the_executor() -> None:
    assert {"Executor", "CallOptions", "Receipt", "ApplyOnceError"} <= set(applyonce.__all__)
