"""The console scripts' first step (``applyonce``, ``apply_patch``, ``python -m applyonce``): hand
the call to the repository's resident server when one runs, else run it in this process
(docs/design.md §13).

The standard library alone, and little of it, is imported before the answer is known: a call
through the server costs a Python start-up and a round trip, not applyonce's imports. Whatever the
server cannot run exactly as this process would (another command, another applyonce or Python,
another start-up environment, another user, no server) runs in process, as if the server did not
exist: the server's ``F`` answer, or a connection closed before a worker took the call, means
nothing ran.
"""

from __future__ import annotations

import os
import sys

from applyonce.adapters import rendezvous

TYPE_CHECKING = False  # typing's costs an import; type checkers know the name
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal  # signal without its enums: the signal module imports enum and functools

EXIT_UNKNOWN = 5  # docs/design.md §8
# The commands a server runs: the calls (short, exactly once), not recover, audit or mcp.
CALLS = ("apply", "revert")
_SERVER_LOST = (
    "error: the applyonce server stopped during the call, which may or may not have committed; "
    "run 'applyonce recover', then repeat the call (a committed call replays)\n"
)
# The server a call starts: ``python -m applyonce serve`` without the folder ``-m`` (or ``-c``) puts
# first on ``sys.path``, the caller's, where a module of the user's (a ``selectors.py``, a
# ``typer/``) would be imported in its stead. The interpreter's flags stay the caller's.
_SERVE = (
    "import sys; sys.flags.safe_path or sys.path.pop(0); "
    "from applyonce.adapters.cli import main; main()"
)
_NO_SERVER = (
    "error: APPLYONCE_SERVE=require and no applyonce server took the call; start one with "
    "'applyonce serve', or unset APPLYONCE_SERVE\n"
)


def applyonce_main() -> None:
    """The ``applyonce`` console script: ``apply`` and ``revert`` through the server, or any
    command here."""
    through_server("applyonce", sys.argv)
    _closed_streams_to_nowhere()
    from applyonce.adapters.cli import main

    main()


def apply_patch_main() -> None:
    """The ``apply_patch`` console script: through the server, or here."""
    through_server("apply_patch", sys.argv)
    _closed_streams_to_nowhere()
    from applyonce.adapters.apply_patch_cmd import main

    main()


