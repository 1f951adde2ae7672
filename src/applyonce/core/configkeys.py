"""The git config keys applyonce reads (pure): every ``applyonce.*`` key in one place, and the
warning an unknown one gets, naming the nearest known key (a typo such as ``applyonce.leaseSecond``
would otherwise be ignored without a word).

Git compares a key's section and name case-insensitively (``applyonce.skipcheck`` is
``applyonce.skipCheck``); so does :func:`unknown_key_warnings`.
"""

from __future__ import annotations

from collections.abc import Iterable

from applyonce.patch.limits import CONFIG_KEYS as LIMIT_KEYS

PREFIX = "applyonce."

# Every key the code reads (tests/core/test_configkeys.py holds the code to it).
KNOWN_KEYS: tuple[str, ...] = (
    "applyonce.check",
    "applyonce.dirty",
    "applyonce.leaseSeconds",
    "applyonce.ledger",
    "applyonce.protect",
    "applyonce.remote",
    "applyonce.serve",
    "applyonce.serveIdle",
    "applyonce.signoff",
    "applyonce.skipCheck",
    *LIMIT_KEYS.values(),
)


class UnknownConfigKeyWarning(UserWarning):
    """An ``applyonce.*`` git config key applyonce does not read (a typo, most likely)."""


_BY_FOLDED = {key.casefold(): key for key in KNOWN_KEYS}


def nearest_key(name: str) -> str | None:
    """The known key nearest to ``name`` in spelling (None: none is near)."""
    import difflib  # only for a key that is unknown

    folded = name.casefold()
    # A key whose name holds a known one (applyonce.check.timeout): that one.
    found = [k for k in _BY_FOLDED if folded.startswith(k + ".")][:1]
    if not found:
        # Compared without the common "applyonce.", which would make every key look near.
        names = {k.removeprefix(PREFIX): k for k in _BY_FOLDED}
        close = difflib.get_close_matches(folded.removeprefix(PREFIX), names, n=1, cutoff=0.6)
        found = [names[close[0]]] if close else []
    return _BY_FOLDED[found[0]] if found else None


def unknown_key_warnings(names: Iterable[str]) -> list[str]:
    """One line for each ``applyonce.*`` key in ``names`` (as git config lists them) that
    applyonce does not read, in order, each once."""
    lines: list[str] = []
    seen: set[str] = set()
    for name in names:
        folded = name.casefold()
        if not folded.startswith(PREFIX) or folded in _BY_FOLDED or folded in seen:
            continue
        seen.add(folded)
        near = nearest_key(name)
        advice = f"did you mean {near}?" if near else "applyonce reads no such key"
        lines.append(f"unknown git config key {name} is ignored; {advice}")
    return lines


__all__ = [
    "KNOWN_KEYS",
    "PREFIX",
    "UnknownConfigKeyWarning",
    "nearest_key",
    "unknown_key_warnings",
]
