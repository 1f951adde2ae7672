"""One call (``applyonce apply``, ``applyonce revert``, MCP ``apply_patch`` / ``revert_patch``):
the corridor from patch text to one published commit (:mod:`~applyonce.flow.call.apply`), and the
gates it passes: approval, checks, git-config options, limits."""
