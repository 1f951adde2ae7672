"""Receipts on disk: ``show`` does not vouch for an edited one, and writing them leaves no temp
files behind."""

from __future__ import annotations

import orjson

from applyonce import Executor
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, run_cli


def test_show_does_not_vouch_for_an_edited_receipt(repo: Repo) -> None:
    import hashlib

    receipt = orjson.loads(apply(repo, PATCH, "--json").stdout)
    forged = dict(receipt, output="Success. forged\n")
    forged["output_sha256"] = hashlib.sha256(forged["output"].encode()).hexdigest()
    (repo.state_dir() / "receipts" / f"{receipt['call_id']}.json").write_bytes(orjson.dumps(forged))
    shown = run_cli("show", receipt["call_id"], "--repo", str(repo.path))
    assert shown.returncode == 5 and "was changed after applyonce wrote it" in shown.stderr


def test_no_temp_files_left_behind(repo: Repo) -> None:
    Executor(repo.path).apply(PATCH)
    leftovers = [p for p in repo.state_dir().rglob(".applyonce-tmp-*")]
    assert leftovers == []
