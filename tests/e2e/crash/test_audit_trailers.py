"""Audit reads trailers as git does: every commit ``git log --format='%(trailers:key=Call-Id)'``
shows with a Call-Id is one audit checks, with the same Call-Id values (a differential against
the real git over crafted and generated commit messages)."""

from __future__ import annotations

import random
import subprocess

import orjson

from tests.conftest import Repo, run_cli

CALL = "c" * 64
# Lines a message is made of: trailers in odd spellings and places, dividers, comments,
# continuation lines, scissors, git-generated lines, CR.
PIECES = [
    "Call-Id: {id}",
    "call-id: {id}",
    "CALL-ID:{id}",
    "Call-Id : {id}",
    "Call-Id\t: {id}",
    " Call-Id: {id}",
    "Call-Id: {id}\r",
    "Call-Id: {id} trailing",
    "#Call-Id: {id}",
    "Call_Id: {id}",
    "Call-Id:",
    "Tool: apply_patch",
    "Args-Sha256: 00",
    "Fixes: 123",
    "Key with space: v",
    "Signed-off-by: A <a@b.invalid>",
    "(cherry picked from commit abc)",
    "---",
    "--- a/x",
    "-----",
    "# comment",
    "",
    " ",
    "\t",
    "\r",
    "  continued",
    "\tmore",
    "plain text line",
    "Bug #43",
    "Conflicts:",
    "\tpath.c",
    "# ------------------------ >8 ------------------------",
    "a: b",
    ":x",
    "http://x.invalid/z",
    "\x0bvt",
    "\x0cff",
]


def _message(rng: random.Random) -> bytes:
    lines = [f"subject {rng.randint(0, 99)}"] if rng.random() < 0.9 else []
    for _ in range(rng.randint(0, 12)):
        lines.append(rng.choice(PIECES).format(id=f"{rng.getrandbits(256):064x}"))
    text = ("\r\n" if rng.random() < 0.1 else "\n").join(lines) + (
        "\n" if rng.random() < 0.7 else ""
    )
    return ("\n" * rng.randint(1, 2) if rng.random() < 0.2 else "").encode() + text.encode()


def _import(repo: Repo, messages: list[bytes]) -> None:
    """One commit per message, byte for byte, with the real ``git fast-import``."""
    stream = bytearray()
    parent = repo.head()
    for i, message in enumerate(messages, start=1):
        stream += b"commit refs/heads/main\nmark :%d\n" % i
        stream += b"committer A <a@b.invalid> 1700000000 +0000\ndata %d\n%s\n" % (
            len(message),
            message,
        )
        stream += b"from :%d\n\n" % (i - 1) if i > 1 else b"from %s\n\n" % parent.encode()
    subprocess.run(
        ["git", "-C", str(repo.path), "fast-import", "--quiet"], input=bytes(stream), check=True
    )


def _git_call_ids(repo: Repo) -> set[tuple[str, str]]:
    """``(commit, Call-Id)`` for each Call-Id trailer git shows (empty values name nothing)."""
    out = repo.git(
        "log", "--format=%H%x00%(trailers:key=Call-Id,unfold,separator=%x01)%x00", "main"
    )
    parts = out.split("\x00")
    found = set()
    for commit, block in zip(parts[0::2], parts[1::2], strict=False):
        for trailer in filter(None, block.split("\x01")):
            if value := trailer.split(":", 1)[1].strip(" \t\r\n"):
                found.add((commit.strip(), value))
    return found


def _audited(repo: Repo) -> tuple[int, set[tuple[str, str]]]:
    """How many Call-Id commits audit read, and the ``(commit, Call-Id)`` it reported."""
    result = run_cli("audit", "--repo", str(repo.path), "--json")
    report = orjson.loads(result.stdout)
    return report["commits"], {
        (p["commit"], p["call_id"]) for p in report["problems"] if p["commit"]
    }


def test_a_call_id_after_a_divider_line_is_audited(repo: Repo) -> None:
    message = f"fix things\n\nSome text\n---\nmore text\n\nCall-Id: {CALL}\nTool: apply_patch\n"
    (repo.path / "msg").write_text(message)
    repo.git("commit", "-q", "--allow-empty", "-F", str(repo.path / "msg"))
    assert repo.call_ids() == [CALL]  # git shows it
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 1
    assert f"no-receipt   {CALL[:12]}  commit {repo.head()[:12]} has no receipt" in result.stdout


def test_audit_checks_the_commits_git_shows_with_a_call_id(repo: Repo) -> None:
    crafted = [
        f"a\n\nb\n---\n\nCall-Id: {'1' * 64}\n",  # after a divider, in its own paragraph
        f"a\n\n--- x\nCall-Id: {'2' * 64}\n",  # in the same paragraph as the divider
        f"a\n\ncall-id:   {'3' * 64}  \n# a comment\n\n",  # key case, padding, trailing comment
        f"a\n\nCall-Id: {'4' * 64}\n  continued\nTool: x\n",  # a continued value
        f"a\n\ntext\nSigned-off-by: A <a@b.invalid>\nCall-Id: {'5' * 64}\nmore\nmore\n",  # 25% rule
        f"a\n\ntext\nCall-Id: {'6' * 64}\n",  # not a trailer block: git shows nothing
        f"a\n\nCall-Id: {'7' * 64}\n# ------------------------ >8 ------------------------\nx\n",
        f"Call-Id: {'8' * 64}\n",  # the title is never a trailer
        f"a\n\nCall-Id: {'9' * 64}\n; a comment if core.commentChar is ;\n",
    ]
    for number, message in enumerate(crafted):
        path = repo.path / f"msg{number}"
        path.write_text(message)
        # --cleanup=verbatim: git commit keeps the message as written (comments, CR, blanks).
        repo.git("commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F", str(path))
    rng = random.Random(20261203)
    _import(repo, [_message(rng) for _ in range(300)])
    expected = _git_call_ids(repo)
    assert len(expected) > 20  # the generator does make Call-Id trailers git shows
    commits, audited = _audited(repo)
    assert audited == expected
    assert commits == len({commit for commit, _ in expected})
    # git skips the lines that start with core.commentChar: so does audit.
    repo.git("config", "core.commentChar", ";")
    expected = _git_call_ids(repo)
    assert any(call == "9" * 64 for _, call in expected)
    assert _audited(repo)[1] == expected
