"""The README's tour is run as written, and its output checked (``…`` matches anything)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def tour() -> list[tuple[str, list[str]]]:
    """The ```console block after 'A five-minute tour': (command, expected output lines)."""
    text = README.read_text()
    section = text[text.index("## A five-minute tour") :]
    block = section[section.index("```console\n") + len("```console\n") :]
    lines = block[: block.index("```\n")].splitlines()
    steps: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(lines):
        assert lines[i].startswith("$ "), lines[i]
        command = lines[i][2:]
        i += 1
        heredoc = re.search(r"<<'(\w+)'", command)
        if heredoc:
            body = []
            while lines[i] != heredoc.group(1):
                body.append(lines[i])
                i += 1
            command += "\n" + "\n".join(body) + "\n" + lines[i]
            i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        steps.append((command, expected))
    return steps


def test_readme_tour_runs_as_written(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "applyonce"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m applyonce "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    cwd = tmp_path
    steps = tour()
    assert len(steps) >= 8
    for command, expected in steps:
        # Each command runs in the folder the previous ones left us in (the tour does `cd shop`).
        script = f'cd {cwd} && {command}\necho "__CWD__=$PWD"'
        proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
        out = proc.stdout.splitlines()
        cwd = Path(out.pop()[len("__CWD__=") :])
        assert proc.returncode == 0, (command, proc.stderr)
        assert len(out) == len(expected), (command, out, expected)
        for got, want in zip(out, expected, strict=True):
            pattern = ".*".join(re.escape(part) for part in want.split("…"))
            assert re.fullmatch(pattern, got), (command, got, want)
