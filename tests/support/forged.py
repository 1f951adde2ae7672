"""Trailer blocks of a forged call: the fields of a genuine call, written back as a commit message."""

from __future__ import annotations

from applyonce.executor import CallOptions, Executor
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo


def trailer_block(fields: dict[str, object], *, args_sha256: str | None = None) -> str:
    """The trailer block applyonce writes for the call whose receipt fields are ``fields``."""
    return (
        f"Call-Id: {fields['call_id']}\n"
        f"Contract-Sha256: {fields['contract_sha256']}\n"
        f"Attempt: {fields['attempt']}\n"
        f"Tool: {fields['tool']}\n"
        f"Tool-Version: {fields['tool_version']}\n"
        f"Args-Sha256: {args_sha256 or fields['args_sha256']}\n"
    )


def genuine_fields(repo: Repo) -> dict[str, object]:
    """The trailer fields applyonce would write for the call, computed by the library (nothing
    is written: no state directory is made)."""
    executor = Executor(repo.path, read_only=True)
    try:
        return executor.identify(PATCH, CallOptions())[1].model_dump()
    finally:
        executor.close()
