"""``applyonce serve``: a repository's resident server (docs/design.md §13).

It imports applyonce once, then forks one worker per call from that warm image: ahead of the
call (a spare worker waits for the next call, its memory already its own), or when the call
arrives if no spare is ready. The worker takes
the client's standard streams (passed over the socket), working directory, umask, environment and
command line, and runs the very entry point the client would have run (``applyonce``'s or
``apply_patch``'s ``main``) — so its output, exit code, commit and receipt are the in-process
run's, byte for byte, and a fault point's SIGKILL kills the process that runs the call, as in
process. The server itself only accepts, forks and reports a worker killed by a signal; it holds
no repository open and runs no call, so a worker starts from the same state every time.

One server a repository: an exclusive ``flock`` on ``serve.lock`` decides who serves; the holder
replaces whatever socket file is left (a stale one from a server that was killed). It stops after
``idle`` seconds without a call (its running workers finish on their own).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import os
import selectors
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable

from applyonce.adapters import rendezvous
from applyonce.errors import UsageError

DEFAULT_IDLE = 60.0
# The entry point each command runs in a worker: the modules the console scripts fall back to
# (applyonce.adapters.launch), named, not imported: they sit above this module.
ENTRIES = {
    "applyonce": "applyonce.adapters.cli",
    "apply_patch": "applyonce.adapters.apply_patch_cmd",
}
# Imported before the first fork, so that no worker pays for them.
_WARM = (
    "applyonce.adapters.cli",
    "applyonce.adapters.cli.apply",
    "applyonce.adapters.apply_patch_cmd",
    "applyonce.executor",
)
_WARM_PACKAGES = (
    "applyonce.flow",
    "applyonce.git",
    "applyonce.state",
    "applyonce.core",
    "applyonce.patch",
)
_REQUEST_TIMEOUT = 5.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_MAX_REQUEST = 64 << 20


class _Stopped(Exception):
    """SIGTERM, SIGINT or SIGHUP: stop serving (raised from the handler, so that a wait in
    ``select`` ends; Python would resume it)."""


class AlreadyServing(Exception):
    """Another process serves this repository (it holds the lock)."""


def serve(start: str, idle: float, *, ready: Callable[[str], None] | None = None) -> None:
    """Serve the repository holding ``start`` until ``idle`` seconds pass without a call (or a
    SIGTERM or SIGINT). Raises :class:`AlreadyServing`, or :class:`LookupError` outside a
    repository."""
    common = rendezvous.common_dir(start)
    if common is None:
        raise LookupError(start)
    state = rendezvous.state_dir(common)
    _close_inherited()
    os.makedirs(state, exist_ok=True)
    os.chdir("/")  # holds no folder of the user's busy; each worker moves to its caller's
    lock_path = os.path.join(state, rendezvous.LOCK_NAME)
    try:
        # Never through a link: the server truncates its lock file and writes its pid there.
        lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UsageError(
            f"{lock_path} is a symbolic link, not the server's lock file",
            hint=f"remove it (rm {lock_path}), then start the server again",
        ) from None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise AlreadyServing(state) from None
        os.ftruncate(lock, 0)
        os.write(lock, b"%d\n" % os.getpid())
        _Server(state, lock, idle).run(ready)
    finally:
        os.close(lock)


def _close_inherited() -> None:
    """Close the descriptors this process inherited besides its standard streams (a caller's
    pipe, say): held for the server's whole life, they would keep their reader waiting for an end
    long after the call that started the server. Python's own descriptors are not inheritable."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed since
            if fd > 2 and os.get_inheritable(fd):
                os.close(fd)


def _ignored() -> frozenset[int]:
    """The signals this process ignores (inherited: ``nohup``, a background job's SIGINT)."""
    for line in rendezvous.proc_file("status").splitlines():
        if line.startswith(b"SigIgn:"):
            mask = int(line.split()[1], 16)
            return frozenset(n for n in range(1, 65) if mask >> (n - 1) & 1)
    return frozenset()


def _sources() -> dict[str, tuple[int, int]]:
    """Each of applyonce's modules loaded here: its file's modification time and size."""
    found: dict[str, tuple[int, int]] = {}
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and (name == "applyonce" or name.startswith("applyonce.")):
            try:
                info = os.stat(path)
            except OSError:
                found[path] = (-1, -1)
            else:
                found[path] = (info.st_mtime_ns, info.st_size)
    return found


