"""A client process that sends many calls through one in-process ``Executor`` (the Python API a
harness uses), so a phase of hundreds of calls does not pay a process start-up per call.

    python3 tests/e2e/fleet/client.py CLONE LEDGER_URL REMOTE < CALLS.json

stdin: a JSON list of ``{"key", "patch", "tool_call_id", "attempt", "lane"}`` (``lane`` null: on
the clone's branch); stdout: one JSON line per
call, ``{"key", "status", "call_id", "reconciled", "seconds"}`` or ``{"key", "error", "kind",
"exit", "stderr", "seconds"}``."""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    from applyonce import Executor
    from applyonce.errors import ApplyOnceError

    clone, ledger, remote = sys.argv[1:4]
    executor = Executor(clone, ledger=ledger, remote=remote)
    try:
        for call in json.load(sys.stdin):
            line: dict[str, object] = {"key": call["key"]}
            started = time.monotonic()
            try:
                # As ``apply --lane NAME``: the lane made from HEAD's branch the first time.
                branch = executor.open_lane(call["lane"]) if call.get("lane") else None
                receipt = executor.apply(
                    call["patch"],
                    tool_call_id=call["tool_call_id"],
                    attempt=call["attempt"],
                    branch=branch,
                )
            except ApplyOnceError as exc:
                # As the CLI would have ended: its exit code and its one stderr line.
                line.update(error=exc.message, kind=exc.kind, exit=exc.exit_code)
                line["stderr"] = f"error: {exc.one_line()}\n"
            else:
                line.update(
                    status=receipt.status, call_id=receipt.call_id, reconciled=receipt.reconciled
                )
            line["seconds"] = round(time.monotonic() - started, 3)
            print(json.dumps(line), flush=True)
    finally:
        executor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
