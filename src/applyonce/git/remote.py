"""The commit point on a shared remote: a call takes effect when the Git server moves its branch.

:class:`RemotePublisher` is the :class:`~applyonce.git.publisher.Publisher` of ``--remote NAME``.
It runs the real ``git`` (fetch, push) against the remote, so every transport and credential helper
the user configured works, and the server's own atomic ref update is the one commit point:

1. ``publish`` pushes the commit's objects under a pending ref,
   ``refs/applyonce/pending/<ref without refs/>/<commit>`` (``after-push-objects`` fires here);
2. then one atomic push moves the branch with ``--force-with-lease=<ref>:<expected>`` — the
   server refuses it unless the branch is still at ``expected`` (a compare-and-swap) — and deletes
   the pending ref in the same transaction;
3. then, when that is safe, the local branch follows (``git push`` itself moves
   ``refs/remotes/<remote>/<branch>``, as for any push of the user's): at once where no work
   tree has it checked out, else in the call's checkout sync (:meth:`RemotePublisher.follow`),
   which holds the checkout's ``index.lock`` across that move, as for a local publish.

What the branch is and which commits it carries are always read from the remote: ``landed`` and
``is_on`` fetch first, then search what was fetched. Only ``tip`` may answer from a fetch of the
last second: a stale tip costs a refused compare-and-swap and a restage, never a wrong answer. A
push whose result is unknown (the connection dropped after the update was sent) is asked about
again; if the remote still cannot say, the call stays in flight for ``recover``.

Fetches are applyonce's own business: the remote's branch is fetched into a private ref,
``refs/applyonce/remotes/<remote>/<branch>``, with ``--no-write-fetch-head`` and an empty
``--refmap`` — ``FETCH_HEAD``, ``refs/remotes/*`` and every other ref of the user's stay as they
were (a ``git fetch`` of the user's is what moves them).

A shallow clone is made complete by the first fetch (``--unshallow``): whether a call already
landed is a search of the remote branch's whole history for its ``Call-Id``, and a commit below
the shallow boundary may carry it. A partial clone (``--filter``) keeps every commit, so the
search is complete there; its missing trees and blobs are fetched when read
(:mod:`applyonce.git.promisor`).

Where the server runs applyonce's guard (``applyonce hook pre-receive``,
:mod:`applyonce.git.serverhook`), both pushes name the publish's calls in push options
(``-o call-id=ID``; left off where the server does not advertise ``push-options``), and a
refusal of the branch update because a commit on the branch carries the call already is
:class:`~applyonce.git.publisher.CallOnBranchError`: the caller adopts that commit. A ``git``
older than :data:`MIN_GIT` is refused when the publisher is made.

A pending ref left by a process killed between the two pushes is settled by ``applyonce recover``
(:func:`applyonce.flow.recovery.pending.settle_pending`), from any clone: :meth:`pending` fetches
them.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pygit2

from applyonce.core.receipt import public_url
from applyonce.errors import ApplyOnceError, ConflictError, UsageError
from applyonce.faults import fault
from applyonce.git.checkouts import Checkouts
from applyonce.git.gitcli import git_version, not_connected, run_git
from applyonce.git.history import (
    REMOTE_INCOMPLETE_HINT,
    CallIdIndex,
    HistoryIncompleteError,
    require_complete,
)
from applyonce.git.publisher import (
    CallOnBranchError,
    LocalRefPublisher,
    PublishUnknownError,
    TipMovedError,
)
from applyonce.git.serverhook import REFUSAL_RE
from applyonce.git.store import GitStore

PENDING = "refs/applyonce/pending/"
# Where the remote keeps what identifies it to shared ledgers (RemotePublisher.repository_id).
IDENTITY = "refs/applyonce/repository"
# A fetched tip answers ``tip`` for this long (seconds): a stale one only costs a refused CAS.
TIP_FRESH_S = 1.0
FETCH_LOCK_RETRIES = 20  # concurrent fetches of one clone race for the fetched ref's lock
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,99}")
# What git says, before sending anything, when the server does not advertise push options.
_NO_PUSH_OPTIONS = "does not support push options"
# A publish names at most this many calls in push options (the hook reads the trailers too).
MAX_NAMED_CALLS = 64
# A refusal that another writer of the same refs caused, gone once it is done (not a policy).
_TRANSIENT = ("lock", "failed to update ref", "incorrect old value", "stale info", "fetch first")


# The oldest git whose push and fetch a remote publish relies on: git 2.29 (fetch
# --no-write-fetch-head); push --atomic (2.4), --force-with-lease (1.8.5) and --push-option
# (2.10) are older.
MIN_GIT = (2, 29, 0)


class GitTooOldError(UsageError):
    """The ``git`` on PATH is older than a remote publish needs (:data:`MIN_GIT`)."""

    kind = "git-too-old"


def require_git() -> None:
    """Raises :class:`GitTooOldError` unless the ``git`` on PATH is :data:`MIN_GIT` or newer."""
    have = git_version()
    need = ".".join(map(str, MIN_GIT))
    if have is None:
        raise GitTooOldError(
            "--remote needs git, which cannot be run here",
            hint=f"install git {need} or newer and put it on PATH",
        )
    if have < MIN_GIT:
        raise GitTooOldError(
            f"--remote needs git {need} or newer (atomic pushes, push options, fetches without"
            f" FETCH_HEAD); this git is {'.'.join(map(str, have))}",
            hint=f"install git {need} or newer and put it on PATH",
        )


class RemoteUnreachableError(ConflictError):
    """The remote could not be asked (down, unknown host, no such repository, timed out)."""

    kind = "remote-unreachable"
    default_retryable = True
    default_hint = "check the remote ('git fetch NAME' shows the same), then repeat the call"


class RemoteRefusedError(ConflictError):
    """The remote answered and refused the push (a server hook, permissions)."""

    kind = "remote-refused"
    default_retryable = True
    default_hint = "the server's hooks or permissions refused it; fix that, then repeat the call"


class RemoteBranchMissingError(ConflictError):
    """The remote has no such branch, while this repository's has commits: the call would
    start the remote's branch without them."""

    kind = "remote-branch-missing"
    default_retryable = True

    def __init__(self, remote: str, ref: str) -> None:
        branch = ref.removeprefix("refs/heads/")
        super().__init__(
            f"remote {remote} has no branch {branch}, which has commits here",
            hint=f"push it first ('git push {remote} {branch}'), then repeat the call",
            ref=ref,
        )


