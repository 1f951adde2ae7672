"""``applyonce audit`` is one pass (issue 13, item 5): one walk of the branch, the trailers of a
commit parsed once and only when its message names ``Call-Id``, each receipt read and verified
once — however many times the walk and the pass over the receipts directory ask for it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import applyonce.git.store as store_module
from applyonce import Executor
from applyonce.core.trailers import Trailers
from applyonce.git.store import GitStore
from applyonce.state.receipts import ReceiptStore
from tests.conftest import Repo


def add(i: int) -> str:
    return f"*** Begin Patch\n*** Add File: c{i}.txt\n+{i}\n*** End Patch\n"


def test_audit_reads_each_receipt_and_each_call_commit_once(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = Executor(repo.path)
    for i in range(4):
        executor.apply(add(i))
        # A commit of the person's between the calls: no Call-Id, nothing to parse.
        (repo.path / f"mine{i}.txt").write_text(f"{i}\n")
        repo.git("add", f"mine{i}.txt")
        repo.git("commit", "-qm", f"mine {i}\n\nSigned-off-by: a <a@example.com>")
    executor.close()
    counts: Counter[str] = Counter()
    commits, parse, load = GitStore.commits, store_module.parse_trailers, ReceiptStore.load

    def counting_commits(self: GitStore, tip: str | None, **kw: Any) -> Any:
        counts["walks"] += 1
        return commits(self, tip, **kw)

    def counting_parse(message: bytes, **kw: Any) -> Trailers:
        counts["trailer parses"] += 1
        return parse(message, **kw)

    def counting_load(self: ReceiptStore, call_id: str, **kw: Any) -> Any:
        counts["receipt loads"] += 1
        return load(self, call_id, **kw)

    monkeypatch.setattr(GitStore, "commits", counting_commits)
    monkeypatch.setattr(store_module, "parse_trailers", counting_parse)
    monkeypatch.setattr(ReceiptStore, "load", counting_load)
    report = Executor(repo.path).audit()
    assert report.clean and (report.commits, report.receipts) == (4, 4)
    # 9 commits on the branch (the base, 4 calls, 4 of the person's): one walk, 4 parses.
    assert counts == Counter({"walks": 1, "trailer parses": 4, "receipt loads": 4}), counts


def test_a_walk_for_call_ids_finds_them_in_any_case_and_skips_only_messages_without(
    repo: Repo,
) -> None:
    messages = [
        "plain\n\nSigned-off-by: a <a@example.com>",
        "shouting\n\nCALL-ID: 1111",
        "lower\n\ncall-id: 2222\nArgs-Sha256: x",
        "named in the body only\n\nthe Call-Id: 3333 is prose\n\nReviewed-by: b",
    ]
    for message in messages:
        repo.git("commit", "-q", "--allow-empty", "-m", message)
    store = GitStore(repo.path)
    tip = store.tip("refs/heads/main")
    every = [(c, t.all("Call-Id")) for c, t in store.walk_trailers(tip)]
    keyed = [(c, t.all("Call-Id")) for c, t in store.walk_trailers(tip, key="Call-Id")]
    assert keyed == every
    assert [ids for _, ids in keyed[:4]] == [[], ["2222"], ["1111"], []]
