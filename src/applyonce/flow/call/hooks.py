"""The repository's commit hooks on a call's staged tree (docs/design.md §1, step 6).

As ``git commit`` would: ``pre-commit``, then ``prepare-commit-msg .git/COMMIT_EDITMSG message``
and ``commit-msg .git/COMMIT_EDITMSG`` (:mod:`applyonce.git.hooks` finds them and gives them
git's environment) — in a scratch checkout of the staged tree whose HEAD is the branch at the
commit's parent, never in the user's checkout or index. ``--no-verify`` skips ``pre-commit`` and
``commit-msg``, as git's does. What each hook did is recorded as a check named ``hook:<name>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from applyonce.core.hooks import (
    DIFF_SHOWN,
    HookFailedError,
    HookModifiedFilesError,
    message_after_hooks,
)
from applyonce.core.receipt import CheckRecord
from applyonce.flow.call.checks import run_command, scratch_checkout
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions
from applyonce.git.hooks import VERIFY_HOOKS, find_hooks, hook_command, hook_env

EDITMSG = ".git/COMMIT_EDITMSG"  # where git writes the message for its hooks, from the root
# Each hook's arguments, as 'git commit -m' gives them (the message's source: "message").
_HOOK_ARGS: dict[str, tuple[str, ...]] = {
    "pre-commit": (),
    "prepare-commit-msg": (EDITMSG, "message"),
    "commit-msg": (EDITMSG,),
}


def run_hooks(
    ctx: Context,
    ref: str,
    parent: str | None,
    tree_id: str,
    message: str,
    options: CallOptions,
    checks: Sequence[CheckRecord],
) -> tuple[str, list[CheckRecord]]:
    """Run the repository's commit hooks on the staged tree ``tree_id`` (its commit's parent
    ``parent`` on ``ref``): the message they leave (the call's trailer block last) and their
    records. No hook: ``message`` as it is, no record, nothing run.

    Raises:
        HookFailedError: a hook exited non-zero or timed out (its output kept).
        HookModifiedFilesError: ``pre-commit`` changed the staged files (the diff kept).
    """
    hooks = find_hooks(ctx.store)
    if options.no_verify:
        hooks = {name: path for name, path in hooks.items() if name not in VERIFY_HOOKS}
    if not hooks:
        return message, []
    records: list[CheckRecord] = []
    ctx.store.flush_objects()  # the scratch checkout reads the staged tree from the disk
    call_id = _call_id(message)
    with scratch_checkout(ctx) as scratch:
        scratch.checkout(tree_id)
        editmsg = scratch.root / EDITMSG
        edited = message.encode()
        author = options.author
        assert author is None or not isinstance(author, str)  # CallOptions parsed it
        if author is not None:
            named = (author.name, author.email)
        else:
            signature = ctx.store.signature("AUTHOR")
            named = (signature.name, signature.email)
        env = hook_env(scratch.root, author=named)
        env["APPLYONCE_CALL_ID"] = call_id
        with scratch.staged_on(ref, parent):
            for name, path in hooks.items():
                args = _HOOK_ARGS[name]
                if name == "prepare-commit-msg" or (
                    name == "commit-msg" and "prepare-commit-msg" not in hooks
                ):
                    # Written after pre-commit, as git writes it: what pre-commit does in the
                    # scratch repository (a 'git commit' of its own) cannot change the message.
                    editmsg.write_bytes(message.encode())
                record = run_command(
                    hook_command(path, args),
                    cwd=scratch.root,
                    changed=(),
                    timeout=options.check_timeout,
                    env=env,
                    name=f"hook:{name}",
                )
                records.append(record)
                changed: list[str] = []
                diff = ""
                if name == "pre-commit":
                    changed, diff = scratch.changed_from(tree_id)
                if changed:
                    raise _failed(
                        HookModifiedFilesError(
                            f"the repository's pre-commit hook changed {_listed(changed)} "
                            "instead of passing; nothing was committed",
                            hook=name,
                            paths=changed,
                            hook_diff=_capped(diff),
                            hook_output=record.output_tail,
                        ),
                        [*checks, *records],
                    )
                if record.exit_code != 0:
                    why = "timed out" if record.exit_code is None else f"exit {record.exit_code}"
                    last = record.output_tail.strip().splitlines()[-1:] or [""]
                    raise _failed(
                        HookFailedError(
                            f"the repository's {name} hook refused the commit ({why}): "
                            f"{last[0][:160]}",
                            hook=name,
                            hook_output=record.output_tail,
                        ),
                        [*checks, *records],
                    )
            if set(hooks) - {"pre-commit"}:
                # A hook that removed the file left no message (git: "could not read").
                edited = editmsg.read_bytes() if editmsg.is_file() else b""
    if edited == message.encode():
        return message, records
    try:
        return message_after_hooks(message, edited, call_id=call_id), records
    except HookFailedError as exc:
        raise _failed(exc, [*checks, *records]) from None


def _call_id(message: str) -> str:
    for line in reversed(message.splitlines()):
        if line.startswith("Call-Id: "):
            return line.removeprefix("Call-Id: ").strip()
    raise AssertionError("a call's message has a Call-Id")


def _failed(
    error: HookFailedError | HookModifiedFilesError, records: list[CheckRecord]
) -> HookFailedError | HookModifiedFilesError:
    error.checks = records  # the rejected receipt lists every check and hook that ran
    return error


def _listed(paths: list[str]) -> str:
    shown = ", ".join(paths[:3])
    return shown + (f" (+{len(paths) - 3} more)" if len(paths) > 3 else "")


def _capped(diff: str) -> str:
    if len(diff) <= DIFF_SHOWN:
        return diff
    return diff[:DIFF_SHOWN] + f"\n[… {len(diff) - DIFF_SHOWN} more characters of diff]\n"
