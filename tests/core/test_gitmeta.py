"""applyonce reads a .gitmodules as git's own config parser does (``git config --list``)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from applyonce.core.gitmeta import ConfigParseError, parse_config

VALID = [
    '[submodule "a"]\n\turl = x\n',
    '[Submodule "Mixed Case"]\n\tURL = x ; comment\n\tpath = "  spaced  " # c\n',
    '[submodule "q\\"uote\\\\d"]\n\turl = a\\tb\\\\c\\"d\n',
    "[submodule.old]\n\turl = x\n",
    '[submodule "c"]\n\turl = one \\\n two\n\tflag\n',
    '\ufeff# bom\r\n[submodule "crlf"]\r\n\turl = y\r\n',
    '[submodule "e"]\n\tpath =\n\turl = a   b\t\tc   \n',
    '[submodule "f"]\n\turl = "a;b#c"\n',
]
INVALID = [
    '[submodule "a"\n\turl = x\n',
    '[submodule "a"]\n\turl = "open\n',
    '[submodule "a"]\n\turl = bad\\qescape\n',
    '[submodule "a"]\n\turl x\n',
    "[submodule a]\n\turl = x\n",
    '[submodule "a"]\n\t1url = x\n',
    "[sub_module]\n\turl = x\n",
]


def _git_list(tmp_path: Path, text: str) -> subprocess.CompletedProcess[bytes]:
    path = tmp_path / "config"
    path.write_bytes(text.encode())
    return subprocess.run(
        ["git", "config", "--file", str(path), "--list", "-z"], capture_output=True, check=False
    )


@pytest.mark.parametrize("text", VALID)
def test_parses_as_git_does(tmp_path: Path, text: str) -> None:
    listed = _git_list(tmp_path, text)
    assert listed.returncode == 0, listed.stderr
    expected = []
    for item in listed.stdout.decode().split("\0")[:-1]:
        key, newline, value = item.partition("\n")
        expected.append((key, value if newline else None))
    assert parse_config(text) == expected


@pytest.mark.parametrize("text", INVALID)
def test_refuses_what_git_refuses(tmp_path: Path, text: str) -> None:
    assert _git_list(tmp_path, text).returncode != 0
    with pytest.raises(ConfigParseError):
        parse_config(text)
