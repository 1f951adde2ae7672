"""CLI conventions (issue 12, item 10): ``--version``, shell completion, exit codes in every
command's help, help without type noise, plain output on a terminal and off it, progress and a
check's elapsed time on a terminal only. A pseudo-terminal (``pty``) stands in for a terminal."""

from __future__ import annotations

import os
import platform
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import applyonce
from applyonce.adapters.cli import app
from applyonce.adapters.cli.app import COMMANDS as MODULES
from tests.conftest import Repo, make_repo, run_cli

pytestmark = pytest.mark.sampled(every=2, by="module")

COMMANDS = list(MODULES)
ADD = "*** Begin Patch\n*** Add File: {name}\n+x\n*** End Patch\n"
BOX = re.compile("[\u2500-\u257f]")  # box drawing: ╭ ─ │ ╰ …
ESCAPE = b"\x1b"


def start_pty(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``applyonce ARGS`` with stdout and stderr on a pseudo-terminal; stdin empty."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "applyonce", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "COLUMNS": "80", **(env or {})},
    )
    os.close(slave)
    return proc, master


def finish_pty(proc: subprocess.Popen[bytes], master: int) -> tuple[int, bytes]:
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=60), out


def run_pty(*args: str, env: dict[str, str] | None = None) -> tuple[int, bytes]:
    return finish_pty(*start_pty(*args, env=env))


def test_version_option_and_command() -> None:
    folder = os.path.dirname(applyonce.__file__)
    python = "{}.{}.{}".format(*sys.version_info[:3])
    want = f"applyonce {applyonce.__version__} ({folder}, python {python})\n"
    for args in (["--version"], ["version"]):
        result = CliRunner().invoke(app, args)
        assert (result.exit_code, result.stdout) == (0, want)


def test_version_says_where_the_running_applyonce_lives() -> None:
    # A real process: the folder is the one its interpreter imports applyonce from.
    done = run_cli("--version")
    assert done.returncode == 0, done.stderr
    version, _, rest = done.stdout.rstrip("\n").partition(" (")
    assert version == f"applyonce {applyonce.__version__}"
    folder, _, python = rest.removesuffix(")").partition(", python ")
    assert Path(folder, "__init__.py").is_file()
    assert Path(folder).resolve() == Path(applyonce.__file__).parent.resolve()
    assert python == platform.python_version()


