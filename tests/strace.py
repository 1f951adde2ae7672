"""The system calls of a real process, by ``strace``: run a command under it and read its log.

Every string ``strace`` prints is hex-escaped (``-xx``) and decoded here to bytes, and every file
descriptor comes with the path it named at the time (``-y``), so a path with quotes or non-ASCII
bytes reads back exactly. With ``data=True`` the written buffers are printed whole (``-s``): a
truncated one (``"…"...``) is an error, never a silent short write.

Used by the fsync discipline tests (tests/state/test_fsync_discipline.py) and the power-cut
simulation (tests/durability/powercut.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

# CI installs strace and sets this: there a missing strace fails the run instead of skipping.
REQUIRED = bool(os.environ.get("APPLYONCE_REQUIRE_STRACE"))
needs_strace = pytest.mark.skipif(
    shutil.which("strace") is None and not REQUIRED,
    reason="strace is not installed (.ci/run installs it)",
)

# Written buffers up to this size are printed whole (a call's pack is a few KiB).
MAX_STRING = 1 << 24


@dataclass(frozen=True)
class Fd:
    """A file descriptor argument (``3</path>``), or ``AT_FDCWD</cwd>``: ``number`` is -100 then."""

    number: int
    path: str
    deleted: bool = False  # the file was unlinked (``3</path>(deleted)``)


Arg = Fd | bytes | str  # a descriptor, a string (decoded), anything else (flags, numbers) as text


@dataclass(frozen=True)
class Syscall:
    pid: int
    name: str
    args: tuple[Arg, ...]
    result: int  # -1 on an error
    result_path: str | None = None  # the path of a returned descriptor (``= 3</path>``)

    def fd(self, index: int = 0) -> Fd:
        arg = self.args[index]
        assert isinstance(arg, Fd), (self.name, self.args)
        return arg

    def strings(self) -> list[bytes]:
        """The string arguments, in order (paths, written data)."""
        return [a for a in self.args if isinstance(a, bytes)]

    def paths(self) -> list[str]:
        return [os.fsdecode(s) for s in self.strings()]


def run_traced(
    argv: Sequence[str],
    log: Path,
    syscalls: Sequence[str],
    *,
    data: bool = False,
    input: bytes | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``argv`` (and its threads and children) under ``strace``, logging ``syscalls`` to
    ``log``; ``data``: with the written buffers whole."""
    options = ["-f", "-y", "-qq", "-xx", "-o", str(log), "-e", "trace=" + ",".join(syscalls)]
    if data:
        options += ["-s", str(MAX_STRING)]
    return subprocess.run(
        ["strace", *options, *argv],
        input=input,
        capture_output=True,
        env=dict(env if env is not None else os.environ),
        check=check,
    )


_LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)(?:<((?:[^>\\]|\\.)*)>)?")
_UNFINISHED = re.compile(r"^(\d+)\s+(.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$")
_TOKEN = re.compile(
    r'"((?:[^"\\]|\\.)*)"(\.\.\.)?'  # a string, maybe truncated
    r"|(-?\d+|AT_FDCWD)<((?:[^>\\]|\\.)*)>(\(deleted\))?"  # a descriptor and its path
    r'|([^,\[\]{}"\s][^,\[\]{}"]*)'  # anything else
)
_ESCAPES = {"n": 10, "t": 9, "r": 13, "v": 11, "f": 12, "\\": 92, '"': 34, "'": 39, "?": 63}


def unescape(text: str) -> bytes:
    """A string as ``strace`` prints it (C escapes, ``\\xNN``) back to its bytes."""
    out = bytearray()
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\":
            out += char.encode()
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "x":
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        elif nxt in "01234567":
            j = i + 1
            while j < len(text) and j < i + 4 and text[j] in "01234567":
                j += 1
            out.append(int(text[i + 1 : j], 8))
            i = j
        else:
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
    return bytes(out)


def _args(text: str) -> tuple[Arg, ...]:
    args: list[Arg] = []
    for match in _TOKEN.finditer(text):
        string, truncated, number, path, deleted, other = match.groups()
        if string is not None:
            if truncated:
                raise ValueError(f"strace truncated a string: raise -s ({text[:120]}…)")
            args.append(unescape(string))
        elif number is not None:
            fd = -100 if number == "AT_FDCWD" else int(number)
            args.append(Fd(fd, os.fsdecode(unescape(path)), deleted is not None))
        elif other.strip():
            args.append(other.strip())
    return tuple(args)


def parse(log: Path) -> list[Syscall]:
    """The completed system calls of ``log``, in the order they returned (a call another thread
    interrupted is joined with its ``resumed`` half)."""
    calls: list[Syscall] = []
    pending: dict[str, str] = {}
    with log.open(encoding="ascii", errors="replace") as lines:
        for raw in lines:
            line = raw.rstrip("\n")
            unfinished = _UNFINISHED.match(line)
            if unfinished:
                pending[unfinished[1]] = unfinished[2]
                continue
            resumed = _RESUMED.match(line)
            if resumed and resumed[1] in pending:
                line = f"{resumed[1]} {pending.pop(resumed[1])}{resumed[2]}"
            match = _LINE.match(line)
            if not match:
                continue  # a signal, an exit, a call that never returned
            pid, name, args, result, result_path = match.groups()
            calls.append(
                Syscall(
                    int(pid),
                    name,
                    _args(args),
                    -1 if result == "?" else int(result),
                    os.fsdecode(unescape(result_path)) if result_path is not None else None,
                )
            )
    return calls