@dataclass(frozen=True)
class _Result:
    code: int
    out: str
    err: str


class RemotePublisher:
    """A :class:`~applyonce.git.publisher.Publisher` whose commit point is the branch of the
    remote ``remote`` (see the module docstring). ``journal``: as for
    :class:`~applyonce.git.publisher.LocalRefPublisher`, for the local branch following."""

    def __init__(
        self, store: GitStore, remote: str, index: CallIdIndex, journal: Path | None = None
    ) -> None:
        if not _NAME.fullmatch(remote) or ".." in remote:
            raise UsageError(f"{remote!r} is not a remote name", hint="see 'git remote -v'")
        url = store.config_value(f"remote.{remote}.url")
        if url is None:
            raise UsageError(
                f"there is no remote {remote!r} in this repository",
                hint="add it with 'git remote add NAME URL', or pass another --remote",
            )
        require_git()
        self.store = store
        self.remote = remote
        self.url = public_url(url)
        # The user name and password in the URL, if any: never in a message (git may print
        # them, as part of a host name it could not look up).
        authority = url.partition("://")[2].partition("/")[0]
        self._userinfo = authority.rpartition("@")[0] if "://" in url else ""
        self.index = index
        self.journal = journal
        self.local = LocalRefPublisher(store, index, journal)
        self._fetched: dict[str, tuple[str | None, float]] = {}
        # Whether the server takes push options (None: not known yet).
        self._push_options: bool | None = None
        # The Call-Id index of a branch follows the remote's branch, not the local one.
        index.tip_of = lambda ref: store.tip(self.fetched(ref))

    # --- the Publisher protocol -----------------------------------------------------------

    def tip(self, ref: str, *, fresh: bool = False) -> str | None:
        """The remote branch's tip (fetched at most :data:`TIP_FRESH_S` ago; ``fresh``: now)."""
        return self._fetch(ref, max_age=0 if fresh else TIP_FRESH_S)

    def landed(
        self, ref: str, call_id: str, *, since: str | None = None, recent: bool = False
    ) -> list[str]:
        """See :class:`~applyonce.git.publisher.Publisher`: searched in the remote branch's
        history as just fetched (a shallow clone made complete first); ``recent``: as fetched at
        most :data:`TIP_FRESH_S` ago.

        Raises:
            HistoryIncompleteError: nothing found, and the remote's own history is cut short
                (a shallow or grafted server) or grafts here hide part of it.
        """
        tip = self._fetch(ref, max_age=TIP_FRESH_S if recent else 0)
        if since is None:
            try:
                return self.index.commits_on(ref, call_id)
            except HistoryIncompleteError as exc:
                raise HistoryIncompleteError(exc.message, hint=REMOTE_INCOMPLETE_HINT) from None
        if not self.store.has_object(since):
            since = None  # not from this remote's history: the whole branch is searched
        found = [
            commit
            for commit, block in self.store.walk_trailers(tip, hide=since)
            if call_id in block.all("Call-Id")
        ]
        if not found:
            require_complete(self.store, ref, tip, hide=since, hint=REMOTE_INCOMPLETE_HINT)
        return found

    def is_on(self, ref: str, commit: str) -> bool:
        tip = self._fetch(ref, max_age=0)
        return (
            tip is not None
            and self.store.has_object(commit)
            and self.store.is_ancestor(commit, tip)
        )

    def publish(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        """Push ``new``'s objects, then move the remote's ``ref`` from ``expected`` to ``new``.

        Raises:
            TipMovedError: the remote branch is not at ``expected``; it did not move.
            RemoteUnreachableError, RemoteRefusedError: it did not move.
            PublishUnknownError: the update was sent and the remote cannot say if it took it.
        """
        local = self.store.tip(ref)
        if expected is None and local is not None and not self.store.is_ancestor(local, new):
            # A new remote without the branch: the call's commit would start it alone, without
            # the project's history and files (and this checkout would never show it). A call
            # is refused so before anything else (Context.require_remote_branch); this is the
            # commit point's own guard.
            raise RemoteBranchMissingError(self.remote, ref)
        self.store.written.ensure_complete(new, down_to=expected)
        pending = pending_ref(ref, new)
        named = self._named_calls(new, expected)
        for attempt in range(FETCH_LOCK_RETRIES):
            sent = self._push("--porcelain", self.remote, f"{new}:{pending}", calls=named)
            if sent.code == 0:
                break
            # Another process pushing the very same commit (the same call, staged in the same
            # second on the same base) holds the pending ref's lock: once it is done, this push
            # finds it up to date.
            if not _transient(sent.out) or attempt == FETCH_LOCK_RETRIES - 1:
                self._refused(sent, pending, what="the commit's objects")
            time.sleep(0.01 * (attempt + 1))
        fault("after-push-objects")
        lease = f"--force-with-lease={ref}:{expected or ''}"
        cas = self._push(
            "--atomic",
            "--porcelain",
            lease,
            self.remote,
            f"{new}:{ref}",
            f":{pending}",
            calls=named,
        )
        status = _status_of(cas.out, ref)
        if status is not None and status[0] in " +*=":
            self._landed(ref, new)
            return
        if status is None and not_connected(cas.err):
            raise RemoteUnreachableError(self._say(f"cannot reach remote {self.remote}", cas))
        # Refused (the server answered), or unknown (the connection dropped after sending):
        # the remote itself says where its branch is now.
        try:
            actual = self._fetch(ref, max_age=0)
        except RemoteUnreachableError:
            if status is None:
                raise PublishUnknownError(
                    f"the update of {ref} was sent to remote {self.remote}, which did not say"
                    " whether it took it"
                ) from None
            raise
        if actual == new:
            self._landed(ref, new)
            return
        if actual != expected:
            self._forget(pending)
            raise TipMovedError(ref, expected, actual)
        if status is None:
            raise PublishUnknownError(
                f"the update of {ref} was sent to remote {self.remote}, which did not say"
                " whether it took it"
            )
        self._forget(pending)
        if _transient(cas.out):
            raise TipMovedError(ref, expected, actual)  # a lock held at the server: try again
        holder = self._held_already(ref, cas, named)
        if holder is not None:
            raise CallOnBranchError(ref, *holder)
        why = next(iter(_causes(cas.out)), status[1] or "refused")
        raise RemoteRefusedError(
            self._say(f"remote {self.remote} refused the update of {ref} ({why})", cas)
        )

    def follow(self, ref: str, commits: set[str]) -> None:
        """Fast-forward the local branch to the remote's tip as last fetched, when every commit
        it would pass over is one of ``commits`` (the calls whose paths the sync about to run
        brings into the checkouts): a call that landed by another clone's push (the same call
        adopted, a recover's roll forward) reaches this clone's checkout too. Never over other
        commits while a work tree has the branch checked out, never over the user's own."""
        remote_tip = self.store.tip(self.fetched(ref))
        local = self.store.tip(ref)
        if remote_tip is None or local == remote_tip:
            return
        if local is not None and not self.store.is_ancestor(local, remote_tip):
            return  # the user's own commits are on it: theirs
        passed = []
        for commit in self.store.walk(remote_tip, hide=local):
            passed.append(commit)
            if len(passed) > len(commits):
                break
        if not set(passed) <= commits:
            self._follow_unchecked_out(ref, remote_tip)
            return
        if local is None and not self.store.head_is(ref):
            return
        with contextlib.suppress(ApplyOnceError, pygit2.GitError, OSError):
            self.local.publish(ref, local, remote_tip, reason="applyonce: follow the remote")

    # --- the server's hook (applyonce hook pre-receive) -----------------------------------

    def _named_calls(self, new: str, expected: str | None) -> list[str]:
        """The Call-Ids of the commits a publish adds (``expected..new``), for the push options
        that name them to the server's hook."""
        named: list[str] = []
        with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
            for _, trailers in self.store.walk_trailers(new, hide=expected, key="Call-Id"):
                named += [c for c in trailers.all("Call-Id") if c not in named]
                if len(named) >= MAX_NAMED_CALLS:
                    break
        return named

    def _push(self, *args: str, calls: list[str]) -> _Result:
        """``git push ARGS``, naming ``calls`` in push options (``-o call-id=ID``) where the
        server takes them: a server that does not advertise ``push-options`` makes git refuse
        them before anything is sent; then they are left off for this remote from then on."""
        if calls and self._push_options is not False:
            options = [f"--push-option=call-id={c}" for c in calls]
            sent = self._git("push", *options, *args)
            if _NO_PUSH_OPTIONS not in sent.err:
                return sent
            self._push_options = False
        return self._git("push", *args)

    def _held_already(self, ref: str, refused: _Result, named: list[str]) -> tuple[str, str] | None:
        """``(Call-Id, commit)`` where the server's hook refused the update because a commit on
        the branch carries a call of this push already, and that commit is on the branch as
        fetched here (so its call is adopted, not committed a second time). None: another
        refusal."""
        for line in refused.err.splitlines():
            found = REFUSAL_RE.search(line)
            if found is None or found["ref"] != ref or found["call_id"] not in named:
                continue
            commit = found["commit"]
            if self.is_on(ref, commit) and found["call_id"] in self.store.trailers_of(commit).all(
                "Call-Id"
            ):
                return found["call_id"], commit
        return None

    # --- the repository's identity (shared ledgers) ---------------------------------------

    def repository_id(self) -> str:
        """What identifies the remote's repository to a ledger that clones share: the same in
        every clone of it, whatever URL each spells it by; different for any other repository
        (a ledger keeps each repository's calls apart by it).

        It is a commit applyonce makes once for the remote (no parent, the empty tree, a random
        line in its message: never a commit of any other repository) and keeps there as
        ``refs/applyonce/repository``, created only where there is none (a compare-and-swap, so
        clones racing to make it agree on one). This clone keeps its copy; after the first time
        the answer costs no round trip.

        Raises:
            RemoteUnreachableError, RemoteRefusedError: the remote could not be asked, or refused
                the ref.
        """
        local = f"refs/applyonce/remote-identity/{self.remote}"
        known = self.store.tip(local)
        if known is not None:
            return f"remote:{known}"
        for _ in range(3):
            got = self._git("fetch", self.remote, f"+{IDENTITY}:{local}", fetch=True)
            if got.code == 0 and self.store.tip(local) is not None:
                return f"remote:{self.store.tip(local)}"
            if "couldn't find remote ref" not in got.err:
                raise RemoteUnreachableError(
                    self._say(f"cannot fetch {IDENTITY} from remote {self.remote}", got)
                )
            made = self.store.identity_commit(
                "applyonce: this repository's identity for the ledgers its clones share\n\n"
                f"{uuid.uuid4()}\n"
            )
            lease = f"--force-with-lease={IDENTITY}:"
            sent = self._git("push", "--porcelain", lease, self.remote, f"{made}:{IDENTITY}")
            if sent.code == 0:
                with contextlib.suppress(pygit2.GitError, OSError):
                    self.store.repo.references.create(local, pygit2.Oid(hex=made), force=True)
                return f"remote:{made}"
            if _status_of(sent.out, IDENTITY) is None:
                self._refused(sent, IDENTITY, what="its identity ref")
            # Another clone made it first: fetch theirs.
        raise RemoteRefusedError(f"remote {self.remote} keeps no {IDENTITY} and takes none")

    def branches(self, prefix: str) -> list[str]:
        """The remote's branches whose ref starts with ``prefix`` (``refs/heads/agent/``), sorted,
        each fetched by the same one ``git fetch`` (their tips then answer :meth:`tip` for
        :data:`TIP_FRESH_S`, without a fetch a branch).

        Raises:
            RemoteUnreachableError: the remote did not answer.
        """
        assert prefix.startswith("refs/heads/") and prefix.endswith("/"), prefix
        local = self.fetched(prefix)
        got = self._fetch_deepening(f"+{prefix}*:{local}*", prune=True)
        if got.code != 0:
            raise RemoteUnreachableError(self._say(f"cannot list remote {self.remote}", got))
        now = time.monotonic()
        found = []
        for name in self.store.repo.references:
            if name.startswith(local):
                ref = prefix + name[len(local) :]
                self._fetched[ref] = (self.store.tip(name), now)
                found.append(ref)
        return sorted(found)

    # --- pending refs (recover) ----------------------------------------------------------

    def pending(self) -> list[tuple[str, str]]:
        """Every pending push on the remote, as ``(ref, commit)``, its objects fetched here."""
        local = self._pending_copy()
        got = self._git("fetch", "--prune", self.remote, f"+{PENDING}*:{local}*", fetch=True)
        if got.code != 0:
            raise RemoteUnreachableError(self._say(f"cannot fetch from remote {self.remote}", got))
        found = []
        for name in self.store.repo.references:
            if name.startswith(local):
                parsed = parse_pending(PENDING + name[len(local) :])
                if parsed is not None and self._names_its_commit(name, parsed[1]):
                    found.append(parsed)
        return sorted(found)

    def _names_its_commit(self, name: str, commit: str) -> bool:
        """Whether the ref ``name`` points at the commit its name says, as applyonce's own do.
        Anyone who may push may make others (at a blob, a tree, another commit): not a push
        of applyonce's, so not one to settle (and never a reason for recover to fail)."""
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            target = str(self.store.repo.references[name].resolve().target)
            return target == commit and self.store.is_commit(target)
        return False

    def forget_pending(self, ref: str, commit: str) -> None:
        """Delete the pending ref of ``commit`` on the remote (its call is settled)."""
        self._forget(pending_ref(ref, commit))
        local = self._pending_copy() + pending_ref(ref, commit).removeprefix(PENDING)
        with contextlib.suppress(KeyError, pygit2.GitError):
            self.store.repo.references.delete(local)

    # --- internals ---------------------------------------------------------------------

    def _pending_copy(self) -> str:
        """Where this clone keeps its copies of the remote's pending refs."""
        return f"refs/applyonce/remote-pending/{self.remote}/"

    def fetched(self, ref: str) -> str:
        """Where this clone keeps the remote's branch ``ref`` as last fetched (a private ref:
        ``refs/heads/b`` -> ``refs/applyonce/remotes/<remote>/b``)."""
        return f"refs/applyonce/remotes/{self.remote}/{ref.removeprefix('refs/heads/')}"

    def _fetch(self, ref: str, *, max_age: float) -> str | None:
        known = self._fetched.get(ref)
        if known is not None and time.monotonic() - known[1] <= max_age:
            return known[0]
        fetched = self.fetched(ref)
        got = self._fetch_deepening(f"+{ref}:{fetched}")
        if got.code == 0:
            tip = self.store.tip(fetched)
        elif "couldn't find remote ref" in got.err:
            # No such branch there (yet): a copy left from before would lie.
            with contextlib.suppress(KeyError, pygit2.GitError):
                self.store.repo.references.delete(fetched)
            tip = None
        else:
            raise RemoteUnreachableError(
                self._say(f"cannot fetch {ref} from remote {self.remote}", got)
            )
        self._fetched[ref] = (tip, time.monotonic())
        return tip

    def _fetch_deepening(self, refspec: str, *, prune: bool = False) -> _Result:
        """``git fetch [--prune] REMOTE REFSPEC``, a shallow clone deepened to the whole history on
        the way (see the module docstring), tried again while another fetch of this clone holds
        a ref's lock; the last attempt's result."""
        for attempt in range(FETCH_LOCK_RETRIES):
            deepen = ["--unshallow"] if self.store.is_shallow() else []
            pruning = ["--prune"] if prune else []
            got = self._git("fetch", *pruning, *deepen, self.remote, refspec, fetch=True)
            if got.code == 0 and deepen:
                self.store.reread_history()
            if got.code == 0 or "lock" not in got.err or attempt == FETCH_LOCK_RETRIES - 1:
                return got
            time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")  # FETCH_LOCK_RETRIES >= 1

    def _landed(self, ref: str, new: str) -> None:
        """The remote took ``new``: the fetched copy of its branch follows, and the local branch
        where no work tree has it checked out. A checked-out one follows in the call's sync
        (:meth:`follow`), which holds the checkout's ``index.lock`` from that move until the
        index shows it: a ``git commit`` that read the moved branch in between would commit
        the old index's files over the call."""
        self._fetched[ref] = (new, time.monotonic())
        with contextlib.suppress(pygit2.GitError, OSError):
            self.store.repo.references.create(self.fetched(ref), pygit2.Oid(hex=new), force=True)
        self._follow_unchecked_out(ref, new)

    def _follow_unchecked_out(self, ref: str, new: str) -> None:
        """Fast-forward the local branch to ``new`` (by compare-and-swap) where no work tree has
        it checked out: nothing of the user's is lost there. A checked-out branch follows in
        the sync (:meth:`follow`: only over the commits whose files it brings into the work
        tree, holding the checkout's ``index.lock`` from the move until the index shows it), or
        by the user's 'git pull --ff-only'. Never over the user's own commits (it holds commits
        the remote does not have), never a branch that does not exist here."""
        local = self.store.tip(ref)
        if local is None or local == new or not self.store.is_ancestor(local, new):
            return
        if Checkouts(self.store).checkouts_of(ref):
            return
        # The call has taken effect on the remote: a local ref that moved meanwhile or stays
        # locked is left as it is (never an error now).
        with contextlib.suppress(ApplyOnceError, pygit2.GitError, OSError):
            self.local.publish(ref, local, new, reason="applyonce: follow the remote")

    def _forget(self, pending: str) -> None:
        """Delete a pending ref on the remote, if it can be (else 'recover' does)."""
        self._git("push", "--porcelain", self.remote, f":{pending}")

    def _refused(self, result: _Result, pending: str, *, what: str) -> None:
        status = _status_of(result.out, pending)
        if status is None:
            raise RemoteUnreachableError(
                self._say(f"cannot push {what} to remote {self.remote}", result)
            )
        raise RemoteRefusedError(
            self._say(f"remote {self.remote} refused {what} ({status[1] or 'refused'})", result)
        )

    def _say(self, message: str, result: _Result) -> str:
        """``message`` with git's last error line, no user name or password in it."""
        lines = [line.strip() for line in result.err.splitlines() if line.strip()]
        # The server's own words first (a hook's message), then git's.
        server = [x.removeprefix("remote:").strip() for x in lines if x.startswith("remote:")]
        fatal = [line for line in lines if line.startswith(("fatal:", "error:"))]
        detail = next((line for line in (*server, *fatal, *lines) if line), "")[:200]
        if self._userinfo:
            detail = detail.replace(self._userinfo + "@", "").replace(self._userinfo, "***")
        return f"{message}: {public_url(detail)}" if detail else message

    def _git(self, *args: str, fetch: bool = False) -> _Result:
        options = []
        if fetch:
            options += ["-c", "fetch.writeCommitGraph=false"]
            # Only the refs the refspec names move: no FETCH_HEAD, no remote-tracking ref
            # updated on the side (an empty --refmap), no tags.
            args = (args[0], "--no-write-fetch-head", "--refmap=", "--no-tags", *args[1:])
        done = run_git(self.store.repo.path, *options, *args)
        return _Result(done.code, done.text, done.err)


def pending_ref(ref: str, commit: str) -> str:
    """The pending ref of ``commit`` on its way to ``ref``."""
    return f"{PENDING}{ref.removeprefix('refs/')}/{commit}"


def parse_pending(name: str) -> tuple[str, str] | None:
    """``(ref, commit)`` of a pending ref's name (None: not one)."""
    if not name.startswith(PENDING):
        return None
    middle, _, commit = name[len(PENDING) :].rpartition("/")
    if not middle.startswith("heads/") or not re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", commit):
        return None
    return f"refs/{middle}", commit


def _status_of(porcelain: str, ref: str) -> tuple[str, str] | None:
    """The flag and reason ``git push --porcelain`` gave the update of ``ref`` (None: none)."""
    for line in porcelain.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1].rpartition(":")[2] == ref and parts[0]:
            summary = parts[2]
            reason = summary[summary.find("(") + 1 : summary.rfind(")")] if "(" in summary else ""
            return parts[0][0], reason
    return None


def _causes(porcelain: str) -> list[str]:
    """The reasons a refused push gives, without the atomic push's echo of them on its other
    refs ("atomic push failed")."""
    reasons = [
        line.split("\t")[2]
        for line in porcelain.splitlines()
        if line.startswith("!") and line.count("\t") >= 2
    ]
    causes = [r for r in reasons if "atomic push failed" not in r]
    return [r[r.find("(") + 1 : r.rfind(")")] if "(" in r else r for r in causes]


def _transient(porcelain: str) -> bool:
    """Whether a refused push was refused only because another writer got in the way (every
    cause given is one of :data:`_TRANSIENT`)."""
    causes = _causes(porcelain)
    return bool(causes) and all(any(w in c for w in _TRANSIENT) for c in causes)
