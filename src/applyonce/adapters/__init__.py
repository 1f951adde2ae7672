"""The adapters: how callers reach the :class:`~applyonce.executor.Executor` facade.

:mod:`~applyonce.adapters.cli` (the ``applyonce`` command), :mod:`~applyonce.adapters.mcp_server`
(the MCP tools) with its stdin (:mod:`~applyonce.adapters.mcp_wire`), the agent harnesses
(:mod:`~applyonce.adapters.agents`, :mod:`~applyonce.adapters.texteditor`,
:mod:`~applyonce.adapters.toolcalls`), the tools' schemas and structured results
(:mod:`~applyonce.adapters.schemas`, :mod:`~applyonce.adapters.results`), the terminal
(:mod:`~applyonce.adapters.console`) and ``applyonce demo`` (:mod:`~applyonce.adapters.demo`).
Only adapters import the ``applyonce`` package itself (its ``__init__`` re-exports the facade).
"""
