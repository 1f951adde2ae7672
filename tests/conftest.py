"""Shared fixtures: hermetic Git, real repositories in tmp_path, the real CLI in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from tests.pgserver import PostgresServer

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_TERMINAL_PROMPT": "0",
}


# Sampling the slow real-process suites (the ``sampled`` marker, pyproject.toml). With
# APPLYONCE_TEST_SAMPLE=SEED set (.ci/run sets it), a test marked ``sampled(every=N, by=PARAM)`` runs
# one case in N: within each group of its cases that share PARAM's value (each state of the
# situations matrix, say), the cases whose place plus SEED plus the group's place is a multiple
# of N, and at least one case a group. ``by="module"`` (a module's ``pytestmark``): the tests of
# the module, every case of each, are one group, so that each seed runs one test in N of it and N
# seeds in a row run all of it; a test marked on its own keeps its own mark. Another SEED runs
# other cases; every case is reported as deselected, never dropped silently. Without the variable
# (the README's command, benchmarks/sampled_whole.py) every case runs.
SAMPLE_ENV = "APPLYONCE_TEST_SAMPLE"


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = os.environ.get(SAMPLE_ENV)
    if not seed:
        return None
    return (
        f"sampled: {SAMPLE_ENV}={seed} runs one case in N of each test marked sampled(every=N); "
        "unset it to run them whole"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seed_text = os.environ.get(SAMPLE_ENV)
    if not seed_text:
        return
    try:
        seed = int(seed_text)
    except ValueError:
        raise pytest.UsageError(f"{SAMPLE_ENV}={seed_text!r} is not an integer seed") from None
    groups: dict[tuple[str, str], list[pytest.Item]] = {}
    every: dict[tuple[str, str], int] = {}
    for item in items:
        mark = item.get_closest_marker("sampled")
        if mark is None:
            continue
        by = mark.kwargs.get("by")
        params = getattr(item, "callspec", None)
        if by == "module":
            key = (item.nodeid.split("::", 1)[0], "")
        else:
            value = str(params.params.get(by)) if by and params is not None else ""
            key = (item.nodeid.split("[", 1)[0], value)
        groups.setdefault(key, []).append(item)
        every[key] = int(mark.kwargs["every"])
    dropped: set[str] = set()
    places: dict[str, int] = {}
    for (function, value), members in groups.items():
        place = places[function] = places.get(function, -1) + 1
        n = every[(function, value)]
        kept = [j for j in range(len(members)) if (j + seed + place) % n == 0]
        if not kept:
            kept = [(seed + place) % len(members)]
        dropped.update(m.nodeid for j, m in enumerate(members) if j not in kept)
    if dropped:
        deselected = [item for item in items if item.nodeid in dropped]
        items[:] = [item for item in items if item.nodeid not in dropped]
        config.hook.pytest_deselected(items=deselected)


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user or system git config leaks into a test, and no fault is armed by accident."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("APPLYONCE_FAULT", raising=False)


def git(repo: Path, *args: str, check: bool = True) -> str:
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result.stderr}")
    return result.stdout


def write_files(root: Path, files: Mapping[str, bytes | str]) -> None:
    for path, content in files.items():
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(content.encode() if isinstance(content, str) else content)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except ``.git``, with its bytes."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@dataclass
class Repo:
    path: Path

    def git(self, *args: str, check: bool = True) -> str:
        return git(self.path, *args, check=check)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def commit_count(self) -> int:
        return int(self.git("rev-list", "--count", "HEAD").strip())

    def call_ids(self) -> list[str]:
        out = self.git("log", "--format=%(trailers:key=Call-Id,valueonly)")
        return [line.strip() for line in out.splitlines() if line.strip()]

    def state_dir(self) -> Path:
        return self.path / ".git" / "applyonce"

    def files(self) -> dict[str, bytes]:
        return snapshot(self.path)


def make_repo(
    root: Path, files: Mapping[str, bytes | str] | None = None, *, bare: bool = False
) -> Repo:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main", *(["--bare"] if bare else []))
    git(root, "config", "core.autocrlf", "false")
    if files is not None and not bare:
        write_files(root, files)
        git(root, "add", "-A")
        git(root, "commit", "-q", "--allow-empty", "-m", "base")
    return Repo(root)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(
        tmp_path / "repo",
        {
            "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
            "src/util.py": "VALUE = 1\n",
            "README.md": "# demo\n",
        },
    )


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str


def git_trailers(message: str) -> list[tuple[str, str]]:
    """The trailers of a commit message as git's own parser (``git interpret-trailers --parse``)
    reads them: (key, value) each, in order."""
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"],
        input=message,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [
        (key, value) for key, _, value in (line.partition(": ") for line in parsed.splitlines())
    ]


def run_cli(
    *args: str,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> Run:
    """The real ``applyonce`` in its own process."""
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", *args],
        input=data,
        capture_output=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode())


@pytest.fixture
def cli() -> Iterator[object]:
    yield run_cli


def stored_json(stdout: str) -> str:
    """``apply --json`` output without the ``"replayed"`` field that follows the receipt's: the
    receipt's fields as stored, so a call and its repeat compare byte for byte (a repeat's
    ``"replay_note"`` taken out too)."""
    stdout = re.sub(r'\n  "replay_note": "(?:[^"\\]|\\.)*",', "", stdout)
    return re.sub(r',\n  "replayed": (?:true|false)\n}\n$', "\n}\n", stdout)


def apply(repo: Repo, patch: str, *args: str, env: dict[str, str] | None = None) -> Run:
    """``applyonce apply - --repo REPO ARGS…`` with ``patch`` on stdin, in its own process."""
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch, env=env)


# The patches the feature tests share (tests/e2e, flow, git, state, adapters), all against the ``repo``
# fixture; each file imports the one it calls ``PATCH`` (and ``ADD``).
UTIL_PATCH = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
)
APP_PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
*** Add File: tests/test_app.py
+from src.app import greet
+assert greet('x') == 'hello x!'
*** End Patch
"""
NEW_FILE_PATCH = "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch\n"


