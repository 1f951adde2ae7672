"""The one base error of applyonce.

Every expected failure is an :class:`ApplyOnceError` subclass, defined next to the code that raises
it. Each carries a machine-readable ``kind``, a one-line ``message`` (what happened), a ``hint``
(what to do), the CLI ``exit_code`` of docs/design.md §8, whether a retry of the same call may
succeed
(``retryable``), and structured ``details`` (path, hunk index, patch line, expected lines, …) that
the receipt stores.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

# Exit codes (docs/design.md §8). They are a contract: harnesses branch on them.
EXIT_COMMITTED = 0
EXIT_REJECTED = 1
EXIT_PROBLEMS = 1  # audit found problems, replay found disagreements
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_CONFLICT = 4
EXIT_UNKNOWN = 5
EXIT_INTERRUPTED = 130

_SURROGATE = re.compile("[\ud800-\udfff]")


class ApplyOnceError(Exception):
    """Base of every expected failure. Never shown as a traceback."""

    kind: ClassVar[str] = "error"
    exit_code: ClassVar[int] = EXIT_REJECTED
    default_hint: ClassVar[str] = ""
    default_retryable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        retryable: bool | None = None,
        **details: Any,
    ) -> None:
        message = _printable(message)
        super().__init__(message)
        self.message = message
        self.hint = _printable(hint if hint is not None else self.default_hint)
        self.retryable = self.default_retryable if retryable is None else retryable
        self.details = {k: _printable(v) for k, v in details.items() if v is not None}

    def one_line(self) -> str:
        """``what happened; what to do`` on a single line."""
        text = self.message if not self.hint else f"{self.message}; {self.hint}"
        return " ".join(text.split("\n"))

    def to_dict(self) -> dict[str, Any]:
        """The structured form stored in a receipt's ``error`` field."""
        return {
            "kind": self.kind,
            "message": self.message,
            "hint": self.hint,
            "retryable": self.retryable,
            **self.details,
        }


def _printable(value: Any) -> Any:
    """``value`` with the bytes that are not UTF-8 (surrogate escapes, from a unified diff's
    content) written as ``\\udcXX``: a receipt is JSON, and an error message is shown."""
    if isinstance(value, str):
        if _SURROGATE.search(value):
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, list):
        return [_printable(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_printable(item) for item in value)
    if isinstance(value, dict):
        return {key: _printable(item) for key, item in value.items()}
    return value


class UsageError(ApplyOnceError):
    """The caller's options do not make sense."""

    kind = "usage"
    exit_code = EXIT_USAGE


class ConflictError(ApplyOnceError):
    """The call cannot run now: held by another process, dirty path, key reused, base moved."""

    kind = "conflict"
    exit_code = EXIT_CONFLICT


class StateError(ApplyOnceError):
    """applyonce's own state (receipts, ledger) is unreadable or untrustworthy."""

    kind = "state"
    exit_code = EXIT_UNKNOWN
