"""``applyonce audit`` is one pass (issue 13, item 5): one walk of the branch, the trailers of a
commit parsed once and only when its message names ``Call-Id``, each receipt read and verified
once — however many times the walk and the pass over the receipts directory ask for it."""

from __future__ import annotations

import gc
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import applyonce.core.receipt as receipt_module
import applyonce.git.store as store_module
from applyonce import Executor
from applyonce.core.identity import CallIdentity
from applyonce.core.trailers import Trailers
from applyonce.git.store import GitStore, GitTree
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


def test_audit_hashes_each_identity_once_and_looks_up_each_file_once(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call's trailers that state its receipt's identity are not hashed again (the receipt's
    was, when it was read), and each file of a receipt is looked up once in its commit's tree."""
    executor = Executor(repo.path)
    for i in range(3):
        executor.apply(add(i))
    executor.close()
    counts: Counter[str] = Counter()
    recompute, entry, of_receipt = CallIdentity.recompute, GitTree.entry, receipt_module.call_id_of

    def counting_recompute(self: CallIdentity) -> str:
        counts["identity hashes"] += 1
        return recompute(self)

    def counting_of_receipt(**fields: Any) -> str:
        counts["identity hashes"] += 1  # a receipt's, as it is read
        return of_receipt(**fields)

    def counting_entry(self: GitTree, path: str) -> Any:
        counts[f"lookups of {path}"] += 1
        return entry(self, path)

    monkeypatch.setattr(CallIdentity, "recompute", counting_recompute)
    monkeypatch.setattr(receipt_module, "call_id_of", counting_of_receipt)
    monkeypatch.setattr(GitTree, "entry", counting_entry)
    report = Executor(repo.path).audit(full=True)
    assert report.clean and report.commits == 3
    expected = {"identity hashes": 3} | {f"lookups of c{i}.txt": 1 for i in range(3)}
    assert counts == Counter(expected), counts


def test_a_forged_identity_is_still_found_when_the_receipt_is_another(repo: Repo) -> None:
    """The shortcut above never hides a commit whose trailers do not recompute."""
    executor = Executor(repo.path)
    executor.apply(add(0))
    executor.close()
    message = repo.git("log", "-1", "--format=%B")
    forged = message.replace("Tool-Version: ", "Tool-Version: x")
    repo.git("commit", "--amend", "-qm", forged)
    report = Executor(repo.path).audit(full=True)
    assert "identity" in {p.kind for p in report.problems}, report.problems


def test_audit_runs_without_the_cycle_collector(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its pass over every record keeps them to the end: collecting cycles over that growing
    heap costs more than the pass, so the collector is paused for it and enabled after."""
    executor = Executor(repo.path)
    for i in range(3):
        executor.apply(add(i))
    executor.close()
    passes: list[str] = []
    load = ReceiptStore.load

    def noting_load(self: ReceiptStore, call_id: str, **kw: Any) -> Any:
        passes.append("collector on" if gc.isenabled() else "collector off")
        gc.collect()  # collections by hand still work; none runs on its own
        return load(self, call_id, **kw)

    monkeypatch.setattr(ReceiptStore, "load", noting_load)
    assert gc.isenabled()
    assert Executor(repo.path).audit(full=True).clean
    assert passes == ["collector off"] * 3
    assert gc.isenabled()