def test_shell_completion_script_and_completions() -> None:
    # What '--show-completion' prints in bash ('--show-completion' finds the shell by walking up the
    # process tree, which a test runner's workers need not have; the variable names it).
    script = run_cli(env={"_APPLYONCE_COMPLETE": "source_bash"})
    assert script.returncode == 0, script.stderr
    assert "_applyonce_completion" in script.stdout and "complete " in script.stdout
    # What the script asks the program when Tab is pressed after 'applyonce ap'.
    env = {"_APPLYONCE_COMPLETE": "complete_bash", "COMP_WORDS": "applyonce ap", "COMP_CWORD": "1"}
    asked = run_cli(env=env)
    assert (asked.returncode, asked.stdout.split()) == (0, ["apply"])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_names_its_exit_codes(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0
    [line] = [line for line in result.stdout.split("\n\n") if "Exit codes:" in line]
    assert re.search(r"Exit codes: 0\b", " ".join(line.split())), line


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_help_has_no_type_noise(command: list[str]) -> None:
    result = CliRunner().invoke(app, [*command, "--help"])
    assert result.exit_code == 0
    noise = re.findall(
        r"<(?:str|bool|int|float|path|list)[^>]*>|\b(?:BOOLEAN|TEXT|INTEGER|FLOAT)\b", result.stdout
    )
    assert noise == [], result.stdout


def test_help_and_errors_are_plain_on_a_terminal_and_off_it(repo: Repo) -> None:
    cases = [
        ["--help"],
        ["apply", "--help"],
        ["apply", "-", "--attempt", "abc"],  # typer's usage error
        ["show", "abcdef0123", "--repo", str(repo.path)],  # ours
    ]
    # All at once: NO_COLOR on a terminal, a colour terminal (help only), and pipes.
    started = [(args, start_pty(*args, env={"NO_COLOR": "1"})) for args in cases]
    started.append((cases[0], start_pty(*cases[0], env={"TERM": "xterm-256color"})))
    pipes = [
        subprocess.Popen(
            [sys.executable, "-m", "applyonce", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "80"},
        )
        for args in cases[:3]
    ]
    for args, proc in started:
        code, out = finish_pty(*proc)
        assert code == (0 if "--help" in args else 2), out
        assert ESCAPE not in out, (args, out)
        assert not BOX.search(out.decode()), (args, out.decode())
    for pipe in pipes:
        out, _ = pipe.communicate(timeout=60)
        assert ESCAPE not in out and not BOX.search(out.decode()), out.decode()


def test_a_closed_pipe_is_not_an_internal_error(tmp_path: Path) -> None:
    """``applyonce schema --for mcp | head -1``: the reader is gone; exit quietly (1, as typer
    does), not an internal error with a crash log."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "schema", "--for", "mcp"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the interpreter has even started
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1
    assert b"internal error" not in err and list(tmp_path.iterdir()) == []


def test_check_elapsed_line_on_a_terminal_only(tmp_path: Path) -> None:
    """The three runs at once, each in its own repository: one check's time, not three."""
    check = "sleep 2.6"
    repos = [make_repo(tmp_path / name, {"f.txt": "f\n"}) for name in ("tty", "json", "pipe")]
    patch = tmp_path / "add.patch"
    patch.write_text(ADD.format(name="new.txt"))
    base = ["apply", str(patch), "--check", check]
    on_tty = start_pty(*base, "--repo", str(repos[0].path))
    json_on_tty = start_pty(*base, "--json", "--repo", str(repos[1].path))
    piped = run_cli(*base, "--repo", str(repos[2].path))
    code, out = finish_pty(*on_tty)
    assert code == 0, out
    assert f"\rcheck '{check}' running… 2 s".encode() in out
    assert out.endswith(b"\rSuccess. Updated the following files:\r\nA new.txt\r\n")  # blanked
    assert ESCAPE not in out
    code, out = finish_pty(*json_on_tty)
    assert code == 0 and "running…".encode() not in out
    assert piped.returncode == 0 and piped.stderr == ""


def test_recover_and_audit_progress_on_a_terminal_only(repo: Repo) -> None:
    # Two calls killed in flight (after their claim), for recover to settle; 500 commits for
    # audit to report on its way (it reports every 500).
    for name in ("a.txt", "b.txt"):
        killed = run_cli(
            "apply",
            "-",
            "--repo",
            str(repo.path),
            input=ADD.format(name=name),
            env={"APPLYONCE_FAULT": "after-claim"},
        )
        assert killed.returncode == -9
    code, out = run_pty("recover", "--repo", str(repo.path))
    assert code == 0, out
    assert b"\rrecover: settling call 1 of 2" in out and b"\rrecover: settling call 2 of 2" in out
    assert re.search(rb"settling call 2 of 2\r +\r", out)  # blanked before the table
    commands = "".join(
        f"commit refs/heads/main\ncommitter T <t@example.invalid> {1700000000 + i} +0000\n"
        f"data 2\nc\n{'from refs/heads/main^0' if i == 0 else ''}\n"
        for i in range(500)
    )
    subprocess.run(
        ["git", "-C", str(repo.path), "fast-import", "--quiet"], input=commands.encode(), check=True
    )
    code, out = run_pty("audit", "--repo", str(repo.path))
    assert code == 0, out
    assert b"\raudit: 500 commits read" in out and ESCAPE not in out
    piped = run_cli("audit", "--repo", str(repo.path))
    assert piped.returncode == 0 and piped.stderr == ""
