"""After a crash, or by a person's decision: ``applyonce recover`` asks Git what happened to every
interrupted call (:mod:`~applyonce.flow.recovery.recover`), rebuilds lost records, removes what
killed writers left, finishes half-done pushes; ``applyonce resolve`` records a person's decision.
Never applies a patch twice."""
