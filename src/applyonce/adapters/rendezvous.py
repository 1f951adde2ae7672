"""Where a repository's resident server (``applyonce serve``) listens, and how a call reaches it:
the standard library alone, so that :mod:`~applyonce.adapters.launch` (the console scripts' first
step) stays tiny (docs/design.md §13).

One server serves one repository: its socket and its lock live in the repository's default state
directory, ``<common git dir>/applyonce/serve.sock`` and ``serve.lock``, shared by every linked
worktree. A Unix socket's path holds at most 107 bytes; a longer one is reached through the
directory's file descriptor (``/proc/self/fd/N/serve.sock``), never by moving the process's
current directory.

The wire: the client sends one request, 8 bytes of length then NUL-separated fields (see
:func:`encode_request`), with its standard input, output and error attached as file descriptors
(``SCM_RIGHTS``). The server answers with lines: ``P<pid>`` (a worker took the call: from now on
the call runs whatever the client does), then ``X<code>`` (it exited with ``code``) or
``S<signal>`` (it was killed by ``signal``); ``F<reason>`` instead of ``P`` when it will not take
the call (the client runs it in process). No ``P`` before the connection closes: nothing ran.
"""

from __future__ import annotations

import os
import sys

PROTOCOL = b"applyonce-serve/1"
SOCKET_NAME = "serve.sock"
LOCK_NAME = "serve.lock"
ENV = "APPLYONCE_SERVE"
# The longest path bound or connected to directly (sun_path holds 108 bytes with its NUL).
_SUN_PATH_MAX = 107


def git_dir(start: str) -> str | None:
    """The git directory of the repository holding ``start`` (its ``.git``, a linked worktree's
    ``.git/worktrees/NAME``, or a bare repository itself), as ``git`` finds it; ``$GIT_DIR`` when
    set; None outside any repository."""
    forced = os.environ.get("GIT_DIR")
    if forced:
        return os.path.realpath(forced)  # relative to the working directory, as git reads it
    here = os.path.realpath(start)
    while True:
        dot = os.path.join(here, ".git")
        if os.path.isdir(dot):
            return dot
        if os.path.isfile(dot):
            try:
                with open(dot, encoding="utf-8") as handle:
                    line = handle.readline().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if not line.startswith("gitdir:"):
                return None
            return os.path.realpath(os.path.join(here, line[len("gitdir:") :].strip()))
        if all(os.path.exists(os.path.join(here, n)) for n in ("HEAD", "objects", "refs")):
            return here  # a bare repository
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def common_dir(start: str) -> str | None:
    """The repository's common git directory (every worktree's ``.git``), None outside one."""
    found = git_dir(start)
    if found is None:
        return None
    try:
        with open(os.path.join(found, "commondir"), encoding="utf-8") as handle:
            return os.path.realpath(os.path.join(found, handle.read().strip()))
    except FileNotFoundError:
        return found
    except (OSError, UnicodeDecodeError):
        return None


def state_dir(common: str) -> str:
    """The repository's default applyonce state directory, which holds the socket and the lock."""
    return os.path.join(common, "applyonce")


def socket_address(state: str, dir_fd: int) -> str:
    """The address of ``state``'s socket: its path, or through ``dir_fd`` (an open descriptor of
    ``state``) when the path is too long for a Unix socket."""
    path = os.path.join(state, SOCKET_NAME)
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        return path
    return f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"


def compatibility() -> bytes:
    """What a client and a server must share for a call to run the same in either: applyonce's
    version and folder, the interpreter and its flags."""
    import applyonce

    folder = os.path.dirname(os.path.abspath(applyonce.__file__))
    return os.fsencode(
        f"{applyonce.__version__}|{folder}|{sys.executable}|{sys.version}|{tuple(sys.flags)}"
    )


# The environment a process reads at start-up, not per call (the locale and the standard streams'
# encoding, libgit2's home and global config, Python's own switches, the temporary folder): a
# server runs a call only for a client that has the same values as it has, or the same absence.
_STARTUP_PREFIXES = (b"PYTHON", b"LC_", b"GIT_CONFIG")
_STARTUP_NAMES = (b"HOME", b"XDG_CONFIG_HOME", b"LANG", b"LANGUAGE", b"TMPDIR", b"TZ")


def startup_environment(environ: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """The part of ``environ`` that a process reads at start-up."""
    return {
        key: value
        for key, value in environ.items()
        if key in _STARTUP_NAMES or key.startswith(_STARTUP_PREFIXES)
    }


def encode_request(
    kind: str, argv: list[str], cwd: str, umask: int, environ: dict[bytes, bytes]
) -> bytes:
    """A request: the protocol, :func:`compatibility`, the command (``applyonce`` or
    ``apply_patch``), the working directory, the umask, ``argv``, then ``KEY=VALUE`` for each
    environment variable; length-prefixed."""
    fields = [
        PROTOCOL,
        compatibility(),
        kind.encode(),
        os.fsencode(cwd),
        b"%d" % umask,
        b"%d" % len(argv),
        *(os.fsencode(arg) for arg in argv),
        *(key + b"=" + value for key, value in environ.items()),
    ]
    body = b"\0".join(fields)
    return len(body).to_bytes(8, "big") + body


class Request:
    """A decoded request (see :func:`encode_request`)."""

    def __init__(self, body: bytes) -> None:
        fields = body.split(b"\0")
        if len(fields) < 6 or fields[0] != PROTOCOL:
            raise ValueError("not an applyonce-serve request")
        self.compatibility = fields[1]
        self.kind = fields[2].decode()
        self.cwd = os.fsdecode(fields[3])
        self.umask = int(fields[4])
        argc = int(fields[5])
        self.argv = [os.fsdecode(arg) for arg in fields[6 : 6 + argc]]
        if len(self.argv) != argc:
            raise ValueError("truncated request")
        self.environ: dict[bytes, bytes] = {}
        for entry in fields[6 + argc :]:
            key, sep, value = entry.partition(b"=")
            if sep:
                self.environ[key] = value
