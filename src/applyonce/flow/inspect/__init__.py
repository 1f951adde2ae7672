"""The read-only commands: ``applyonce audit`` (every trailer commit against its receipt),
``applyonce replay`` (every decision re-derived from the record alone), ``show`` / ``log`` (the
calls), an agent's ``view`` of a branch's files. They write no Git ref, receipt or ledger row.
Repeating a finished call is :mod:`applyonce.flow.repeat`, not :mod:`.replay`."""
