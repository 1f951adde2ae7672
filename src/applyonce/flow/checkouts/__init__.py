"""The user's checkouts of a branch: the commits they may still show (lag), the uncommitted
changes on a call's paths (dirty), bringing them to the branch's tip after a call (sync)."""
