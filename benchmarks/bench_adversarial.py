"""Adversarial patch-engine benchmark: inputs built to make hunk search quadratic.

    python3 benchmarks/bench_adversarial.py [--timeout S] [--case NAME]…

Each case runs in its own process (so one that never ends is cut off after ``--timeout`` seconds
and the others still run) and reports its wall time and peak memory (max RSS). In-process, no Git,
no disk: parse + plan (or apply), with the default caps where the code has them. Never
asserted in tests. To compare two versions in one run, point ``PYTHONPATH`` at each ``src``.

Cases:

    codex-repeated     a 200,000-line file of one repeated line with one other line in the middle;
                       a Codex hunk of 10,000 lines whose first 9,999 match almost everywhere, and
                       the whole only once
    unified-repeated   the same as a unified diff whose line numbers point at the start of the file
                       (line 2: the search goes outward from there, as git apply's does)
    codex-many-hunks   a 46 KB Codex patch of 2,000 small hunks on a 200,000-line file
    unified-many-hunks a unified diff of 2,000 small hunks on the same file, line numbers right
    unified-stale-hints an 85 KB unified diff of 1,428 small hunks all headed ``@@ -2,3 +2,3 @@``
                       (stale line numbers) on a 100,000-line file: every hunk searched outward
                       from line 2
    editjson-inserts   a 95 KB edit-json patch of 1,200 inserts at line 0 on a 100,000-line file
    copies             a 264 KB unified diff of 2,900 copies of a 2 MB file (about 6 GB written)
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

N = 200_000
M = 10_000


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    start = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        print(f"    apply_hunks alone {time.perf_counter() - start:8.3f} s")


def _repeated() -> tuple[bytes, list[str]]:
    lines = ["    pass"] * (N // 2) + ["END"] + ["    pass"] * (N // 2 - 1)
    return ("\n".join(lines) + "\n").encode(), lines


def codex_repeated() -> None:
    from applyonce.patch import apply_hunks, parse

    data, _ = _repeated()
    body = [" " + "    pass"] * (M - 1) + ["-END", "+DONE", " " + "    pass"]
    text = "*** Begin Patch\n*** Update File: big.py\n@@\n" + "\n".join(body) + "\n*** End Patch\n"
    hunks = parse(text).operations[0].hunks  # type: ignore[union-attr]
    out, _ = _timed(apply_hunks, data, hunks, path="big.py")
    assert b"    pass\nDONE\n    pass\n" in out


def unified_repeated() -> None:
    from applyonce.patch import apply_hunks, parse

    data, _ = _repeated()
    body = [" " + "    pass"] * (M - 1) + ["-END", "+DONE", " " + "    pass"]
    text = f"--- a/big.py\n+++ b/big.py\n@@ -2,{M + 1} +2,{M + 1} @@\n" + "\n".join(body) + "\n"
    hunks = parse(text).operations[0].hunks  # type: ignore[union-attr]
    out, _ = _timed(apply_hunks, data, hunks, path="big.py")
    assert b"    pass\nDONE\n    pass\n" in out


def _numbered() -> tuple[bytes, list[str]]:
    lines = [f"v{i}" if i % 100 == 0 else "    pass" for i in range(N)]
    return ("\n".join(lines) + "\n").encode(), lines


def codex_many_hunks() -> None:
    from applyonce.patch import apply_hunks, parse

    data, _ = _numbered()
    hunks = [f"@@\n-v{i}\n+w{i}" for i in range(0, N, 100)][:2000]
    text = "*** Begin Patch\n*** Update File: big.py\n" + "\n".join(hunks) + "\n*** End Patch\n"
    assert len(text) < 46 * 1024
    patch_hunks = parse(text).operations[0].hunks  # type: ignore[union-attr]
    out, _ = _timed(apply_hunks, data, patch_hunks, path="big.py")
    assert b"w199900\n" in out


def unified_many_hunks() -> None:
    from applyonce.patch import apply_hunks, parse

    data, _ = _numbered()
    parts = ["--- a/big.py\n+++ b/big.py\n"]
    for i in range(0, N, 100):
        parts.append(f"@@ -{i + 1},2 +{i + 1},2 @@\n-v{i}\n+w{i}\n     pass\n")
    patch_hunks = parse("".join(parts)).operations[0].hunks  # type: ignore[union-attr]
    out, _ = _timed(apply_hunks, data, patch_hunks, path="big.py")
    assert b"w199900\n" in out


def unified_stale_hints() -> None:
    from applyonce.patch import apply_hunks, parse

    data = "".join(f"line {i}\n" for i in range(100_000)).encode()
    parts = ["--- a/big.txt\n+++ b/big.txt\n"]
    for i in range(70, 100_000, 70):
        parts.append(f"@@ -2,3 +2,3 @@\n line {i - 1}\n-line {i}\n+L{i}\n line {i + 1}\n")
    patch_hunks = parse("".join(parts)).operations[0].hunks  # type: ignore[union-attr]
    out, _ = _timed(apply_hunks, data, patch_hunks, path="big.txt")
    assert b"\nL99960\n" in out


def editjson_inserts() -> None:
    import json

    from applyonce.patch import apply_edit_commands, parse

    data = "".join(f"s{i}\n" for i in range(100_000)).encode()
    text = json.dumps(
        [
            {"command": "insert", "path": "big.txt", "insert_line": 0, "new_str": f"i{i}"}
            for i in range(1200)
        ]
    )
    assert len(text) < 100_000, len(text)
    commands = parse(text).operations[0].commands  # type: ignore[union-attr]
    start = time.perf_counter()
    out = apply_edit_commands(data, commands, path="big.txt")
    print(f"    apply_edit_commands alone {time.perf_counter() - start:8.3f} s")
    assert out is not None and out.startswith(b"i1199\n")


def copies() -> None:
    from applyonce.core.plan import plan
    from applyonce.errors import ApplyOnceError
    from applyonce.patch import parse

    big = b"x" * 2_000_000

    class Tree:
        def kind(self, path: str) -> str | None:
            return "file" if path == "big.bin" else None

        def read(self, path: str) -> tuple[bytes, int]:
            return bytes(bytearray(big)), 0o100644  # a fresh object per read, as a blob read is

    parts = [
        f"diff --git a/big.bin b/c{i}.bin\nsimilarity index 100%\n"
        f"copy from big.bin\ncopy to c{i}.bin\n"
        for i in range(2900)
    ]
    text = "".join(parts)
    assert 240_000 < len(text) < 280_000, len(text)
    patch = parse(text)
    try:
        try:
            from applyonce.patch.limits import Limits, write_bound, write_error
        except ImportError:  # before the caps: the plan is made whatever it holds
            plan(patch, Tree())  # type: ignore[arg-type]
            return
        # As a call does it: the bound from the tip's sizes first, then the capped plan.
        limits = Limits()
        bound = write_bound(patch, lambda path: len(big) if path == "big.bin" else 0)
        if bound > limits.write_bytes:
            raise write_error(bound, limits, bound=True)
        plan(patch, Tree(), limits=limits)  # type: ignore[arg-type, call-arg]
    except ApplyOnceError as exc:
        print(f"    refused: {exc.one_line()[:100]}")


CASES: dict[str, Callable[[], None]] = {
    "codex-repeated": codex_repeated,
    "unified-repeated": unified_repeated,
    "codex-many-hunks": codex_many_hunks,
    "unified-many-hunks": unified_many_hunks,
    "unified-stale-hints": unified_stale_hints,
    "editjson-inserts": editjson_inserts,
    "copies": copies,
}


def _child(name: str) -> None:
    # The copies case would take ~6 GB: cap the address space so a machine is never swamped.
    limit = 3 * 1024**3
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    start = time.perf_counter()
    try:
        CASES[name]()
    except MemoryError:
        print(f"    MemoryError (over {limit // 1024**3} GiB)")
    elapsed = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"    wall {elapsed:8.3f} s, peak RSS {peak:7.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--case", action="append", choices=sorted(CASES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        _child(ns.child)
        return
    for name in ns.case or CASES:
        print(f"{name}:", flush=True)
        try:
            subprocess.run(
                [sys.executable, __file__, "--child", name], timeout=ns.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            print(f"    did not finish in {ns.timeout:g} s (killed)")


if __name__ == "__main__":
    main()