def without_line_numbers(dump: dict[str, Any]) -> dict[str, Any]:
    """A patch dump without its unified hunks' line numbers: what a Codex patch of the same
    change dumps."""
    for op in dump["operations"]:
        for hunk in op.get("hunks", ()):
            hunk.pop("old_start", None)
            hunk.pop("new_start", None)
    return dump


# --- PostgreSQL (tests/pgserver.py) ------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server of this xdist worker's own (tests/pgserver.py), which tests may
    restart or kill (each leaves it running); skipped where PostgreSQL is not installed, unless
    ``APPLYONCE_REQUIRE_POSTGRES=1`` (CI), where that fails instead."""
    from tests.pgserver import PostgresServer, find_binaries

    if find_binaries() is None:
        if os.environ.get("APPLYONCE_REQUIRE_POSTGRES") == "1":
            pytest.fail("APPLYONCE_REQUIRE_POSTGRES=1 but PostgreSQL is not installed")
        pytest.skip("PostgreSQL is not installed (set APPLYONCE_TEST_POSTGRES to use a server)")
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="session")
def postgres(request: pytest.FixtureRequest) -> str:
    """A PostgreSQL superuser URL: ``APPLYONCE_TEST_POSTGRES`` when set (CI starts one server),
    else :func:`pg_server`'s."""
    return os.environ.get("APPLYONCE_TEST_POSTGRES") or request.getfixturevalue("pg_server").url()


@pytest.fixture
def pg_url(postgres: str) -> str:
    """A fresh database of its own for this test."""
    from tests.pgserver import create_database

    return create_database(postgres)


# --- a real Git server (tests/gitserver.py): one git daemon per session, a bare repo per test ---


