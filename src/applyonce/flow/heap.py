"""Passes over thousands of records without the cycle collector.

Audit and recover read ten thousand receipts, commits and rows into structures they keep until
the end, and make no reference cycles worth collecting: Python's cycle collector, run every few
hundred allocations over that growing heap, then costs a fifth of the pass. It is paused for the
pass (reference counting still frees everything as usual).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def without_cycle_collection(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, run with the cycle collector paused (as it was before, after it)."""

    @functools.wraps(func)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not gc.isenabled():
            return func(*args, **kwargs)
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            gc.enable()

    return paused
