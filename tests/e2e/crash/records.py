"""What ``test_audit.py`` and ``test_repair.py`` share: a call made with ``--json`` and its
receipt read back as a dict, and an audit's problems."""

from __future__ import annotations

import orjson

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, run_cli

SECOND = "*** Begin Patch\n*** Add File: docs/a.md\n+a\n*** End Patch\n"


def apply(repo: Repo, patch: str = PATCH, env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    result = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=patch, env=env)
    return orjson.loads(result.stdout) if result.stdout else {"returncode": result.returncode}


def audit(repo: Repo) -> tuple[int, list[dict]]:  # type: ignore[type-arg]
    result = run_cli("audit", "--repo", str(repo.path), "--json")
    return result.returncode, orjson.loads(result.stdout)["problems"]
