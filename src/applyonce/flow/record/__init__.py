"""A call's record, shared by every use case: settling it (receipt, then ledger row), adopting a
commit found in Git, verifying a receipt against Git, what a call changes, its claim's lease."""
