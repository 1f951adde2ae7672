"""``applyonce mcp`` answers every malformed message on its stdio wire, and goes on serving.

The real server in its own process, fed raw bytes line by line, as a buggy or hostile client
would send them; each bad line must get its JSON-RPC error (with the request's id when it can be
read), nothing of it may be written, and the next valid request must still be answered.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from applyonce.adapters.mcp_wire import check_line
from tests.conftest import Repo

pytestmark = pytest.mark.sampled(every=2, by="module")

ADD = "*** Begin Patch\n*** Add File: wire.txt\n+{line}\n*** End Patch\n"


class Session:
    """A raw JSON-RPC session with ``applyonce mcp`` over pipes."""

    def __init__(self, repo: Repo, errlog: Path, *extra: str) -> None:
        self.err = errlog.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "applyonce", "mcp", "--repo", str(repo.path), *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env=dict(os.environ),
        )

    def send(self, raw: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(raw + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 20) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def request(self, raw: bytes, timeout: float = 20) -> dict[str, Any] | None:
        self.send(raw)
        return self.receive(timeout)

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = self.proc.wait(30)
        self.err.close()
        return code


def open_session(repo: Repo, errlog: Path, *extra: str) -> Iterator[Session]:
    live = Session(repo, errlog, *extra)
    try:
        hello = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        answer = live.request(json.dumps(hello).encode())
        assert answer is not None and answer["id"] == 0 and "result" in answer
        live.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield live
    finally:
        if live.proc.poll() is None:
            live.proc.kill()
            live.proc.wait()


@pytest.fixture
def session(repo: Repo, tmp_path: Path) -> Iterator[Session]:
    yield from open_session(repo, tmp_path / "server.err")


def call(request_id: int, patch: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "apply_patch", "arguments": {"patch": patch}},
    }


# Each bad line: its bytes, the error code, the id the answer must carry (None: null).
BAD_LINES: list[tuple[str, bytes, int, int | str | None]] = [
    (
        "lone-surrogate-in-patch",
        # Escaped in JSON text, otherwise a patch that would apply.
        json.dumps(call(11, ADD.format(line="\ud800"))).encode(),
        -32602,
        11,
    ),
    (
        "lone-surrogate-in-method",
        b'{"jsonrpc":"2.0","id":"s1","method":"tools/\\udfff"}',
        -32600,
        "s1",
    ),
    (
        "invalid-utf8-in-patch",
        # The SDK alone read this byte as U+FFFD and committed a file the client never sent.
        json.dumps(call(12, ADD.format(line="caf@"))).encode().replace(b"@", b"\xff"),
        -32700,
        12,
    ),
    ("truncated-json", json.dumps(call(13, ADD.format(line="x"))).encode()[:40], -32700, None),
    ("json-array", b'[{"jsonrpc":"2.0","id":14,"method":"tools/list"}]', -32600, None),
    ("json-number", b"42", -32600, None),
    ("json-string", b'"tools/list"', -32600, None),
    ("missing-method", b'{"jsonrpc":"2.0","id":15,"params":{}}', -32600, 15),
    ("method-not-a-string", b'{"jsonrpc":"2.0","id":16,"method":7}', -32600, 16),
    ("wrong-jsonrpc-version", b'{"jsonrpc":"1.0","id":17,"method":"tools/list"}', -32600, 17),
    (
        "params-a-string",
        b'{"jsonrpc":"2.0","id":18,"method":"tools/call","params":"x"}',
        -32602,
        18,
    ),
    (
        "params-an-array",
        b'{"jsonrpc":"2.0","id":19,"method":"tools/call","params":[1]}',
        -32602,
        19,
    ),
    ("id-a-fraction", b'{"jsonrpc":"2.0","id":2.5,"method":"tools/list"}', -32600, None),
    ("id-null", b'{"jsonrpc":"2.0","id":null,"method":"tools/list"}', -32600, None),
    ("id-an-object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, None),
    (
        "id-of-5000-digits",
        b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"tools/list"}',
        -32700,
        None,
    ),
]


def test_every_malformed_message_is_answered_and_the_session_goes_on(
    session: Session, repo: Repo
) -> None:
    head, files = repo.head(), repo.files()
    for name, raw, code, request_id in BAD_LINES:
        answer = session.request(raw)
        assert answer is not None, f"{name}: no answer"
        assert answer["jsonrpc"] == "2.0", name
        assert answer["id"] == request_id, name
        assert answer["error"]["code"] == code, (name, answer)
        assert "\n" not in answer["error"]["message"], name
    # Nothing of the bad lines was written: no commit, no file, no call recorded.
    assert repo.head() == head
    assert repo.files() == files
    assert repo.git("status", "--porcelain") == ""

    # A valid request with a huge (but readable) id is answered with that id.
    huge = 10**40
    listed = session.request(
        json.dumps({"jsonrpc": "2.0", "id": huge, "method": "tools/list"}).encode()
    )
    assert listed is not None and listed["id"] == huge and "result" in listed
    # And the next valid tools/call still lands, once.
    done = session.request(json.dumps(call(21, ADD.format(line="fine"))).encode())
    assert done is not None and done["id"] == 21
    assert done["result"]["isError"] is False
    assert done["result"]["structuredContent"]["status"] == "committed"
    assert (repo.path / "wire.txt").read_bytes() == b"fine\n"
    assert repo.commit_count() == 2
    assert session.close() == 0


def test_a_check_command_reads_no_protocol_from_standard_input(repo: Repo, tmp_path: Path) -> None:
    # While serving, fd 0 is the null device: a command that reads its standard input gets end
    # of file at once, never the client's next message.
    read = tmp_path / "read.bin"
    for live in open_session(
        repo, tmp_path / "server.err", "--check", f"cat > {read}", "--check-timeout", "20"
    ):
        done = live.request(json.dumps(call(1, ADD.format(line="x"))).encode(), timeout=30)
        assert done is not None and done["result"]["structuredContent"]["status"] == "committed"
        answer = live.request(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
        assert answer is not None and answer["id"] == 2
        assert live.close() == 0
    assert read.read_bytes() == b""


def test_blank_lines_are_skipped_unanswered(session: Session) -> None:
    session.send(b"")
    session.send(b"   ")
    answer = session.request(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
    assert answer is not None and answer["id"] == 1 and "result" in answer


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', None),
        (b'{"jsonrpc":"2.0","method":"notifications/initialized"}', None),
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', None),  # a response to the server: no answer
        (b'{"jsonrpc":"2.0","id":"a\\ud800","method":"tools/list"}', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":true,"method":"tools/list"}', (-32600, None)),
        (b'{"jsonrpc":"2.0","id":3,"method":"x","params":{"\\udc00":1}}', (-32602, 3)),
        (b'{"jsonrpc":"2.0","id":4,"method":"x"' + b"\xc3", (-32700, None)),
    ],
)
def test_check_line(raw: bytes, expected: tuple[int, int | None] | None) -> None:
    error = check_line(raw)
    assert (error if error is None else (error.code, error.id)) == expected


def piped_session(
    repo: Repo, lines: list[bytes], *extra: str
) -> tuple[int, list[dict[str, Any]], str]:
    """A client that writes all its lines, closes the server's standard input, then reads
    every answer (``cat requests | applyonce mcp``): the exit code, the answers, stderr."""
    hello = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "piped", "version": "1"},
        },
    }
    head = [json.dumps(hello).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}']
    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", "mcp", "--repo", str(repo.path), *extra],
        input=b"".join(line + b"\n" for line in head + lines),
        capture_output=True,
        env=dict(os.environ),
        timeout=60,
        check=False,
    )
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    return proc.returncode, answers, proc.stderr.decode()


def test_malformed_lines_at_the_end_of_the_input_are_all_answered(repo: Repo) -> None:
    # The answers to the last malformed lines were still queued when the input ended: the SDK
    # closed its side under them (12 answers of 21, then exit 3 with a traceback).
    for _ in range(3):
        code, answers, err = piped_session(
            repo, [json.dumps({"jsonrpc": "2.0", "id": n}).encode() for n in range(1, 21)]
        )
        assert (code, err) == (0, "")
        assert [answer["id"] for answer in answers] == list(range(21))
        assert all(answer["error"]["code"] == -32600 for answer in answers[1:])


def test_a_call_running_at_the_end_of_the_input_is_answered(repo: Repo) -> None:
    # The SDK cancels what still runs when its input ends; the call ran to its end all the
    # same (its commit landed) and its answer was lost. Its answer, and those of the requests
    # after it, are written before the session ends.
    requests = [
        json.dumps(call(1, ADD.format(line="piped"))).encode(),
        json.dumps({**call(2, ADD.format(line="piped")), "id": "2"}).encode(),
        b'{"jsonrpc":"2.0","id":3,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":4}',
    ]
    code, answers, err = piped_session(repo, requests, "--check", "sleep 1")
    assert (code, err) == (0, "")
    by_id = {answer["id"]: answer for answer in answers}
    assert sorted(by_id, key=str) == sorted([0, 1, "2", 3, 4], key=str)
    assert by_id[1]["result"]["structuredContent"]["status"] == "committed"
    assert by_id[1]["result"]["structuredContent"]["replayed"] is False
    assert by_id["2"]["result"]["structuredContent"]["replayed"] is True
    assert by_id[4]["error"]["code"] == -32600
    assert repo.commit_count() == 2


def test_a_call_the_client_cancelled_does_not_hold_the_session_open(repo: Repo) -> None:
    # A cancelled request is never answered (the protocol says so): the session still ends
    # at the end of the input, instead of waiting for an answer that will not come.
    requests = [
        json.dumps(call(1, ADD.format(line="cancelled"))).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"1"}}',
        b'{"jsonrpc":"2.0","id":2,"method":"ping"}',
    ]
    code, answers, err = piped_session(repo, requests, "--check", "sleep 1")
    assert (code, err) == (0, "")
    assert [answer["id"] for answer in answers] == [0, 2]
