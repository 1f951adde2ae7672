"""What the repository's commit policy asks of a call's commit (docs/design.md §2): its author,
the trailers a ``git commit --signoff`` and co-authors add, and its signature, decided once per
call from its options (git config already filled in by :func:`applyonce.flow.call.config.
with_config`) and handed to the one place that makes the commit object."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from applyonce.core.message import policy_trailers
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions
from applyonce.git import signing

Author = tuple[str, str, int | None, int]


@dataclass(frozen=True)
class CommitPolicy:
    """The author (None: git's), the trailers before the ``Call-Id`` block, and the signer of
    the commit's text (None: unsigned)."""

    author: Author | None
    trailers: tuple[tuple[str, str], ...]
    sign: Callable[[str], str] | None


def commit_policy(
    ctx: Context, options: CallOptions, trailers: Sequence[tuple[str, str]]
) -> CommitPolicy:
    """The policy of a call with ``options``; ``trailers``: the caller's trailers.

    Raises:
        UsageError: ``gpg.format`` is not a format git knows.
    """
    committer = ctx.store.signature()
    ident = f"{committer.name} <{committer.email}>"
    author = options.author
    assert author is None or not isinstance(author, str)  # CallOptions parsed it
    return CommitPolicy(
        author=None if author is None else (author.name, author.email, author.time, author.offset),
        trailers=policy_trailers(trailers, options.co_authors, ident if options.signoff else None),
        sign=signing.signer(ctx.store.config_value, ident).sign if options.sign else None,
    )
