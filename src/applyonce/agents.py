"""The tool-call adapter's public import path, ``applyonce.agents`` (stable API: see
``docs/reference/python.md``). It lives in :mod:`applyonce.adapters.agents` with the other
adapters; this module only names it here."""

from applyonce.adapters.agents import *  # noqa: F403
from applyonce.adapters.agents import __all__ as __all__
