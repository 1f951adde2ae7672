"""The use cases: what applyonce does, over the seams below it. Each takes a
:class:`~applyonce.flow.context.Context`.

* :mod:`~applyonce.flow.call`: one call (``apply``, ``revert``): the corridor and its gates;
* :mod:`~applyonce.flow.recovery`: after a crash or by a person's decision (``recover``,
  ``resolve``);
* :mod:`~applyonce.flow.inspect`: the read-only commands (``audit``, ``replay``, ``show``,
  ``log``, an agent's ``view``);
* :mod:`~applyonce.flow.record`: a call's record, shared by all three (settle, adopt, verify,
  what a call changes, its lease);
* :mod:`~applyonce.flow.checkouts`: the user's checkouts of the branch (sync, lag, dirty paths);
* shared modules: :mod:`~applyonce.flow.context` (the repository, its state and the seams),
  :mod:`~applyonce.flow.options` (what a caller gives a call and gets back),
  :mod:`~applyonce.flow.repeat` (a repeat of a finished call), :mod:`~applyonce.flow.state_guard`.

Higher to lower: call → recovery → inspect → record | checkouts → options → repeat → context →
state_guard (the ``flow-layers`` contract in pyproject.toml).

May import :mod:`applyonce.git`, :mod:`applyonce.state`, :mod:`applyonce.core`,
:mod:`applyonce.patch`; never an adapter, never pygit2 or sqlite3.
"""
