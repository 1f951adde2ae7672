"""The built-in checks on a staged tree, before it may be published (pure: bytes in, records out).

Built-in checks read the changed files from memory: Python, JSON and TOML files must still parse
(a file that did not parse before the patch is not held against it), and the patch must not add
merge-conflict markers. Each can be skipped by name (``--skip-check syntax|markers``); a skipped
check is still listed in the receipt, marked as skipped. The ``--check CMD`` commands run in a
scratch checkout: :mod:`applyonce.flow.call.checks`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

import orjson

from applyonce.core.plan import TreePlan
from applyonce.core.receipt import CheckRecord
from applyonce.errors import ApplyOnceError, UsageError

OUTPUT_TAIL = 4000
# The names ``--skip-check`` takes, and the receipt names of the checks they skip.
BUILTIN_CHECKS: dict[str, str] = {
    "syntax": "builtin:syntax",
    "markers": "builtin:conflict-markers",
}
SKIPPED = "skipped (--skip-check {name})"


class CheckFailedError(ApplyOnceError):
    kind = "check-failed"
    default_hint = "fix the patch so the check passes, and send it as a new attempt"
    # The records of every check that ran, the failed one last (the rejected receipt lists them).
    checks: Sequence[CheckRecord] = ()


MAX_SYNTAX_CHECK_BYTES = 8 * 1024 * 1024


def _syntax_error(path: str, data: bytes) -> str | None:
    if len(data) > MAX_SYNTAX_CHECK_BYTES:
        return None  # too large to parse safely in-process; --check commands still see it
    try:
        if path.endswith(".py"):
            compile(data, path, "exec", dont_inherit=True)
        elif path.endswith(".json"):
            orjson.loads(data)
        elif path.endswith(".toml"):
            import tomllib  # only where a patch writes TOML: a cold call need not load it

            tomllib.loads(data.decode("utf-8"))
    except SyntaxError as exc:
        return f"{path}:{exc.lineno}: {exc.msg}"
    # tomllib.TOMLDecodeError is a ValueError.
    except (orjson.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
        return f"{path}: {str(exc).splitlines()[0]}"
    except (RecursionError, MemoryError):
        return f"{path}: nested too deeply to parse"
    return None


def failure_hint(check_name: str) -> str | None:
    """The hint of a failed built-in check: how to skip it (None: not a built-in check)."""
    for name, record_name in BUILTIN_CHECKS.items():
        if record_name == check_name:
            return (
                f"{CheckFailedError.default_hint}; if the project's files are meant to fail it "
                f"(Python 2 code, say), send the new attempt with --skip-check {name}"
            )
    return None


def check_skip_names(names: Sequence[str]) -> tuple[str, ...]:
    """Validate ``--skip-check`` names; returns them sorted, without repeats.

    Raises:
        UsageError: a name that is not a built-in check.
    """
    for name in names:
        if name not in BUILTIN_CHECKS:
            raise UsageError(
                f"unknown --skip-check {name!r}",
                hint=f"the built-in checks are {' and '.join(BUILTIN_CHECKS)}",
            )
    return tuple(sorted(set(names)))


def marker_lines(data: bytes) -> Counter[bytes]:
    """The merge-conflict marker lines ``data`` holds, each with how often.

    A ``<<<<<<<`` or ``>>>>>>>`` line (alone or followed by a space) always counts. A ``=======``
    line counts only inside a ``<<<<<<< … >>>>>>>`` block: on its own it is a reStructuredText
    or Markdown heading underline.
    """
    found: Counter[bytes] = Counter()
    if b"<<<<<<<" not in data and b">>>>>>>" not in data:
        return found
    separators: int | None = None  # inside a block: the ``=======`` lines seen so far
    for line in data.splitlines():
        if line.startswith((b"<<<<<<<", b">>>>>>>")) and line[7:8] in (b"", b" "):
            found[line] += 1
            if line[0] == ord("<"):
                separators = 0
            else:
                found[b"======="] += separators or 0
                separators = None
        elif line == b"=======" and separators is not None:
            separators += 1
    return found


def conflict_markers(data: bytes) -> int:
    """How many merge-conflict marker lines ``data`` holds (:func:`marker_lines`)."""
    return sum(marker_lines(data).values())


def builtin_checks(
    plan: TreePlan, old_content: dict[str, bytes | None], *, skip: Sequence[str] = ()
) -> list[CheckRecord]:
    """Syntax of changed ``.py``/``.json``/``.toml`` files and no new conflict markers.

    Args:
        plan: the staged changes.
        old_content: each changed path's bytes before the patch (None: it did not exist).
        skip: names of :data:`BUILTIN_CHECKS` not to run; each is recorded as skipped
            (exit code 0: it rejected nothing).
    """
    started = time.monotonic()
    syntax: list[str] = []
    markers: list[str] = []
    for change in plan.changes:
        if change.content is None:
            continue
        # Syntax: judged against what was at this path before (a move onto a file included).
        before = old_content.get(change.path)
        problem = None if "syntax" in skip else _syntax_error(change.path, change.content)
        if problem and (before is None or _syntax_error(change.path, before) is None):
            syntax.append(problem)
        # Markers: judged against the content the change started from (a move's source).
        source = old_content.get(change.from_path or change.path)
        # A marker line the file did not hold before is added, even where the patch removes
        # another (resolving one conflict block while adding a new one is still adding one).
        if "markers" not in skip and marker_lines(change.content) - marker_lines(source or b""):
            markers.append(f"{change.path}: adds merge-conflict markers")
    elapsed = int((time.monotonic() - started) * 1000)
    found = {"syntax": syntax, "markers": markers}
    return [
        CheckRecord(
            name=record_name,
            exit_code=1 if found[name] else 0,
            duration_ms=elapsed if name == "syntax" and name not in skip else 0,
            output_tail=(
                SKIPPED.format(name=name) if name in skip else "\n".join(found[name])[-OUTPUT_TAIL:]
            ),
        )
        for name, record_name in BUILTIN_CHECKS.items()
    ]
