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

PROTOCOL = b"applyonce-serve/2"
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


# What confines a process that its environment does not show, and a forked worker would take from
# the server instead of the client: its identity (user, groups, capabilities), its sandbox
# (no_new_privs, seccomp, namespaces, control group, security label), the signals it ignores
# (nohup) and its resource limits (ulimit). A server runs a call only for a client confined as it
# is: a sandboxed call never runs outside its sandbox.
_STATUS_FIELDS = (
    b"Uid:",
    b"Gid:",
    b"Groups:",
    b"SigIgn:",
    b"CapInh:",
    b"CapPrm:",
    b"CapEff:",
    b"CapBnd:",
    b"CapAmb:",
    b"NoNewPrivs:",
    b"Seccomp:",
    b"Seccomp_filters:",
)
_NAMESPACES = ("cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts")


def confinement() -> bytes:
    """This process's confinement (see ``_STATUS_FIELDS``), as ``/proc/self`` shows it."""
    status = proc_file("status")
    parts = [line for line in status.splitlines() if line.startswith(_STATUS_FIELDS)]
    # Signals 1 to 31 only: the C library's own (32, 33) show as ignored after a posix_spawn.
    parts = [
        b"SigIgn:%d" % (int(line.split()[1], 16) & 0x7FFFFFFF)
        if line.startswith(b"SigIgn:")
        else line
        for line in parts
    ]
    parts += [proc_file("limits"), proc_file("cgroup"), proc_file("attr/current")]
    for name in _NAMESPACES:
        try:
            parts.append(os.fsencode(os.readlink(f"/proc/self/ns/{name}")))
        except OSError:
            parts.append(b"")
    parts.append(identity("/"))  # a chroot's root is another folder
    return b"\n".join(parts).replace(b"\0", b"")  # a security label may end in one


def identity(path: str) -> bytes:
    """The folder ``path`` names, as ``device:inode`` (empty when it cannot be read): the same
    path names the same folder for a worker only where this holds."""
    try:
        found = os.stat(path)
    except OSError:
        return b""
    return b"%d:%d" % (found.st_dev, found.st_ino)


def proc_file(name: str) -> bytes:
    """``/proc/self/NAME``'s bytes, empty when unreadable."""
    try:
        with open(f"/proc/self/{name}", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


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
    """A request: the protocol, :func:`compatibility`, :func:`confinement`, the command
    (``applyonce`` or ``apply_patch``), the working directory and its :func:`identity`, the umask,
    ``argv``, then ``KEY=VALUE`` for each environment variable; length-prefixed."""
    fields = [
        PROTOCOL,
        compatibility(),
        confinement(),
        kind.encode(),
        os.fsencode(cwd),
        identity(cwd),
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
        if len(fields) < 8 or fields[0] != PROTOCOL:
            raise ValueError("not an applyonce-serve request")
        self.compatibility = fields[1]
        self.confinement = fields[2]
        self.kind = fields[3].decode()
        self.cwd = os.fsdecode(fields[4])
        self.cwd_identity = fields[5]
        self.umask = int(fields[6])
        argc = int(fields[7])
        self.argv = [os.fsdecode(arg) for arg in fields[8 : 8 + argc]]
        if len(self.argv) != argc:
            raise ValueError("truncated request")
        self.environ: dict[bytes, bytes] = {}
        for entry in fields[8 + argc :]:
            key, sep, value = entry.partition(b"=")
            if sep:
                self.environ[key] = value
