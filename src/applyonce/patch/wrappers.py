"""What agents wrap a Codex patch in, taken off before the patch is read (``codex.py``).

Each wrapper, because agents really send it (the Codex CLI's own shell-command layer reads the
shell ones; its ``apply_patch`` parser alone reads only a bare ``<<'EOF'``):

* **a markdown fence** — the patch between a line `````` ``` `````` (or ``~~~``, with or without a
  language tag, ```` ```diff ````) and the fence's closing line; text before the opening fence and
  after the closing one is the model's prose and is skipped. A fence that is not closed, or a
  second ``*** Begin Patch`` after the closing fence, refuses the text (never half a reply).
* **a heredoc** — ``apply_patch <<'EOF'`` … ``EOF`` (``applypatch``, any delimiter, quoted or
  not, ``<<-``), or the bare ``<<'EOF'`` … ``EOF``;
* **a command substitution** — ``apply_patch "$(cat <<'EOF'`` … ``EOF`` … ``)"``;
* **a ``cd DIR &&`` before the command** — the patch's relative paths are then relative to DIR,
  as the shell would run it, so they are read as ``DIR/PATH`` from the repository root (the
  directory an ``apply_patch`` call runs in). DIR must stay inside the repository: a relative DIR
  that climbs out of it (``cd ../other``) refuses the patch here; an absolute DIR is kept, and
  ``paths.py`` accepts the paths it makes only inside the repository. A DIR the shell would expand
  (``~``, ``$VAR``, a backquote, a glob) is refused: what it names is not in the text.

Pure: text in, lines out.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

BEGIN = "*** Begin Patch"
_DELIMITER = r"""(?P<quote>['"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_.-]*)(?P=quote)"""
_DIR = r"""(?:'(?P<sq>[^']*)'|"(?P<dq>[^"]*)"|(?P<bare>[^\s'"&;|]+))"""
# ``[cd DIR &&] [apply_patch [\"$(cat ]]<<[-]['"]EOF['"]``
_HEREDOC_OPEN = re.compile(
    rf"""^\s*(?:cd\s+{_DIR}\s*&&\s*)?"""
    r"""(?:(?P<cmd>apply_patch|applypatch)\s*(?P<subst>"\$\(\s*cat\s+)?)?"""
    rf"""<<-?\s*{_DELIMITER}\s*$"""
)
_FENCE_OPEN = re.compile(r"^\s{0,3}(?P<fence>`{3,}|~{3,})\s*[\w.+#-]*\s*$")
_SHELL_EXPANDED = re.compile(r"[~$`*?\[\]{}\\]")


class WrapperError(ValueError):
    """A wrapper the text opens but does not close properly; ``line`` is 1-based."""

    def __init__(self, message: str, line: int, hint: str) -> None:
        super().__init__(message)
        self.line = line
        self.hint = hint


@dataclass(frozen=True)
class Unwrapped:
    """The patch's own lines, the index of the first in the text's lines, and the directory
    of a ``cd DIR &&`` (normalised; None without one, or for ``cd .``)."""

    lines: list[str]
    offset: int
    cd: str | None = None


def unwrap(lines: list[str]) -> Unwrapped:
    """Take the wrappers of the module docstring off ``lines`` (the text's lines, without their
    line ends).

    Raises:
        WrapperError: a fence or heredoc opened and not closed, two patches, or a ``cd`` to a
            directory outside the repository or one the shell would expand.
    """
    lines, offset = _strip_fence(lines)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return Unwrapped(lines, offset)
    match = _HEREDOC_OPEN.match(lines[first])
    if not match:
        return Unwrapped(lines, offset)
    tag = match.group("tag")
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    last = nonblank[-1]
    if match.group("subst"):
        # apply_patch "$(cat <<'EOF' … EOF … )": the substitution closes after the delimiter.
        if lines[last].strip() != ')"' or len(nonblank) < 3:
            raise WrapperError(
                "the command substitution '\"$(cat <<...' is not closed by a line ')\"'",
                line=offset + first + 1,
                hint="end the patch with the heredoc's delimiter line, then a line ')\"'",
            )
        last = nonblank[-2]
    if last == first or lines[last].strip() != tag:
        raise WrapperError(
            f"heredoc opened with {tag!r} is not closed by a line {tag!r}",
            line=offset + first + 1,
            hint=f"end the patch with a line {tag!r}, or send it without the heredoc",
        )
    cd = _cd_dir(match, offset + first + 1)
    return Unwrapped(lines[first + 1 : last], offset + first + 1, cd)


def _strip_fence(lines: list[str]) -> tuple[list[str], int]:
    """The lines inside the markdown fence that holds the patch, and the index of the first;
    ``lines`` as they are when the text does not start a patch inside a fence."""
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or _starts_patch(lines[first]):
        return lines, 0
    for i, line in enumerate(lines):
        opened = _FENCE_OPEN.match(line)
        if not opened:
            continue
        inner = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
        if inner is None or not _starts_patch(lines[inner]):
            continue
        fence = opened.group("fence")
        close = next(
            (
                j
                for j in range(inner + 1, len(lines))
                if re.fullmatch(rf"\s{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*", lines[j])
            ),
            None,
        )
        if close is None:
            raise WrapperError(
                f"the markdown fence {fence!r} around the patch is not closed",
                line=i + 1,
                hint=f"end the patch with a line {fence!r}, or send it without the fence",
            )
        if any(rest.strip() == BEGIN for rest in lines[close + 1 :]):
            raise WrapperError(
                "the text holds more than one patch (a second '*** Begin Patch' after the "
                "fenced one)",
                line=close + 2,
                hint="send one patch per call, or put every file in one patch",
            )
        return lines[i + 1 : close], i + 1
    return lines, 0


def _starts_patch(line: str) -> bool:
    return line.strip() == BEGIN or _HEREDOC_OPEN.match(line) is not None


def _cd_dir(match: re.Match[str], line: int) -> str | None:
    raw = next((match.group(g) for g in ("sq", "dq", "bare") if match.group(g) is not None), None)
    if raw is None:
        return None
    hint = "send the patch without 'cd DIR &&', its paths relative to the repository root"
    if not raw or (match.group("sq") is None and _SHELL_EXPANDED.search(raw)):
        raise WrapperError(
            f"the patch runs after 'cd {raw}', a directory the shell would expand",
            line=line,
            hint=hint,
        )
    absolute = raw.startswith("/")
    where = posixpath.normpath(raw)
    if not absolute and (where == ".." or where.startswith("../")):
        raise WrapperError(
            f"the patch runs after 'cd {raw}', outside the repository", line=line, hint=hint
        )
    return None if where == "." else where


def under(cd: str | None, path: str) -> str:
    """``path`` as seen from the repository root when the patch ran in ``cd`` (absolute paths
    stay as they are)."""
    if cd is None or path.startswith("/"):
        return path
    return f"{cd.rstrip('/')}/{path}"