def _closed_streams_to_nowhere() -> None:
    """A standard stream the caller closed (``>&-``) is None in Python: reading it then reads
    nothing and what is written to it goes nowhere, as with a closed descriptor in any other
    program, instead of an internal error after the call has committed."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode))  # noqa: SIM115 (the process's own stream)


def through_server(kind: str, argv: list[str]) -> None:
    """Run the call through the repository's server and exit as it did; return when the call is
    to run in this process (nothing ran)."""
    mode = os.environ.get(rendezvous.ENV, "")
    if mode == "0" or sys.platform != "linux":
        return
    if kind == "applyonce" and (len(argv) < 2 or argv[1] not in CALLS):
        return
    # A person's terminal: a prompt, /dev/tty and job control stay this process's.
    terminal = any(_is_terminal(fd) for fd in (0, 1, 2))
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    common = None
    start = cwd
    if cwd and not terminal:
        repo = _repo_option(argv[2:]) if kind == "applyonce" else None
        start = os.path.join(cwd, repo) if repo else cwd
        common = rendezvous.common_dir(start)
    conn = None
    if common is not None:
        state = rendezvous.state_dir(common)
        conn = _connect(state)
        if conn is None and (mode in ("1", "require") or (not mode and _config_on(common))):
            conn = _start(start, state, wait=mode == "require")
    if conn is not None:
        _run(conn, kind, argv, cwd)
    if mode == "require":
        os.write(2, _NO_SERVER.encode())
        os._exit(3)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _repo_option(args: list[str]) -> str | None:
    """``--repo PATH`` / ``-C PATH`` of ``apply`` (only to find the server: the server's worker
    parses the command line itself)."""
    for i, arg in enumerate(args):
        if arg == "--":
            return None
        if arg in ("--repo", "-C"):
            return args[i + 1] if i + 1 < len(args) else None
        if arg.startswith("--repo="):
            return arg[len("--repo=") :]
        if arg.startswith("-C") and len(arg) > 2:
            return arg[2:]
    return None


def _config_on(common: str) -> bool:
    """``applyonce.serve`` in the repository's own config file (``git config applyonce.serve
    true``): start a server on demand. Only that file is read, without ``git``: the call that
    finds no server pays no process for it."""
    value = False
    section = ""
    try:
        with open(os.path.join(common, "config"), encoding="utf-8") as handle:
            for raw in handle:
                line = raw.split("#", 1)[0].split(";", 1)[0].strip()
                if line.startswith("["):
                    section = line.strip("[] \t").lower()
                elif section == "applyonce" and line:
                    key, sep, text = line.partition("=")
                    if key.strip().lower() == "serve":
                        text = text.strip().strip('"').lower()
                        value = not sep or text in ("true", "yes", "on", "1")
    except (OSError, UnicodeDecodeError):
        return False
    return value


def _connect(state: str) -> object | None:
    """A connection to the server of ``state``, None when none listens there."""
    import _socket

    try:
        dir_fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(rendezvous.socket_address(state, dir_fd))
        # Only this user's server gets the call's environment and streams (and its word on
        # what ran): a socket another user put there is passed over.
        creds = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        if int.from_bytes(creds[4:8], sys.byteorder) != os.geteuid():
            raise PermissionError
    except OSError:
        conn.close()
        return None
    finally:
        os.close(dir_fd)
    return conn


def _start(start: str, state: str, *, wait: bool) -> object | None:
    """Start a server for the repository of ``start`` in its own session (this call does not
    wait for it unless ``wait``: the next one finds it)."""
    env = {k: v for k, v in os.environb.items() if k != b"APPLYONCE_FAULT"}
    null = os.devnull
    try:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-c", _SERVE, "serve", "--repo", start],
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, null, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
            ],
            setsid=True,
        )
    except OSError:
        return None
    if not wait:
        return None
    import time

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        conn = _connect(state)
        if conn is not None:
            return conn
        time.sleep(0.01)
        try:  # noqa: SIM105 (contextlib is an import more for every call)
            os.waitpid(pid, os.WNOHANG)  # one that lost the race to another server exits
        except ChildProcessError:
            pass
    return None


def _run(conn: object, kind: str, argv: list[str], cwd: str) -> None:
    """Send the call, wait for its end and exit as its worker did; return if nothing ran."""
    import _socket

    assert isinstance(conn, _socket.socket)
    umask = os.umask(0o022)
    os.umask(umask)
    request = rendezvous.encode_request(kind, argv, cwd, umask, dict(os.environb))
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
    try:
        sent = conn.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if sent < len(request):
            conn.sendall(request[sent:])
    except OSError:
        conn.close()
        return  # an incomplete request runs nothing
    pending = b""
    worker = 0
    while True:
        try:
            chunk = conn.recv(4096)
        except OSError:
            chunk = b""
        if not chunk:
            break
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            tag, value = line[:1], line[1:]
            if tag == b"F" and not worker:
                conn.close()
                return
            if tag == b"P":
                worker = int(value)
                _forward_signals(worker)
            elif tag == b"X":
                os._exit(int(value))
            elif tag == b"S":
                _die_by(int(value))
    conn.close()
    if not worker:
        return
    os.write(2, _SERVER_LOST.encode())
    os._exit(EXIT_UNKNOWN)


def _forward_signals(worker: int) -> None:
    """Ctrl-C, a terminal hang-up or a kill reach the process that runs the call, which ends as
    it would here (exit 130, or 128 + the signal)."""

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(worker, signum)
        except ProcessLookupError:
            return

    for signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT):
        if _signal.getsignal(signum) != _signal.SIG_IGN:  # ignored here (nohup): there too
            _signal.signal(signum, forward)


def _die_by(signum: int) -> None:
    """End as the worker ended: killed by ``signum`` (a SIGKILL at a fault point, say)."""
    try:  # noqa: SIM105 (contextlib is an import more for every call)
        _signal.signal(signum, _signal.SIG_DFL)
    except (OSError, ValueError):  # SIGKILL has no handler to reset
        pass
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)
