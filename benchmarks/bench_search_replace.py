"""SEARCH/REPLACE blocks cut from the whole pypa/packaging history: how many commits have a block
spelling, what the blocks are like, and how long parsing and applying them takes (in process,
pure: no Git write).

    python3 benchmarks/bench_search_replace.py [--bundle PATH] [--start I] [--stop J]

For each non-merge commit the generator of ``tests/peers/realworld_blocks.py`` writes the blocks
(the three spellings in turn); each file's blocks are parsed (``--format search-replace``) and
applied to the parent's file, and the result must be the commit's file, byte for byte. Prints:
commits, expressible, exact, failures (commit and error), the skip reasons, blocks per spelling,
blocks matched per ladder level, and the time spent in parse and in apply. Never asserts a time;
exits 1 if any commit failed. ``bench_realworld.py --formats search-replace`` replays the same
blocks as real calls (one commit each, the tree checked).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.peers.realworld import (
    BUNDLE,
    EMPTY_TREE,
    Inexpressible,
    _git,
    non_merge_commits,
)
from tests.peers.realworld_blocks import to_search_replace


def main() -> int:
    import pygit2

    from applyonce.errors import ApplyOnceError
    from applyonce.patch import AddFile, UpdateFile, apply_hunks, parse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bundle", default=str(BUNDLE))
    parser.add_argument("--start", type=int, default=0, help="first commit, oldest is 0")
    parser.add_argument("--stop", type=int, default=None)
    parser.add_argument("--show", type=int, default=20, help="failures to print")
    ns = parser.parse_args()
    if not Path(ns.bundle).exists():
        print(f"no bundle at {ns.bundle}", file=sys.stderr)
        return 2
    commits = non_merge_commits(ns.bundle)[ns.start : ns.stop]
    skipped: Counter[str] = Counter()
    spellings: Counter[str] = Counter()
    levels: Counter[str] = Counter()
    failures: list[str] = []
    exact = blocks = created = 0
    parse_s = apply_s = 0.0
    with tempfile.TemporaryDirectory(prefix="aobench-") as top:
        clone = Path(top) / "r"
        _git(Path(top), "clone", "-q", "--bare", ns.bundle, str(clone))
        repo = pygit2.Repository(str(clone))
        for turn, commit in enumerate(commits):
            c = repo.revparse_single(commit).peel(pygit2.Commit)
            parent = str(c.parent_ids[0]) if c.parent_ids else EMPTY_TREE
            diff = _git(clone, "diff", "-M", parent, commit)
            old_tree = repo[parent].peel(pygit2.Tree)
            try:
                text = to_search_replace(
                    diff, lambda path, tree=old_tree: tree[path].data, first_spelling=turn
                )
            except Inexpressible as exc:
                skipped[str(exc)] += 1
                continue
            spellings["aider"] += text.count("\n```\n<<<<<<< SEARCH\n")
            spellings["cline"] += text.count("\n------- SEARCH\n")
            spellings["roo"] += text.count("\n:start_line:")
            started = time.perf_counter()
            try:
                patch = parse(text, "search-replace")
            except ApplyOnceError as exc:
                failures.append(f"{commit[:12]} parse: {exc.one_line()}")
                continue
            parse_s += time.perf_counter() - started
            new_tree = c.peel(pygit2.Tree)
            ok = True
            for op in patch.operations:
                want = new_tree[op.path].data
                if isinstance(op, AddFile):
                    created += 1
                    got = op.content.encode()
                else:
                    assert isinstance(op, UpdateFile)
                    blocks += len(op.hunks)
                    started = time.perf_counter()
                    try:
                        got, matched = apply_hunks(old_tree[op.path].data, op.hunks, path=op.path)
                    except ApplyOnceError as exc:
                        failures.append(f"{commit[:12]} apply: {exc.one_line()[:300]}")
                        ok = False
                        break
                    apply_s += time.perf_counter() - started
                    levels.update(level.label for level in matched)
                if got != want:
                    failures.append(f"{commit[:12]} {op.path}: not the commit's bytes")
                    ok = False
                    break
            exact += ok
    expressible = len(commits) - sum(skipped.values())
    print(
        f"== search-replace blocks: {len(commits)} commits, {expressible} expressible, "
        f"{exact} exact, {len(failures)} failed; {blocks} blocks "
        f"({', '.join(f'{k} {v}' for k, v in sorted(spellings.items()))}), {created} files "
        f"created; matched at {dict(levels)}; parse {parse_s * 1000:.0f} ms, "
        f"apply {apply_s * 1000:.0f} ms"
    )
    for reason, count in skipped.most_common():
        print(f"   skipped {count:>4}  {reason}")
    for line in failures[: ns.show]:
        print(f"   {line}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
