"""``git format-patch`` mails through the real CLI, against the real ``git am``: the commit gets
the tree, the message (subject without ``[PATCH n/m]``, body, the mail's trailers) and the author
(name, address, date) that ``git am`` gives it, with applyonce's trailer block after; a series of
mails in one text is refused with a hint and writes nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import Repo, git, make_repo, run_cli

BASE = {"a.py": "a\nb\nc\n", "docs/x.md": "# x\n"}


def _authored(repo: Repo, author: str, date: str, message: str, files: dict[str, str]) -> None:
    for path, content in files.items():
        (repo.path / path).parent.mkdir(parents=True, exist_ok=True)
        (repo.path / path).write_text(content)
    repo.git("add", "-A")
    repo.git("commit", "-q", f"--author={author}", f"--date={date}", "-m", message)


def _mails(tmp_path: Path, count: int, *format_args: str) -> tuple[Repo, list[str]]:
    """A repo at its base and ``count`` mails of the commits made on it (then undone)."""
    repo = make_repo(tmp_path / "repo", BASE)
    _authored(
        repo,
        "Zoë Ünïcode <zoe@example.org>",
        "2024-05-06T07:08:09+0200",
        "Fix b in a very long subject line that format-patch will surely fold over two lines\n\n"
        "Why: b was wrong.\n\nSigned-off-by: Zoë Ünïcode <zoe@example.org>",
        {"a.py": "a\nB\nc\n"},
    )
    _authored(
        repo,
        "Bo <bo@example.net>",
        "2023-01-02T03:04:05-0700",
        "Add notes",
        {"docs/notes.md": "notes\n"},
    )
    _authored(
        repo,
        "Cy <cy@example.com>",
        "2022-12-31T23:59:59+0000",
        "Re: [RFC] tidy x\n\nBody.",
        {"docs/x.md": "# X\n"},
    )
    out = tmp_path / "out"
    repo.git("format-patch", "-q", f"-{count}", "-o", str(out), *format_args)
    repo.git("reset", "-q", "--hard", f"HEAD~{count}")
    return repo, [p.read_text() for p in sorted(out.iterdir())]


def _am(where: Path, mail: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(where), "am", "-q"], input=mail, text=True, check=True)


def _without_applyonce(message: str) -> str:
    own = ("Call-Id:", "Contract-Sha256:", "Attempt:", "Tool:", "Tool-Version:", "Args-Sha256:")
    kept = "\n".join(line for line in message.split("\n") if not line.startswith(own))
    return kept.rstrip("\n")


AUTHOR = "%an%n%ae%n%ad"


@pytest.mark.parametrize(
    "extra", [(), ("--from=Sender Person <sender@example.com>",)], ids=["plain", "in-body-from"]
)
def test_each_mail_commits_as_git_am_commits_it(tmp_path: Path, extra: tuple[str, ...]) -> None:
    repo, mails = _mails(tmp_path, 3, "--numbered", *extra)
    theirs = tmp_path / "theirs"
    shutil.copytree(repo.path, theirs)
    for mail in mails:
        result = run_cli("apply", "-", "--repo", str(repo.path), input=mail)
        assert result.returncode == 0, result.stderr
        _am(theirs, mail)
        assert repo.git("rev-parse", "HEAD^{tree}") == git(theirs, "rev-parse", "HEAD^{tree}")
        ours = repo.git("log", "-1", "--format=%B")
        assert _without_applyonce(ours) == git(theirs, "log", "-1", "--format=%B").rstrip("\n")
        assert repo.git("log", "-1", f"--format={AUTHOR}", "--date=raw") == git(
            theirs, "log", "-1", f"--format={AUTHOR}", "--date=raw"
        )
        # applyonce's trailers are the last paragraph, with the mail's own trailers.
        trailers = repo.git("log", "-1", "--format=%(trailers:only,unfold)")
        assert "Call-Id: " in trailers
    assert len(repo.call_ids()) == 3
    subjects = repo.git("log", "-3", "--format=%s").splitlines()
    assert subjects == [
        "tidy x",
        "Add notes",
        "Fix b in a very long subject line that format-patch will surely fold over two lines",
    ]
    assert "Signed-off-by: Zoë Ünïcode <zoe@example.org>" in repo.git(
        "log", "-1", "HEAD~2", "--format=%(trailers:key=Signed-off-by)"
    )


def test_a_mail_applied_again_is_the_same_call(tmp_path: Path) -> None:
    repo, [mail] = _mails(tmp_path, 1)
    first = run_cli("apply", "-", "--repo", str(repo.path), input=mail)
    again = run_cli("apply", "-", "--repo", str(repo.path), input=mail)
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert len(repo.call_ids()) == 1


def test_the_callers_message_wins_over_the_mails(tmp_path: Path) -> None:
    repo, [mail] = _mails(tmp_path, 1)
    result = run_cli("apply", "-", "--repo", str(repo.path), "--message", "Mine", input=mail)
    assert result.returncode == 0, result.stderr
    assert repo.git("log", "-1", "--format=%s%n%an") == "Mine\nCy\n"


def test_a_series_in_one_text_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    repo, mails = _mails(tmp_path, 3)
    head, files = repo.head(), repo.files()
    result = run_cli("apply", "-", "--repo", str(repo.path), input="\n".join(mails))
    assert result.returncode == 1, result
    assert result.stderr == (
        "error: the text holds a series of 3 mails; one call applies one mail, as one commit; "
        "send each mail as its own call, in order (git format-patch writes one file per patch: "
        'for p in *.patch; do applyonce apply "$p" || break; done)\n'
    )
    assert repo.head() == head and repo.files() == files
    assert repo.git("status", "--porcelain") == ""
    assert not repo.state_dir().exists()
