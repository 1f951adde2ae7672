"""applyonce: exactly-once apply_patch for coding agents, backed by Git.

from applyonce import Executor
with Executor("path/to/repo") as executor:
    receipt = executor.apply(patch_text, tool_call_id="call_1")
receipt.status, receipt.call_id, receipt.commit, receipt.files, receipt.output
"""

from __future__ import annotations

# Not typing's: importing typing would cost every process a few milliseconds (a call through
# the resident server imports this package and little else). Type checkers know the name.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

    from applyonce.core.receipt import Receipt
    from applyonce.errors import ApplyOnceError
    from applyonce.executor import (
        CallOptions,
        CallOutcome,
        Executor,
        ExecutorClosedError,
        PlanView,
    )

__version__ = "0.2.0"

__all__ = [
    "ApplyOnceError",
    "CallOptions",
    "CallOutcome",
    "Executor",
    "ExecutorClosedError",
    "PlanView",
    "Receipt",
    "__version__",
]

# Where each name of the facade lives. Imported on first use, not with the package: importing
# any applyonce module imports this one first, and a command (`applyonce --version`, `applyonce
# apply`) imports only what it uses.
_LAZY = {
    "ApplyOnceError": "applyonce.errors",
    "CallOptions": "applyonce.executor",
    "CallOutcome": "applyonce.executor",
    "Executor": "applyonce.executor",
    "ExecutorClosedError": "applyonce.executor",
    "PlanView": "applyonce.executor",
    "Receipt": "applyonce.core.receipt",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'applyonce' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found once, then a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
