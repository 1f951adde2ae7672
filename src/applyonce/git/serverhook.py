"""Exactly once at the commit point: the server-side ``pre-receive`` hook (``applyonce hook
pre-receive``, installed in a bare repository by ``applyonce hook install --bare PATH``).

A push that would put a ``Call-Id`` on a branch that already holds it is refused, whoever sends
it: a client without the shared ledger, with a shallow or stale view of the branch, or no
applyonce at all. For each branch the push moves (``old new ref`` on stdin), the Call-Ids it would
add are those of the commits it adds (``git rev-list old..new``: their ``Call-Id`` trailers)
and those the pusher names in push options (``git push -o call-id=ID``: applyonce's client sends
one for each call of the push where the server advertises ``push-options``, so a call is checked
even where its commit's trailers were rewritten). Each is looked up among the Call-Ids the
branch already holds; one found there, or twice among the added commits, refuses the whole push
(pre-receive is all or nothing), with one line per refused ref::

    applyonce: refs/heads/main: call <Call-Id> is already on this branch in commit <commit>
    applyonce: refs/heads/main: call <Call-Id> is twice among the pushed commits (<older>, <newer>)

The Call-Ids a branch holds are kept in an index beside it (``<bare>/applyonce/call-ids/``,
one file per branch: the tip it was built at and each Call-Id's commit), extended from that tip
to the pushed ``old`` when ``old`` descends from it, rebuilt by a walk of the whole branch
otherwise (a rewritten branch, a lost or corrupt file). A push is judged against ``old``, and
the server moves the branch only if it is still at ``old`` (receive-pack's own
compare-and-swap): two pushes judged at once cannot both land.

A force push is judged against what stays of the branch (the history of the merge base of
``old`` and ``new``); a new branch against nothing (its commits may repeat each other's calls
only). Deleting a branch, and every ref outside ``refs/heads/``, is left alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from applyonce.core.trailers import parse_trailers

KEY = "Call-Id"
PUSH_OPTION = "call-id="
ZERO = "0" * 40
INDEX_DIR = "applyonce/call-ids"
_CALL_ID = re.compile(r"[A-Za-z0-9._:-]{1,200}")
# The refusal line the client reads (git.remote: a call already on the branch).
REFUSAL = "applyonce: {ref}: call {call_id} is already on this branch in commit {commit}"
# Twice among the pushed commits (or in one of them): on no branch yet, so not the line above.
TWICE = "applyonce: {ref}: call {call_id} is twice among the pushed commits ({older}, {newer})"
REFUSAL_RE = re.compile(
    r"applyonce: (?P<ref>\S+): call (?P<call_id>\S+) is already on this branch in commit"
    r" (?P<commit>[0-9a-f]{40,64})"
)


class BareRepo:
    """The bare repository the hook guards: pygit2 alone (the hook starts for every push that
    moves a branch, so it imports no more than it reads)."""

    def __init__(self, git_dir: Path) -> None:
        self.repo = pygit2.Repository(str(git_dir))

    def has_object(self, oid: str) -> bool:
        try:
            return pygit2.Oid(hex=oid) in self.repo
        except (ValueError, pygit2.GitError):
            return False

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        return bool(self.repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor)))


@dataclass(frozen=True)
class Update:
    """One line of pre-receive's stdin: ``ref`` moves from ``old`` to ``new``."""

    old: str
    new: str
    ref: str


def parse_updates(lines: Iterable[str]) -> list[Update]:
    """The ``old new ref`` lines git gives a pre-receive hook."""
    updates = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            updates.append(Update(*parts))
    return updates


def push_option_call_ids(env: Mapping[str, str]) -> list[str]:
    """The Call-Ids named by ``-o call-id=ID`` (``GIT_PUSH_OPTION_COUNT`` and
    ``GIT_PUSH_OPTION_<n>``, which git sets where the repository accepts push options)."""
    try:
        count = int(env.get("GIT_PUSH_OPTION_COUNT", "0"))
    except ValueError:
        return []
    found = []
    for n in range(count):
        option = env.get(f"GIT_PUSH_OPTION_{n}", "")
        if option.startswith(PUSH_OPTION):
            value = option[len(PUSH_OPTION) :].strip()
            if _CALL_ID.fullmatch(value):
                found.append(value)
    return found