@pytest.fixture(scope="session")
def git_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The git daemon of ``APPLYONCE_TEST_GIT_DAEMON``, else one started here; skipped where
    git has no daemon (failed instead with ``APPLYONCE_REQUIRE_GIT_DAEMON=1``)."""
    from tests.gitserver import ENV, GitDaemon, daemon_available

    given = os.environ.get(ENV)
    if given:
        yield GitDaemon.from_env(given)
        return
    if not daemon_available():
        if os.environ.get("APPLYONCE_REQUIRE_GIT_DAEMON") == "1":
            pytest.fail("git daemon is not available (APPLYONCE_REQUIRE_GIT_DAEMON=1)")
        pytest.skip("git daemon is not available")
    daemon = GitDaemon(tmp_path_factory.mktemp("gitd"))
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="session")
def git_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The smart-HTTP Git server (nginx + fcgiwrap + ``git http-backend``, basic authentication;
    tests/httpserver.py) of ``APPLYONCE_TEST_GIT_HTTP``, else one started here; skipped where
    nginx or fcgiwrap is not installed (failed instead with ``APPLYONCE_REQUIRE_GIT_HTTP=1``).
    Its ``make_bare()`` makes a bare repository under the project root and returns its URL, the
    credentials in it."""
    from tests.httpserver import ENV, HttpServer, http_available

    given = os.environ.get(ENV)
    if given:
        yield HttpServer.from_env(given)
        return
    if not http_available():
        if os.environ.get("APPLYONCE_REQUIRE_GIT_HTTP") == "1":
            pytest.fail(
                "nginx, fcgiwrap or git http-backend is missing (APPLYONCE_REQUIRE_GIT_HTTP=1)"
            )
        pytest.skip("nginx, fcgiwrap or git http-backend is not installed")
    server = HttpServer(tmp_path_factory.mktemp("githttp"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["daemon", "http"])
def git_server(request: pytest.FixtureRequest) -> Any:
    """Each real Git server in turn: ``git daemon`` (git://), then smart HTTP behind nginx
    (http://, basic authentication). Both offer ``make_bare``, ``path_of``, ``clone`` and ``url``."""
    return request.getfixturevalue("git_daemon" if request.param == "daemon" else "git_http")


@dataclass
class Served:
    """A fresh bare repository on a Git server (one commit on ``main``) and a clone of it."""

    daemon: Any
    url: str
    server: Path  # the bare repository on disk
    clone: Repo

    def another_clone(self, into: Path) -> Repo:
        return Repo(self.daemon.clone(self.url, into))

    def server_git(self, *args: str) -> str:
        return git(self.server, *args)

    @property
    def public_url(self) -> str:
        """The URL without credentials: what receipts and messages show."""
        from applyonce.core.receipt import public_url

        return public_url(self.url)


@pytest.fixture
def served(git_daemon: Any, tmp_path: Path) -> Served:
    return serve_on(git_daemon, tmp_path)


def serve_on(server: Any, tmp_path: Path) -> Served:
    """A fresh bare repository on ``server`` (a git daemon or the smart-HTTP server), its branch
    ``main`` holding one commit, and a clone of it."""
    git_daemon = server
    url = git_daemon.make_bare()
    seed = make_repo(
        tmp_path / "seed",
        {
            "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
            "src/util.py": "VALUE = 1\n",
            "README.md": "# demo\n",
        },
    )
    seed.git("push", "-q", url, "main:refs/heads/main")
    clone = Repo(git_daemon.clone(url, tmp_path / "clone"))
    return Served(git_daemon, url, git_daemon.path_of(url), clone)


REPLAY_HEAD = "replayed: this call ("
STORED_MARK = "its stored result:\n"


def stored_text(text: str) -> str:
    """A replay's text without the note it starts with (``replayed: …`` up to ``its stored
    result:``): the stored output. Asserts the note is there."""
    head, sep, rest = text.partition(STORED_MARK)
    assert sep and head.startswith(REPLAY_HEAD), text
    return rest


def without_replay_notes(value: Any) -> Any:
    """``value`` (tool results: dicts, lists, strings) with every replay note taken out of the
    texts that start with one, to compare a replay's result with the first one's."""
    if isinstance(value, str):
        return stored_text(value) if value.startswith(REPLAY_HEAD) else value
    if isinstance(value, list):
        return [without_replay_notes(v) for v in value]
    if isinstance(value, dict):
        return {k: without_replay_notes(v) for k, v in value.items()}
    return value
