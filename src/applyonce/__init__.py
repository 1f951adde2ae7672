"""applyonce: exactly-once apply_patch for coding agents, backed by Git."""

from __future__ import annotations

__version__ = "0.1.0"