def check_push(
    git_dir: Path,
    updates: Sequence[Update],
    named: Sequence[str] = (),
    *,
    incoming: str | None = None,
) -> list[str]:
    """The refusal lines for a push of ``updates`` into the bare repository ``git_dir`` (empty:
    the push may go on); ``named``: the Call-Ids of its push options; ``incoming``: where the
    push's objects wait until the hook accepts them (git's quarantine, ``GIT_OBJECT_DIRECTORY``
    in the hook's environment), which libgit2 does not read from the environment itself."""
    guarded = [u for u in updates if u.ref.startswith("refs/heads/") and u.new.strip("0") != ""]
    if not guarded:
        return []
    try:
        store = BareRepo(git_dir)
        if incoming:
            store.repo.odb.add_disk_alternate(incoming)
    except (pygit2.GitError, ValueError, KeyError, OSError) as exc:
        raise UncheckedPushError(guarded[0].ref, _detail(exc, git_dir)) from None
    refusals = []
    for update in guarded:
        try:
            found = _first_repeat(store, Path(git_dir), update, named)
        except (pygit2.GitError, ValueError, KeyError, OSError) as exc:
            raise UncheckedPushError(update.ref, _detail(exc, git_dir)) from None
        if found is not None:
            refusals.append(found)
    return refusals


class UncheckedPushError(Exception):
    """The hook could not judge the update of ``ref`` (an object it cannot read, an old value
    that is no commit): the push is refused, in one line for the pusher."""

    def __init__(self, ref: str, detail: str) -> None:
        super().__init__(
            f"applyonce: {ref}: the server's guard could not check this push ({detail});"
            " the push is refused: push again, or ask the server's admin"
        )


def _detail(exc: BaseException, git_dir: Path) -> str:
    """``exc`` in a few words, without the server's paths (the pusher reads them)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    for path in {str(git_dir), os.path.realpath(git_dir)}:
        text = text.replace(path, "the repository")
    return f"{type(exc).__name__}: {text}"[:200]


def _first_repeat(
    store: BareRepo, git_dir: Path, update: Update, named: Sequence[str]
) -> str | None:
    """The refusal line of a Call-Id the update would put on its branch a second time: held
    by a commit already there, or by two of the added commits (None: none)."""
    old = None if update.old.strip("0") == "" else update.old
    if old is None:
        kept: str | None = None
        hide = [t for t in _branch_tips(store) if t != update.new]
    elif store.is_ancestor(old, update.new):
        kept, hide = old, [old]
    else:
        merge_base = store.repo.merge_base(pygit2.Oid(hex=old), pygit2.Oid(hex=update.new))
        kept = None if merge_base is None else str(merge_base)
        hide = [] if kept is None else [kept]
    added: dict[str, str] = {}
    for commit, trailers in _walk(store, update.new, hide):
        for call_id in trailers:
            if call_id in added:  # newest first: ``commit`` is the older one
                return TWICE.format(
                    ref=update.ref, call_id=call_id, older=commit, newer=added[call_id]
                )
            added[call_id] = commit
    wanted = [*added, *(c for c in named if c not in added)]
    if not wanted:
        return None
    if kept is None:
        held: dict[str, str] = {}
        if old is None:
            held = _walk_ids(store, update.new, exclude=set(added.values()))
    elif kept == old:
        held = BranchIndex(git_dir, update.ref).held_at(store, old)
    else:
        held = _walk_ids(store, kept)
    for call_id in wanted:
        if call_id in held:
            return REFUSAL.format(ref=update.ref, call_id=call_id, commit=held[call_id])
    return None


def _walk(store: BareRepo, tip: str, hide: Sequence[str]) -> Iterable[tuple[str, list[str]]]:
    """``(commit, its Call-Ids)`` from ``tip``, newest first, without the history of ``hide``."""
    walker = store.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL)
    for each in hide:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            walker.hide(pygit2.Oid(hex=each))
    for commit in walker:
        oid = str(commit.id)
        if KEY.lower().encode() not in commit.raw_message.lower():
            continue
        ids = parse_trailers(commit.raw_message).all(KEY)
        if ids:
            yield oid, ids


def _walk_ids(
    store: BareRepo, tip: str, *, hide: Sequence[str] = (), exclude: set[str] | None = None
) -> dict[str, str]:
    """Each Call-Id in the history of ``tip`` (without ``hide``'s), with the oldest commit
    holding it."""
    held: dict[str, str] = {}
    for commit, ids in _walk(store, tip, hide):
        if exclude and commit in exclude:
            continue
        for call_id in ids:
            held[call_id] = commit  # newest first: the last one seen is the oldest
    return held


def _branch_tips(store: BareRepo) -> list[str]:
    tips = []
    for name in store.repo.references:
        if name.startswith("refs/heads/"):
            with contextlib.suppress(KeyError, pygit2.GitError):
                tips.append(str(store.repo.references[name].resolve().target))
    return tips


class BranchIndex:
    """The Call-Ids one branch holds, kept in a file beside the bare repository (see the
    module docstring): ``{"tip": commit, "ids": {call_id: commit}}``."""

    def __init__(self, git_dir: Path, ref: str) -> None:
        name = hashlib.sha256(ref.encode()).hexdigest()[:32]
        self.path = git_dir / INDEX_DIR / f"{name}.json"
        self.ref = ref

    def _load(self) -> tuple[str | None, dict[str, str]]:
        try:
            data = json.loads(self.path.read_bytes())
            tip, ids = data["tip"], data["ids"]
            if data.get("ref") == self.ref and isinstance(tip, str) and isinstance(ids, dict):
                return tip, {str(k): str(v) for k, v in ids.items()}
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return None, {}

    def held_at(self, store: BareRepo, tip: str) -> dict[str, str]:
        """The Call-Ids of ``tip``'s history (the branch's tip), the file brought up to it."""
        known, ids = self._load()
        if known == tip:
            return ids
        if known is not None and store.has_object(known) and store.is_ancestor(known, tip):
            newer = _walk_ids(store, tip, hide=[known])
            for call_id, commit in newer.items():
                ids.setdefault(call_id, commit)
        else:
            ids = _walk_ids(store, tip)
        self._save(tip, ids)
        return ids

    def _save(self, tip: str, ids: dict[str, str]) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(json.dumps({"ref": self.ref, "tip": tip, "ids": ids}).encode())
            os.replace(tmp, self.path)


class HooksElsewhereError(Exception):
    """``core.hooksPath`` sends git to another directory than the repository's ``hooks/``: a
    hook written there would never run. ``args[0]``: that directory."""


MARKER = "# Installed by 'applyonce hook install'"
CHAINED = "pre-receive.chained"
HOOK_SCRIPT = """#!/bin/sh
# Installed by 'applyonce hook install': refuses a push that would put a Call-Id on a branch
# that already holds it (see 'applyonce hook --help'). The pre-receive hook that was there
# before ('install --force' kept it as pre-receive.chained) runs first, with the same stdin;
# its refusal refuses the push. A push that moves no branch (applyonce's pending refs) is let
# through without starting Python.
updates=$(cat)
chained="$(dirname "$0")/pre-receive.chained"
if [ -x "$chained" ]; then
  printf '%s\\n' "$updates" | "$chained" || exit $?
