"""Cold start: a fresh ``applyonce`` process per call, beside the interpreter's own start.

    python3 benchmarks/bench_cold_start.py [--runs N] [--files N] [--keep DIR] [--importtime]

Each run starts, in turn (interleaved, so that a shared machine's drifting load weighs on every
row alike), ``python -c pass``, ``python -c 'import pygit2'``, the floor of what a call cannot do
without (``import pygit2, pydantic.main``, then with ``typer.main``: Git, the models, the command
line), ``applyonce --version``, ``applyonce apply`` of a fresh three-file edit (a new commit) and
``applyonce apply`` of one patch already applied (a replay), on a generated repository of
``--files`` files with a checkout. The modules' bytecode is compiled first (compileall), as an
installed wheel's is. Prints a markdown table: median, spread (min - max) and runs of each row, in
milliseconds of wall time, the median CPU time (user + system) of the process, which a busy
machine disturbs less, and the instructions one more run executes, counted by valgrind where it is
installed, which the machine's load does not change at all.

``--importtime``: then one replaying ``applyonce apply`` under ``python -X importtime``, its
import time summed by package (each module's own time), the floor that explains the rest.
Timings on a shared machine are only indicative: nothing here is asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed_setup import ENV, Edits, applyonce_command, machine, make_repo


def _environment() -> dict[str, str]:
    """The children's environment: a git identity, bytecode read (and written) as installed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(ENV)
    return env


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run ``argv`` to its end: its wall time and its CPU time (user + system), in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv}: exit {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1000, cpu * 1000


def instructions(argv: list[str], env: dict[str, str]) -> int | None:
    """The instructions ``argv`` executes, counted by valgrind (cachegrind, no cache model): a
    figure a busy machine does not disturb; None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    if argv[0] != sys.executable:  # the console script: valgrind runs its interpreter
        with open(argv[0], "rb") as handle:
            argv = [handle.readline()[2:].decode().strip(), *argv]
    tool = ["--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"]
    proc = subprocess.run([valgrind, *tool, *argv], capture_output=True, env=env, check=False)
    found = re.search(rb"I\s+refs:\s+([\d,]+)", proc.stderr)
    return int(found.group(1).replace(b",", b"")) if proc.returncode == 0 and found else None


def _group(module: str) -> str:
    """The line of the import breakdown a module's own time is added to."""
    top = module.split(".")[0]
    if top == "applyonce":
        return "applyonce." + module.split(".")[1] if "." in module else "applyonce"
    if top in ("pydantic", "pydantic_core", "annotated_types", "typing_inspection"):
        return "pydantic (+ pydantic_core, annotated_types, typing_inspection)"
    if top in ("pygit2", "cffi", "_cffi_backend"):
        return "pygit2 (+ cffi)"
    if top == "typer":
        return "typer (its bundled click included)"
    if top in ("orjson", "typing_extensions"):
        return top
    return "the standard library and site (and any .pth hooks)"


FIRST_MODEL = "class A(pydantic.main.BaseModel):\n    x: int"


def importtime(argv: list[str], env: dict[str, str]) -> list[tuple[str, float]]:
    """``argv`` (a Python command line) run once under ``-X importtime``: ms of import by group."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv], capture_output=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr.decode()[-2000:])
    totals: Counter[str] = Counter()
    line = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)")
    for text in proc.stderr.decode().splitlines():
        found = line.match(text)
        if found:
            totals[_group(found.group(3))] += int(found.group(1)) / 1000
    return totals.most_common()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs of each row (default 21)")
    parser.add_argument("--files", type=int, default=1000, help="files in the repository")
    parser.add_argument("--keep", type=Path, help="make (or reuse) the repository here")
    parser.add_argument("--importtime", action="store_true", help="also the import breakdown")
    ns = parser.parse_args()
    root = ns.keep or Path(tempfile.mkdtemp(prefix="aocold-"))
    root.mkdir(parents=True, exist_ok=True)
    repo = make_repo(root / f"ck-{ns.files}", ns.files, checkout=True)
    edits = Edits(repo, ns.files)
    env = _environment()
    command, how = applyonce_command()
    import applyonce

    package = Path(applyonce.__file__).parent
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True)

    fresh, replayed = root / "fresh.patch", root / "replayed.patch"
    replayed.write_text(edits.next()[0])
    apply = [*command, "apply", "--json", "-C", str(repo)]
    _run([*apply, str(replayed)], env)  # committed once here: every timed run replays it

    def commit() -> list[str]:
        fresh.write_text(edits.next()[0])
        return [*apply, str(fresh)]

    def python(code: str) -> Callable[[], list[str]]:
        return lambda: [sys.executable, "-c", code]

    floor = "import pygit2, pydantic.main, typer.main"
    # Each row's command line, made anew for each run (a commit needs a fresh edit).
    rows: dict[str, Callable[[], list[str]]] = {
        "`python -c pass`": python("pass"),
        "`python -c 'import pygit2'`": python("import pygit2"),
        "`python -c 'import pygit2, pydantic.main'`": python("import pygit2, pydantic.main"),
        f"`python -c '{floor}'`": python(floor),
        # pydantic builds its schema machinery when the first model class is made: a floor for
        # any process that defines one (applyonce's patch model, receipts, identities do).
        f"`python -c '{floor}'` + one model": python(f"{floor}\n{FIRST_MODEL}"),
        f"`python -c '{floor}, applyonce.executor'`": python(f"{floor}, applyonce.executor"),
        "`applyonce --version`": lambda: [*command, "--version"],
        f"`applyonce apply`, a new commit, {ns.files} files": commit,
        f"`applyonce apply`, a replay, {ns.files} files": lambda: [*apply, str(replayed)],
    }
    values: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
    for argv_of in rows.values():  # warm the page cache and the repository's packs once
        _run(argv_of(), env)
    for _ in range(ns.runs):
        for name, argv_of in rows.items():
            values[name].append(_run(argv_of(), env))
    counted = {name: instructions(argv_of(), env) for name, argv_of in rows.items()}

    for line in machine(root):
        print(line)
    print(f"applyonce: {how}; bytecode compiled (compileall); {ns.runs} runs, interleaved")
    print()
    print("| what | median | spread (min - max) | CPU, median | instructions | runs |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, pairs in values.items():
        ms, cpu = [wall for wall, _ in pairs], [used for _, used in pairs]
        spread = f"{min(ms):.1f} - {max(ms):.1f} ms"
        row = f"{statistics.median(ms):.1f} ms | {spread} | {statistics.median(cpu):.1f} ms"
        count = counted[name]
        row += f" | {count / 1e6:,.0f} M" if count is not None else " | -"
        print(f"| {name} | {row} | {len(ms)} |")
    if None in counted.values():
        print("\n(instructions: valgrind is not installed, or could not count)")
    if ns.importtime:
        print()
        print("Import time of one replaying `applyonce apply` (`python -X importtime`, each")
        print("module's own time; importtime itself adds to it):")
        print()
        print("| imported | ms |")
        print("| --- | ---: |")
        code = "from applyonce.adapters.cli import main; main()"
        argv = ["-c", code, "apply", "--json", "-C", str(repo), str(replayed)]
        argv = ["-c", f"import sys; sys.argv = ['applyonce', *sys.argv[1:]]; {code}", *argv[2:]]
        groups = importtime(argv, env)
        for group, ms in groups:
            print(f"| {group} | {ms:.1f} |")
        print(f"| **all imports** | **{sum(ms for _, ms in groups):.1f}** |")


if __name__ == "__main__":
    main()