def _warm() -> None:
    import importlib
    import pkgutil

    for name in _WARM:
        importlib.import_module(name)
    for package in _WARM_PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, package + "."):
            with contextlib.suppress(Exception):  # an optional dependency not installed
                importlib.import_module(info.name)
    # What a command line builds the first time only (the typer app's click commands, the
    # converters of the calls' options, the parser's caches): built once here, kept for every
    # worker (``prebuild``), and run once by a help printed nowhere.
    import io

    importlib.import_module(ENTRIES["applyonce"]).prebuild("apply", "revert")
    argv = sys.argv
    sys.argv = ["applyonce", "apply", "--help"]
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
            contextlib.suppress(SystemExit),
        ):
            importlib.import_module(ENTRIES["applyonce"]).main()
    finally:
        sys.argv = argv
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the command line's own handler


class _Server:
    def __init__(self, state: str, lock: int, idle: float) -> None:
        self.state = state
        self.lock = lock
        self.idle = idle
        self.workers: dict[int, socket.socket] = {}
        # The worker forked ahead of the next call (its pid, and the socket the call reaches it
        # by), or None.
        self.spare: tuple[int, socket.socket] | None = None
        self.compatibility = rendezvous.compatibility()
        self.startup = rendezvous.startup_environment(dict(os.environb))
        self.confinement = rendezvous.confinement()
        self.ignored = _ignored()
        self.sources = _sources()
        self.obsolete = False

    def run(self, ready: Callable[[str], None] | None) -> None:
        _warm()
        self.sources = _sources()
        gc.collect()  # no garbage of the warm-up for a worker's collection to finalize
        dir_fd = os.open(self.state, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        path = os.path.join(self.state, rendezvous.SOCKET_NAME)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        inode = -1
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # we hold the lock: a socket left here is stale
            old = os.umask(0o077)
            try:
                listener.bind(rendezvous.socket_address(self.state, dir_fd))
            finally:
                os.umask(old)
            listener.listen(128)
            inode = os.stat(path).st_ino
            with contextlib.suppress(_Stopped):
                for signum in _STOP_SIGNALS:
                    if signum not in self.ignored:  # nohup applyonce serve: no hang-up stop
                        signal.signal(signum, self._stop)
                if ready is not None:
                    ready(path)
                self._loop(listener)
        finally:
            for signum in _STOP_SIGNALS:
                signal.signal(signum, signal.SIG_IGN)  # stopping already
            listener.close()
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == inode:
                    os.unlink(path)
            os.close(dir_fd)
            self._drop_spare()
            self._reap(wait=True)

    def _stop(self, signum: int, frame: object) -> None:
        raise _Stopped

    def _loop(self, listener: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        last = time.monotonic()
        while True:
            if self.spare is None:
                self._fork_spare(listener)
            # A worker's end is polled (its exit code it sends itself; a signal, we do).
            timeout = 0.05 if self.workers else max(0.0, last + self.idle - time.monotonic())
            events = selector.select(timeout)
            if self._reap(wait=False):
                last = time.monotonic()
            if events:
                with contextlib.suppress(OSError):
                    conn, _ = listener.accept()
                    self._take(conn, listener)
                last = time.monotonic()
                if self.obsolete:
                    break
            elif not self.workers and time.monotonic() >= last + self.idle:
                break
        selector.close()

    def _reap(self, *, wait: bool) -> bool:
        reaped = False
        while self.workers:
            try:
                pid, status = os.waitpid(-1, 0 if wait else os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if self.spare is not None and pid == self.spare[0]:
                self.spare[1].close()
                self.spare = None  # a spare that died: the next call forks its own
                continue
            conn = self.workers.pop(pid, None)
            if conn is None:
                continue
            reaped = True
            if os.WIFSIGNALED(status):
                with contextlib.suppress(OSError):
                    conn.sendall(b"S%d\n" % os.WTERMSIG(status))
            conn.close()
        return reaped

    def _take(self, conn: socket.socket, listener: socket.socket) -> None:
        """Read a request and fork its worker, or answer ``F`` (the client runs the call)."""
        fds: list[int] = []
        pid = -1
        try:
            conn.settimeout(_REQUEST_TIMEOUT)
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _, uid, _ = struct.unpack("3i", creds)
            body = _receive_body(conn, fds)
            request = rendezvous.Request(body) if body is not None else None
            refusal = self._refusal(uid, request)
            if refusal:
                conn.sendall(b"F" + refusal + b"\n")
                return
            assert request is not None and body is not None
            conn.settimeout(None)
            pid = self._hand_to_spare(conn, body, fds)
            if pid > 0:
                self.workers[pid] = conn
                conn = None  # type: ignore[assignment]  # kept until the worker ends
                return
            pid = _fork_unstoppable()
            if pid == 0:  # the worker: never returns to the server's loop
                try:
                    listener.close()
                    os.close(self.lock)
                    for other in self.workers.values():
                        other.close()
                    _work(conn, request, fds, self.ignored)
                finally:
                    os._exit(1)
            self.workers[pid] = conn
            conn = None  # type: ignore[assignment]  # kept until the worker ends
        except (OSError, ValueError):
            pass
        finally:
            for fd in fds:
                os.close(fd)
            if conn is not None:
                conn.close()

    def _fork_spare(self, listener: socket.socket) -> None:
        """Fork the worker of the next call now, between calls: the call then finds a process
        whose memory is already its own (no fork, fewer copy-on-write faults on its way)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = _fork_unstoppable()
        except OSError:
            ours.close()
            theirs.close()
            return
        if pid == 0:  # the spare: never returns to the server's loop
            try:
                ours.close()
                listener.close()
                os.close(self.lock)
                for other in self.workers.values():
                    other.close()
                _spare(theirs, self.ignored)
            finally:
                os._exit(1)
        theirs.close()
        self.spare = (pid, ours)

    def _hand_to_spare(self, conn: socket.socket, body: bytes, fds: list[int]) -> int:
        """Hand the call to the spare worker: its pid, or 0 when none took it (the call is
        then the server's to fork for)."""
        if self.spare is None:
            return 0
        pid, channel = self.spare
        self.spare = None
        message = len(body).to_bytes(8, "big") + body
        descriptors = struct.pack("4i", conn.fileno(), *fds)
        try:
            sent = channel.sendmsg([message], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, descriptors)])
            if sent < len(message):
                channel.sendall(message[sent:])
        except OSError:
            return 0  # a spare that died: reaped as it ends; a partial message runs nothing
        finally:
            channel.close()
        return pid

    def _drop_spare(self) -> None:
        """Let the spare worker go (it exits when its socket closes) and wait for it."""
        if self.spare is None:
            return
        pid, channel = self.spare
        self.spare = None
        channel.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    def _refusal(self, uid: int, request: rendezvous.Request | None) -> bytes:
        if uid != os.getuid():
            return b"another user"
        if request is None:
            return b"no request"
        if request.compatibility != self.compatibility:
            return b"another applyonce or Python"
        if _sources() != self.sources:
            # applyonce upgraded, or edited in a development checkout, under this server: the
            # client runs the new code itself, and the next call starts a fresh server.
            self.obsolete = True
            return b"another applyonce"
        if request.kind not in ENTRIES:
            return b"another command"
        if rendezvous.startup_environment(request.environ) != self.startup:
            return b"another start-up environment"
        if request.confinement != self.confinement:
            return b"another confinement"
        return b""


def _receive_body(conn: socket.socket, fds: list[int]) -> bytes | None:
    """The body of the request on ``conn`` (its length read); the descriptors sent with it go to
    ``fds`` as soon as they arrive, so that the caller closes them whatever happens next (a
    request that is not one, a client that stops sending): a client's stdout held here would
    keep its reader waiting."""
    size = socket.CMSG_SPACE(3 * 4)
    data, ancillary, _, _ = conn.recvmsg(65536, size)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
    if len(data) < 8 or len(fds) != 3:
        return None
    length = int.from_bytes(data[:8], "big")
    if length > _MAX_REQUEST:
        return None
    body = bytearray(data[8:])
    while len(body) < length:
        chunk = conn.recv(min(1 << 20, length - len(body)))
        if not chunk:
            return None
        body += chunk
    return bytes(body)


def _spare(channel: socket.socket, ignored: frozenset[int]) -> None:
    """Wait, forked ahead, for the call the server hands over ``channel`` (the client's
    connection and standard streams, then the request), then be its worker (never returns).
    The server gone, or a message cut short: exit, nothing ran."""
    for signum in _STOP_SIGNALS:  # blocked since the fork: drop any that came before the call
        signal.signal(signum, signal.SIG_IGN)
    gc.collect()  # touches the objects the call will: their pages copied now, not during it
    size = socket.CMSG_SPACE(4 * 4)
    data, ancillary, _, _ = channel.recvmsg(1 << 16, size, socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds.extend(struct.unpack(f"{usable // 4}i", payload[:usable]))
    if len(data) < 8 or len(fds) != 4:
        os._exit(1)
    length = int.from_bytes(data[:8], "big")
    body = bytearray(data[8:])
    while len(body) < length:
        chunk = channel.recv(min(1 << 20, length - len(body)))
        if not chunk:
            os._exit(1)
        body += chunk
    channel.close()
    conn = socket.socket(fileno=fds[0])
    _work(conn, rendezvous.Request(bytes(body)), fds[1:], ignored)


def _fork_unstoppable() -> int:
    """``os.fork()`` with the stop signals blocked across it: none lands between the fork and the
    child's own handlers (it would unwind the child through the server's clean-up). The server
    unblocks them again, a failed fork included; the child, once its handlers are set."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    return pid


def _work(
    conn: socket.socket, request: rendezvous.Request, fds: list[int], ignored: frozenset[int]
) -> None:
    """Be the client's process for one call, then exit as it would have (never returns). The
    signals the server ignored at its start, as the client does (a confinement both share), stay
    ignored."""
    code = 1
    try:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_IGN if signum in ignored else signal.SIG_DFL)
        interrupt = signal.SIGINT in ignored
        signal.signal(signal.SIGINT, signal.SIG_IGN if interrupt else signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        # Its own process group: a Ctrl-C at the server's terminal stops the server, not the
        # calls it runs (the caller's signals reach them through the client).
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        fds.clear()
        os.chdir(request.cwd)
        if rendezvous.identity(".") != request.cwd_identity:
            os._exit(1)  # not the client's folder (moved since, or seen from elsewhere)
        os.umask(request.umask)
        os.environ.clear()
        for key, value in request.environ.items():
            os.environb[key] = value
        sys.argv = request.argv
        _fresh_stdio()
        conn.sendall(b"P%d\n" % os.getpid())
    except BaseException:  # nothing ran: the client runs the call itself
        os._exit(1)
    code = _run_entry(ENTRIES[request.kind])
    with contextlib.suppress(OSError):
        conn.sendall(b"X%d\n" % (code & 0xFF))
    os._exit(code & 0xFF)


def _fresh_stdio() -> None:
    """Standard streams on the client's descriptors, set up as Python sets them up at start-up
    (line-buffered on a terminal; stderr always)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        buffered = open(fd, "rb" if fd == 0 else "wb", closefd=False)  # noqa: SIM115
        stream = __import__("io").TextIOWrapper(
            buffered,
            encoding=old.encoding,
            errors=old.errors,
            newline="\n",
            line_buffering=fd != 0 and (fd == 2 or os.isatty(fd)),
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_entry(module: str) -> int:
    """Run ``module.main()`` as the interpreter runs a script: its exit code, a traceback on an
    uncaught exception, the standard streams flushed and the atexit functions run."""
    import atexit
    import importlib
    import traceback

    code = 0
    try:
        importlib.import_module(module).main()
    except SystemExit as exit_:
        if exit_.code is None:
            code = 0
        elif isinstance(exit_.code, int):
            code = exit_.code
        else:
            print(exit_.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        _flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    # What the interpreter's exit does, in its order: join the threads that are not daemons,
    # then the atexit functions.
    threading = sys.modules.get("threading")
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        with contextlib.suppress(Exception):
            shutdown()
    atexit._run_exitfuncs()
    if not _flush() and code == 0:
        code = 120
    return code


def _flush() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            ok = False
    return ok