fi
case "$updates" in
  *" refs/heads/"*) printf '%s\\n' "$updates" | exec {python} -m applyonce hook pre-receive ;;
esac
"""


def install_hook(git_dir: Path, python: str, *, force: bool = False) -> tuple[Path, Path | None]:
    """Write ``hooks/pre-receive`` of the bare repository ``git_dir`` (running ``python -m
    applyonce hook pre-receive``) and set ``receive.advertisePushOptions``; the hook's path,
    and where the hook that was there is kept (None: there was none, or applyonce's own).

    A hook applyonce installed before is replaced. Another one is kept, with ``force``, as
    ``hooks/pre-receive.chained``, which the new hook runs first.

    Raises:
        FileExistsError: another pre-receive hook is there (``force`` keeps it and chains it),
            or, with ``force``, a chained one is there already (its path).
        HooksElsewhereError: git runs this repository's hooks from ``core.hooksPath``, another
            directory (possibly shared by other repositories): nothing is written.
    """
    store = BareRepo(git_dir)
    if not store.repo.is_bare:
        raise NotADirectoryError(f"{git_dir} is not a bare repository")
    hooks = Path(store.repo.path) / "hooks"
    configured = _hooks_path(store)
    if configured is not None and os.path.realpath(configured) != os.path.realpath(hooks):
        raise HooksElsewhereError(configured)
    hooks.mkdir(exist_ok=True)
    hook = hooks / "pre-receive"
    text = HOOK_SCRIPT.format(python=shlex.quote(python))
    kept: Path | None = None
    if os.path.lexists(hook) and not _is_ours(hook):
        if not force:
            raise FileExistsError(str(hook))
        kept = hooks / CHAINED
        if os.path.lexists(kept):
            raise FileExistsError(str(kept))
        os.replace(hook, kept)  # a symlink stays a symlink, to the same hook
    tmp = hooks / ".pre-receive.applyonce"
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, hook)
    store.repo.config["receive.advertisePushOptions"] = True
    return hook, kept


def _is_ours(hook: Path) -> bool:
    try:
        return MARKER in hook.read_text(errors="replace")
    except OSError:
        return False


def _hooks_path(store: BareRepo) -> str | None:
    """Where ``core.hooksPath`` (any configuration level) has git look for hooks: ``~``
    expanded, a relative path taken from the repository (where git runs a bare repository's
    hooks); None: not set."""
    try:
        value = store.repo.config["core.hooksPath"]
    except (KeyError, pygit2.GitError):
        return None
    if not isinstance(value, str) or not value:
        return None
    return os.path.join(store.repo.path, os.path.expanduser(value))
