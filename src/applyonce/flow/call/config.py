"""A call's options from git config, where a patch cannot change them (docs/design.md §11).

Read from the config the repository sees (its own, the user's, the system's), for every option a
caller left unset (None): the CLI, the MCP server and the Python adapter all get the same.

=====================  ==========================  ===========================================
key                    option it fills             values
=====================  ==========================  ===========================================
``applyonce.check``    ``checks`` (``--check``)    a command; multi-valued (``git config --add``)
``applyonce.protect``  ``protect`` (``--protect``) a glob; multi-valued
``applyonce.skipCheck`` ``skip_checks``             ``syntax`` or ``markers``; multi-valued
``applyonce.dirty``    ``dirty`` (``--dirty``)     ``refuse`` or ``commit``
``applyonce.signoff``  ``signoff`` (``--signoff``) a boolean: a DCO ``Signed-off-by:``
``commit.gpgSign``     ``sign`` (``--sign``)       a boolean, as ``git commit`` reads it
=====================  ==========================  ===========================================

With signing on, ``gpg.format`` is checked here too (:func:`applyonce.git.signing.signer`), so
a bad value is a usage error before anything is written.

An option given by the caller replaces the config's values (``--check`` on the command line
replaces every ``applyonce.check``), it does not add to them.
"""

from __future__ import annotations

import dataclasses

from applyonce.core.checks import BUILTIN_CHECKS, check_skip_names
from applyonce.errors import UsageError
from applyonce.flow.context import Context
from applyonce.flow.options import DIRTY_MODES, CallOptions
from applyonce.git import signing

CHECK_KEY = "applyonce.check"
PROTECT_KEY = "applyonce.protect"
SKIP_CHECK_KEY = "applyonce.skipCheck"
DIRTY_KEY = "applyonce.dirty"
SIGNOFF_KEY = "applyonce.signoff"
GPGSIGN_KEY = "commit.gpgSign"


def with_config(ctx: Context, options: CallOptions) -> CallOptions:
    """``options`` with every unset field filled from git config (or its default).

    Raises:
        UsageError: a config value is not one applyonce accepts; the key is named (nothing
            is written).
    """
    store = ctx.store
    checks = options.checks
    if checks is None:
        checks = tuple(store.config_values(CHECK_KEY))
        for command in checks:
            if not command.strip():
                raise _bad(CHECK_KEY, command, "a command to run")
    protect = options.protect
    if protect is None:
        protect = tuple(store.config_values(PROTECT_KEY))
        for glob in protect:
            if not glob:
                raise _bad(PROTECT_KEY, glob, "a glob of paths")
    skip = options.skip_checks
    if skip is None:
        values = store.config_values(SKIP_CHECK_KEY)
        for name in values:
            if name not in BUILTIN_CHECKS:
                raise _bad(SKIP_CHECK_KEY, name, " or ".join(BUILTIN_CHECKS))
        skip = check_skip_names(values)
    dirty = options.dirty
    if dirty is None:
        value = store.config_value(DIRTY_KEY)
        if value is not None and value not in DIRTY_MODES:
            raise _bad(DIRTY_KEY, value, " or ".join(DIRTY_MODES))
        dirty = value if value is not None else "refuse"
    sign = options.sign
    if sign is None:
        sign = bool(store.config_bool(GPGSIGN_KEY))
    if sign:
        signing.signer(store.config_value, "")  # a bad gpg.format is refused now
    signoff = options.signoff
    if signoff is None:
        signoff = bool(store.config_bool(SIGNOFF_KEY))
    return dataclasses.replace(
        options,
        checks=checks,
        protect=protect,
        skip_checks=skip,
        dirty=dirty,
        sign=sign,
        signoff=signoff,
    )


def _bad(key: str, value: str, wanted: str) -> UsageError:
    return UsageError(
        f"git config {key} is {value!r}, which is not {wanted}",
        hint=f"fix it with 'git config --unset-all {key}' and 'git config --add {key} VALUE'"
        if key != DIRTY_KEY
        else f"fix it with 'git config {key} refuse' (or commit)",
    )
