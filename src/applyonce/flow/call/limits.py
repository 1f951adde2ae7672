"""The caps on a call's patch (``patch/limits.py``), read from git config, where a patch cannot
change them; and the cap on the bytes it writes, judged from the tip's file sizes before the call
leaves any state."""

from __future__ import annotations

from applyonce.errors import UsageError
from applyonce.flow.context import Context
from applyonce.patch import Patch
from applyonce.patch.limits import CONFIG_KEYS, Limits, write_bound, write_error


def read_limits(ctx: Context) -> Limits:
    """The repository's caps: each ``applyonce.max*`` set in git config, else its default.

    Raises:
        UsageError: a value that is not a positive integer.
    """
    values: dict[str, int] = {}
    for field, key in CONFIG_KEYS.items():
        try:
            value = ctx.store.config_int(key)
        except ValueError:
            value = 0
        if value is None:
            continue
        if value <= 0:
            raise UsageError(
                f"git config {key} is not a positive number",
                hint=f"set it to a number of {'files' if field == 'files' else 'bytes'} "
                "(k, m and g suffixes allowed), or unset it for the default",
            )
        values[field] = value
    return Limits(**values)


def check_write_bound(ctx: Context, patch: Patch, ref: str, limits: Limits) -> None:
    """Refuse ``patch`` when the files it writes could hold more than ``limits.write_bytes``,
    judged from the sizes of the tip's files (object headers: nothing is read or applied).

    Raises:
        LimitError: over the cap.
    """
    tree = ctx.store.tree_at(ctx.publisher.tip(ref))
    bound = write_bound(patch, tree.size)
    if bound > limits.write_bytes:
        raise write_error(bound, limits, bound=True)
