"""Signed calls (docs/design.md §2, §4): the commit is signed as ``git commit -S`` signs it, with
the real gpg, gpgsm and ssh-keygen; ``git verify-commit`` passes; the receipt says how it was
signed; a signing failure is a clean rejection."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from tests.conftest import UTIL_PATCH, Repo, apply, run_cli
from tests.e2e.signing.conftest import KeysOf
from tests.support.signing import FORMATS, verify

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

OTHER_PATCH = "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch\n"


def _objects(repo: Repo) -> set[str]:
    out = repo.git("cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(out.split())


@pytest.mark.parametrize("fmt", FORMATS)
def test_commit_gpgsign_signs_the_call_and_git_verifies_it(
    repo: Repo, keys_of: KeysOf, fmt: str
) -> None:
    keys = keys_of(fmt)
    keys.configure(repo)
    result = apply(repo, UTIL_PATCH, "--json")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    checked = verify(repo)
    assert checked.returncode == 0, checked.stderr
    assert receipt["signature"] == {"format": fmt, "key": keys.key}
    assert receipt["commit"] == repo.head()
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    # What git itself writes: the same header, so git log --show-signature reads it too.
    assert "gpgsig " in repo.git("cat-file", "commit", "HEAD")
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def test_sign_and_no_sign_override_the_config(repo: Repo, keys_of: KeysOf) -> None:
    keys = keys_of("ssh")
    keys.configure(repo, always=False)
    signed = apply(repo, UTIL_PATCH, "--sign", "--json")
    assert signed.returncode == 0, signed.stderr
    assert verify(repo).returncode == 0
    assert orjson.loads(signed.stdout)["signature"]["format"] == "ssh"
    repo.git("config", "commit.gpgSign", "true")
    unsigned = apply(repo, OTHER_PATCH, "--no-sign", "--json")
    assert unsigned.returncode == 0, unsigned.stderr
    assert verify(repo).returncode != 0
    assert "gpgsig" not in repo.git("cat-file", "commit", "HEAD")
    assert "signature" not in orjson.loads(unsigned.stdout)  # as every unsigned receipt reads


def test_an_unsigned_call_writes_the_receipt_it_always_wrote(repo: Repo) -> None:
    result = apply(repo, UTIL_PATCH, "--json")
    assert result.returncode == 0
    assert "signature" not in orjson.loads(result.stdout)


def test_a_replay_returns_the_signed_commit_and_signs_nothing(repo: Repo, keys_of: KeysOf) -> None:
    keys = keys_of("openpgp")
    keys.configure(repo)
    first = apply(repo, UTIL_PATCH, "--json")
    assert first.returncode == 0, first.stderr
    head = repo.head()
    # The key is gone: a repeat that signed anything would fail.
    repo.git("config", "user.signingKey", "0000000000000000DEADBEEF")
    again = apply(repo, UTIL_PATCH, "--json")
    assert again.returncode == 0, again.stderr
    assert repo.head() == head
    assert orjson.loads(again.stdout)["signature"] == orjson.loads(first.stdout)["signature"]


@pytest.mark.parametrize(
    ("fmt", "key", "says"),
    [
        (
            "openpgp",
            "0000000000000000DEADBEEF",
            "openpgp signing with key '0000000000000000DEADBEEF'",
        ),
        ("ssh", "/nonexistent/id.pub", "ssh signing with key '/nonexistent/id.pub' failed"),
        ("x509", "0000000000000000DEADBEEF", "x509 signing with key '0000000000000000DEADBEEF'"),
    ],
)
def test_a_signing_failure_is_a_clean_retryable_rejection(
    repo: Repo, keys_of: KeysOf, fmt: str, key: str, says: str
) -> None:
    keys = keys_of(fmt)
    keys.configure(repo)
    repo.git("config", "user.signingKey", key)
    base, objects, files = repo.head(), _objects(repo), repo.files()
    result = apply(repo, UTIL_PATCH)
    assert result.returncode == 4
    # A rejection's one line (what happened; what to do), where the CLI prints rejections.
    assert result.stderr.startswith(f"error: {says}")
    assert result.stderr.count("\n") == 1
    assert "--no-sign" in result.stderr and "user.signingKey" in result.stderr
    assert "Traceback" not in result.stderr
    # Nothing published, nothing written to Git, the checkout untouched.
    assert repo.head() == base
    assert _objects(repo) == objects
    assert repo.files() == files
    assert repo.git("status", "--porcelain") == ""
    stored = orjson.loads(apply(repo, UTIL_PATCH, "--json").stdout)
    assert stored["status"] == "rejected"
    assert stored["error"]["kind"] == "signing-failed"
    assert stored["error"]["retryable"] is True
    # Retryable: the same call runs again once the key is fixed (here: no signing).
    fixed = apply(repo, UTIL_PATCH, "--no-sign", "--json")
    assert fixed.returncode == 0, fixed.stderr
    assert orjson.loads(fixed.stdout)["call_id"] == stored["call_id"]
    assert repo.commit_count() == 2


def test_a_missing_signing_program_is_named(repo: Repo) -> None:
    repo.git("config", "commit.gpgSign", "true")
    repo.git("config", "gpg.program", "/nonexistent/gpg")
    result = apply(repo, UTIL_PATCH, "--json")
    assert result.returncode == 4
    error = orjson.loads(result.stdout)["error"]
    assert error["kind"] == "signing-failed"
    assert error["message"] == "the signing program '/nonexistent/gpg' was not found"


def test_ssh_without_a_key_says_which_config_to_set(repo: Repo) -> None:
    repo.git("config", "gpg.format", "ssh")
    result = apply(repo, UTIL_PATCH, "--sign")
    assert result.returncode == 4
    assert result.stderr.startswith(
        "error: ssh signing needs a key, and neither user.signingKey nor "
        "gpg.ssh.defaultKeyCommand is set; set one with 'git config user.signingKey"
    )


@pytest.mark.parametrize("config", ["gpg.format=pgp", "commit.gpgSign=maybe"])
def test_a_bad_signing_config_is_a_usage_error_and_writes_nothing(repo: Repo, config: str) -> None:
    name, value = config.split("=")
    repo.git("config", name, value)
    if name == "gpg.format":
        repo.git("config", "commit.gpgSign", "true")
    result = apply(repo, UTIL_PATCH)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: git config {name} is {value!r}")
    assert result.stderr.count("\n") == 1
    assert not repo.state_dir().exists()


def test_the_configured_programs_are_the_ones_run(
    repo: Repo, keys_of: KeysOf, tmp_path: Path
) -> None:
    """gpg.program and gpg.ssh.program, as git runs them (a wrapper that leaves a mark)."""
    marks = tmp_path / "marks"
    for fmt, real in (("openpgp", "gpg"), ("ssh", "ssh-keygen")):
        wrapper = tmp_path / f"my-{real}"
        wrapper.write_text(f'#!/bin/sh\necho {real} >> "{marks}"\nexec {real} "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        keys = keys_of(fmt)
        keys.configure(repo)
        repo.git("config", "gpg.program" if fmt == "openpgp" else "gpg.ssh.program", str(wrapper))
        patch = UTIL_PATCH if fmt == "openpgp" else OTHER_PATCH
        result = apply(repo, patch)
        assert result.returncode == 0, result.stdout
        assert marks.read_text().split()[-1] == real  # applyonce ran the wrapper
        assert verify(repo).returncode == 0  # (git runs it too)
        repo.git("config", "--unset", "gpg.format", check=False)


@pytest.fixture
def ssh_agent(tmp_path: Path) -> object:
    """A real ssh-agent of this test (its pid ended after it), holding the ssh key."""
    import subprocess

    sock = Path("/tmp") / f"ao-agent-{os.getpid()}-{id(tmp_path)}"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            import time

            time.sleep(0.05)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        sock.unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["literal", "default-key-command"])
def test_a_literal_ssh_key_signs_through_the_agent(
    repo: Repo, keys_of: KeysOf, ssh_agent: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    import subprocess

    keys = keys_of("ssh")
    keys.configure(repo)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(ssh_agent))
    private = keys.home / "id_ed25519"
    subprocess.run(["ssh-add", "-q", str(private)], check=True, capture_output=True)
    public = private.with_suffix(".pub").read_text().strip()
    private.unlink()  # only the agent can sign now
    if how == "literal":
        repo.git("config", "user.signingKey", f"key::{public}")
    else:
        repo.git("config", "--unset", "user.signingKey")
        repo.git("config", "gpg.ssh.defaultKeyCommand", "ssh-add -L")
    result = apply(repo, UTIL_PATCH, "--json")
    assert result.returncode == 0, result.stdout
    assert verify(repo).returncode == 0
    assert orjson.loads(result.stdout)["signature"] == {"format": "ssh", "key": keys.key}


def test_a_revert_is_signed_too(repo: Repo, keys_of: KeysOf) -> None:
    keys = keys_of("ssh")
    keys.configure(repo, always=False)
    applied = orjson.loads(apply(repo, UTIL_PATCH, "--json").stdout)
    reverted = run_cli("revert", applied["call_id"], "--repo", str(repo.path), "--sign", "--json")
    assert reverted.returncode == 0, reverted.stdout
    assert verify(repo).returncode == 0
    assert orjson.loads(reverted.stdout)["signature"]["format"] == "ssh"


def test_openpgp_without_user_signingkey_signs_as_the_committer(
    repo: Repo, keys_of: KeysOf
) -> None:
    """As git: gpg -u 'Name <mail>' of the committer (the key's user ID here)."""
    keys = keys_of("openpgp")
    keys.configure(repo)
    repo.git("config", "--unset", "user.signingKey")
    result = apply(repo, UTIL_PATCH, "--json")
    assert result.returncode == 0, result.stdout
    assert verify(repo).returncode == 0
    assert orjson.loads(result.stdout)["signature"] == {"format": "openpgp", "key": keys.key}


def test_the_mcp_server_signs_with_its_option_and_reports_a_failure_as_a_tool_error(
    repo: Repo, keys_of: KeysOf, tmp_path: Path
) -> None:
    from mcp import ClientSession

    from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

    keys = keys_of("ssh")
    keys.configure(repo, always=False)
    good = keys.config["user.signingKey"]
    repo.git("config", "user.signingKey", "/nonexistent/id.pub")
    seen: dict[str, object] = {}

    async def scenario(session: ClientSession) -> None:
        seen["failed"] = await session.call_tool("apply_patch", {"patch": PATCH})
        repo.git("config", "user.signingKey", good)
        seen["fixed"] = await session.call_tool("apply_patch", {"patch": PATCH})

    with_session(repo, tmp_path / "server.err", scenario, "--sign")
    failed, fixed = seen["failed"], seen["fixed"]
    assert failed.is_error is True  # type: ignore[attr-defined]
    assert text_of(failed).startswith("error: ssh signing with key '/nonexistent/id.pub' failed")  # type: ignore[arg-type]
    error = failed.structured_content["error"]  # type: ignore[attr-defined]
    assert error["kind"] == "signing-failed"
    # The same call, once the key is fixed, runs again (retryable) and lands signed.
    assert fixed.is_error is False and text_of(fixed) == SUCCESS  # type: ignore[attr-defined,arg-type]
    assert verify(repo).returncode == 0
    assert repo.commit_count() == 2


def test_a_group_signs_each_of_its_commits(repo: Repo, keys_of: KeysOf) -> None:
    """Calls published as a group (docs/design.md §1, "Groups"): each commit of the chain is
    signed, each receipt says so, and git verifies every one."""
    from applyonce import Executor
    from applyonce.flow.call.group import Request, apply_many
    from applyonce.flow.options import CallOptions

    keys = keys_of("ssh")
    keys.configure(repo)
    patches = [f"*** Begin Patch\n*** Add File: g{i}.txt\n+{i}\n*** End Patch\n" for i in range(3)]
    with Executor(repo.path) as executor:
        results = apply_many(executor.context, [Request(p, CallOptions()) for p in patches])
    receipts = [r.receipt for r in results if not isinstance(r, Exception)]
    assert [r.status for r in receipts] == ["committed"] * 3
    for receipt in receipts:
        assert receipt.signature is not None and receipt.signature.format == "ssh"
        assert receipt.commit is not None
        assert verify(repo, receipt.commit).returncode == 0
    assert len(repo.git("reflog", "show", "refs/heads/main").splitlines()) == 2
