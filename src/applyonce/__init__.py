"""applyonce: exactly-once apply_patch for coding agents, backed by Git.

from applyonce import Executor
receipt = Executor("path/to/repo").apply(patch_text, tool_call_id="call_1")
receipt.status, receipt.call_id, receipt.commit, receipt.files, receipt.output
"""

from __future__ import annotations

from applyonce.core.receipt import Receipt
from applyonce.errors import ApplyOnceError
from applyonce.executor import CallOptions, CallOutcome, Executor, PlanView

__version__ = "0.1.0"

__all__ = [
    "ApplyOnceError",
    "CallOptions",
    "CallOutcome",
    "Executor",
    "PlanView",
    "Receipt",
    "__version__",
]
