"""Fuzzing the record: tampered receipt files and garbage ledger rows, then every reader.

A :class:`RecordsHarness` makes a repository with three settled calls — ``committed`` (on the
branch), ``rejected`` (its hunk is not in the file) and ``keyed`` (committed under an idempotency
key) — and keeps a copy of their state directory. Each case restores that copy, tampers with it
(:data:`tampers`: byte flips, truncation, a field of a receipt set to a hostile value — with its
ledger digest brought along or not —, the file replaced by a directory, a symlink, bytes that are
not UTF-8, deeply nested JSON; a column of a ``calls`` row or an event's data set to garbage, rows
inserted or deleted, the ledger file overwritten), and then runs what reads the record: ``show`` of
each call, ``calls``, ``audit``, ``replay``, ``recover``, and ``apply`` of each call's patch again.

The properties: no internal error (only :class:`ApplyOnceError`, exit codes 1, 2, 4, 5); never a
wrong "committed" — every receipt handed back as committed names the commit that carries its
Call-Id on the branch (only ``committed`` and ``keyed`` have one), and the branch never moves (a
call that landed is never applied twice); the work tree, the index and the refs are untouched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from applyonce import ApplyOnceError, Executor
from tests.fuzz.harness import ALLOWED_EXITS, changed_paths, files_under, git, make_fuzz_repo
from tests.fuzz.inputs import HOSTILE_PATHS

PATCHES = {
    "committed": "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n"
    "*** End Patch\n",
    "rejected": "*** Begin Patch\n*** Update File: README.md\n@@\n-not in the file\n+x\n"
    "*** End Patch\n",
    "keyed": "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n",
}
KEYS = {"keyed": "run-1:step-2"}

# Values a tampered field or column is set to; two stand for IDs known once the repository exists.
OTHER_COMMIT = "<the commit of the call 'committed'>"
A_BLOB = "<a blob that is in the repository>"
# fmt: off
HOSTILE_VALUES: tuple[Any, ...] = (
    OTHER_COMMIT, A_BLOB, None, "", "committed", "rejected", "prepared", "unknown", "claimed",
    "bogus", 0, -1, 1, 2, 2**63 - 1, 2**64, 1.5, float("inf"), True, [], {}, ["x"], {"kind": 1},
    "0" * 40, "z" * 40, "0" * 64, "../escape", "/etc/passwd", ".git/config", "a\x00b", "\udce9",
    "x" * 5000, "refs/heads/main", "refs/heads/other", "HEAD",
)
# fmt: on
# fmt: off
RECEIPT_FIELDS = (
    "schema", "call_id", "status", "execution_id", "tool", "tool_version", "contract_sha256",
    "attempt", "args_sha256", "idempotency_key", "tool_call_id", "ref", "base_commit", "commit",
    "files", "match_levels", "checks", "output", "output_sha256", "exit_code", "error",
    "reconciled", "note", "created_at", "updated_at", "extra",
)
# fmt: on
# fmt: off
CALL_COLUMNS = (
    "call_id", "state", "execution_id", "args_sha256", "idempotency_key", "ref", "base_commit",
    "commit_id", "exit_code", "retryable", "receipt_sha256", "synced", "owner_pid", "owner_host",
    "owner_start", "created_at", "updated_at",
)
# fmt: on
# fmt: off
EVENT_DATA = (
    "not json", "[]", "1", "null", '{"set": 5}', '{"set": {"state": 7}}', '{"set": []}',
    '{"set": {"nope": 1}}', '{"identity": 5}', '{"identity": {"call_id": 1}}', '{"args": "x"}',
    '{"source": {"text_utf8b": "!!"}}', '{"source": 3}', '{"source": {"text": 5}}',
    '{"source": {"text_utf8b": 5}}', '{"source": {"text": "x", "format": 5}}', '{"args": 5}',
    "{" * 2000, '{"set": {"state": "committed", "commit_id": "' + "0" * 40 + '"}}',
)
# fmt: on
# fmt: off
FILE_BYTES = (
    b"", b"\x00", b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"[" * 5000 + b"]" * 5000, b"1e999",
    b'{"schema": NaN}', b"null", b"[]", b'"x"', b"{}", b"SQLite format 3\x00" + b"\x00" * 100,
)
# fmt: on


@dataclass(frozen=True)
class Tamper:
    """One change to the record: ``target`` is a call name (or ``ledger``), ``what`` says how,
    ``pick`` and ``at`` choose among the values and positions."""

    what: str
    target: str
    pick: int = 0
    at: int = 0
    keep_digest: bool = False


_call = st.sampled_from(sorted(PATCHES))
tampers = st.one_of(
    st.builds(
        Tamper,
        st.sampled_from(
            [
                "receipt-field",
                "receipt-file",
                "receipt-flip",
                "receipt-truncate",
                "receipt-bytes",
                "receipt-dir",
                "receipt-symlink",
                "receipt-dangling",
                "receipt-fifo",
                "receipt-delete",
                "receipt-copy-to-new",
                "receipt-swap",
            ]
        ),
        _call,
        st.integers(0, 2**12),
        st.integers(0, 2**16),
        st.booleans(),
    ),
    st.builds(
        Tamper,
        st.sampled_from(
            [
                "row-column",
                "event-data",
                "event-kind",
                "row-delete",
                "events-delete",
                "row-insert",
                "ledger-bytes",
                "ledger-drop-table",
            ]
        ),
        _call,
        st.integers(0, 2**12),
        st.integers(0, 2**16),
    ),
)


@dataclass
class RecordsResult:
    outcomes: list[str] = field(default_factory=list)
    internal_errors: list[str] = field(default_factory=list)
    wrong_committed: list[str] = field(default_factory=list)
    wrote: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.internal_errors or self.wrong_committed or self.wrote)


class RecordsHarness:
    """The three settled calls of the module docstring, and the readers run on a tampered copy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = make_fuzz_repo(root)
        self.state = self.repo / ".git" / "applyonce"
        executor = Executor(self.repo)
        self.call_ids: dict[str, str] = {}
        for name, patch in PATCHES.items():
            receipt = executor.apply(patch, idempotency_key=KEYS.get(name))
            assert receipt.status == ("rejected" if name == "rejected" else "committed"), receipt
            self.call_ids[name] = receipt.call_id
        executor.close()
        self.tip = git(self.repo, "rev-parse", "HEAD").strip()
        self.landed = {
            line.split()[1]: line.split()[0]
            for line in git(
                self.repo, "log", "--format=%H %(trailers:key=Call-Id,valueonly)"
            ).splitlines()
            if len(line.split()) == 2
        }
        self.blob = git(self.repo, "rev-parse", "HEAD:README.md").strip()
        self.pristine = root / "pristine-state"
        shutil.copytree(self.state, self.pristine, symlinks=True)
        self.outcomes: Counter[str] = Counter()

    # --- tampering ------------------------------------------------------------------------------

    def _receipt(self, name: str) -> Path:
        return self.state / "receipts" / f"{self.call_ids[name]}.json"

    def _set_digest(self, name: str, data: bytes) -> None:
        db = sqlite3.connect(self.state / "ledger.sqlite3")
        try:
            db.execute(
                "UPDATE calls SET receipt_sha256 = ? WHERE call_id = ?",
                (hashlib.sha256(data).hexdigest(), self.call_ids[name]),
            )
            db.commit()
        except sqlite3.Error:
            pass  # an earlier tampering broke the ledger already
        finally:
            db.close()

    def tamper(self, t: Tamper) -> None:
        path = self._receipt(t.target)
        call_id = self.call_ids[t.target]
        if t.what.startswith("receipt-"):
            if path.is_symlink() or not path.is_file():
                return  # an earlier tampering replaced it already
            data = path.read_bytes()
            if not data and t.what in ("receipt-flip", "receipt-truncate"):
                return
            if t.what == "receipt-field":
                try:
                    doc = json.loads(data)
                except ValueError:
                    return  # an earlier tampering broke it already
                if not isinstance(doc, dict):
                    return
                key = RECEIPT_FIELDS[t.pick % len(RECEIPT_FIELDS)]
                value = HOSTILE_VALUES[t.at % len(HOSTILE_VALUES)]
                if value == OTHER_COMMIT:
                    value = self.landed.get(self.call_ids["committed"])
                elif value == A_BLOB:
                    value = self.blob
                doc[key] = value
                if key == "output" and isinstance(value, str) and "\udce9" not in value:
                    doc["output_sha256"] = hashlib.sha256(value.encode()).hexdigest()
                new = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogateescape")
            elif t.what == "receipt-file":
                try:
                    doc = json.loads(data)
                    record = doc["files"][0]
                except (ValueError, LookupError, TypeError):
                    return
                key = ("path", "from", "blob", "sha256", "action", "mode")[t.pick % 6]
                record[key] = (HOSTILE_PATHS + HOSTILE_VALUES)[
                    t.at % (len(HOSTILE_PATHS) + len(HOSTILE_VALUES))
                ]
                new = json.dumps(doc).encode("utf-8", "surrogateescape")
            elif t.what == "receipt-flip":
                at = t.at % len(data)
                new = data[:at] + bytes([data[at] ^ (1 << (t.pick % 8))]) + data[at + 1 :]
            elif t.what == "receipt-truncate":
                new = data[: t.at % len(data)]
            elif t.what == "receipt-bytes":
                new = FILE_BYTES[t.pick % len(FILE_BYTES)]
            elif t.what == "receipt-swap":
                other = self._receipt(sorted(PATCHES)[t.pick % len(PATCHES)])
                if other.is_symlink() or not other.is_file():
                    return
                new = other.read_bytes()
            else:
                self._replace_file(t, path)
                return
            path.write_bytes(new)
            if t.keep_digest:
                self._set_digest(t.target, new)
            return
        self._tamper_ledger(t, call_id)

    def _replace_file(self, t: Tamper, path: Path) -> None:
        if t.what == "receipt-copy-to-new":
            # A receipt under another (well-formed) call ID, which the ledger never saw.
            fake = hashlib.sha256(str(t.at).encode()).hexdigest()
            shutil.copyfile(path, path.with_name(f"{fake}.json"))
            return
        path.unlink()
        if t.what == "receipt-dir":
            path.mkdir()
        elif t.what == "receipt-symlink":
            other = sorted(PATCHES)[t.pick % len(PATCHES)]
            os.symlink(f"{self.call_ids[other]}.json", path)
        elif t.what == "receipt-dangling":
            os.symlink("../../nowhere.json", path)
        elif t.what == "receipt-fifo":
            os.mkfifo(path)

    def _tamper_ledger(self, t: Tamper, call_id: str) -> None:
        ledger = self.state / "ledger.sqlite3"
        if t.what == "ledger-bytes":
            data = ledger.read_bytes()
            at = t.at % len(data)
            ledger.write_bytes(data[:at] + FILE_BYTES[t.pick % len(FILE_BYTES)] + data[at + 1 :])
            return
        value = _sql_value(HOSTILE_VALUES[t.at % len(HOSTILE_VALUES)])
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if t.what == "row-column":
            column = CALL_COLUMNS[t.pick % len(CALL_COLUMNS)]
            statements.append(
                (f"UPDATE calls SET {column} = ? WHERE call_id = ?", (value, call_id))
            )
        elif t.what == "event-data":
            data = EVENT_DATA[t.pick % len(EVENT_DATA)]
            statements.append(
                (
                    "UPDATE events SET data = ? WHERE seq = (SELECT seq FROM events WHERE call_id = ?"
                    " ORDER BY seq LIMIT 1 OFFSET ?)",
                    (data, call_id, t.at % 6),
                )
            )
        elif t.what == "event-kind":
            statements.append(("UPDATE events SET kind = ? WHERE call_id = ?", (value, call_id)))
        elif t.what == "row-delete":
            statements.append(("DELETE FROM calls WHERE call_id = ?", (call_id,)))
        elif t.what == "events-delete":
            statements.append(("DELETE FROM events WHERE call_id = ?", (call_id,)))
        elif t.what == "row-insert":
            fake = hashlib.sha256(str(t.at).encode()).hexdigest()
            statements.append(
                (
                    "INSERT INTO calls (call_id, state, args_sha256, ref, commit_id, created_at,"
                    " updated_at) VALUES (?, ?, ?, 'refs/heads/main', ?, 'x', 'x')",
                    (
                        fake,
                        _sql_value(HOSTILE_VALUES[t.pick % len(HOSTILE_VALUES)]) or "committed",
                        "0" * 64,
                        self.landed.get(self.call_ids["committed"]),
                    ),
                )
            )
        elif t.what == "ledger-drop-table":
            table = ("calls", "events", "migrations")[t.pick % 3]
            statements.append((f"DROP TABLE {table}", ()))
        db = sqlite3.connect(ledger)
        try:
            for sql, params in statements:
                db.execute(sql, params)
            db.commit()
        except (sqlite3.Error, OverflowError):
            pass  # a NOT NULL column, a duplicate key, 2**64: SQLite itself refuses that tampering
        finally:
            db.close()

    # --- the readers ----------------------------------------------------------------------------

    def run(self, case: list[Tamper]) -> RecordsResult:
        shutil.rmtree(self.state)
        shutil.copytree(self.pristine, self.state, symlinks=True)
        for t in case:
            self.tamper(t)
        before = files_under(
            self.root, skip=("repo/.git/applyonce", "repo/.git/objects", "pristine-state")
        )
        result = RecordsResult()
        for step in (
            "open",
            *(f"show {n}" for n in PATCHES),
            "calls",
            "audit",
            "replay",
            "recover",
            *(f"apply {n}" for n in PATCHES),
        ):
            self._step(step, result)
            if step == "open" and result.outcomes[-1] != "open: ok":
                break
        after = files_under(
            self.root, skip=("repo/.git/applyonce", "repo/.git/objects", "pristine-state")
        )
        result.wrote = changed_paths(before, after)
        if self.executor_tip() != self.tip:
            result.wrote.append("refs/heads/main moved")
        if hasattr(self, "executor"):
            self.executor.close()
            del self.executor
        self.outcomes.update(result.outcomes)
        return result

    def executor_tip(self) -> str:
        return git(self.repo, "rev-parse", "HEAD").strip()

    def _step(self, step: str, result: RecordsResult) -> None:
        verb, _, name = step.partition(" ")
        try:
            label = self._do(verb, name, result)
        except ApplyOnceError as exc:
            label = f"error {exc.kind}"
            if exc.exit_code not in ALLOWED_EXITS:
                result.internal_errors.append(f"{step}: exit code {exc.exit_code}: {exc}")
        except Exception as exc:
            label = "internal"
            result.internal_errors.append(f"{step}: {type(exc).__name__}: {exc}")
        result.outcomes.append(f"{step}: {label}")

    def _committed_ok(
        self, step: str, call_id: str, commit: str | None, result: RecordsResult
    ) -> None:
        if commit is None or self.landed.get(call_id) != commit:
            result.wrong_committed.append(
                f"{step}: committed as {commit}, Git says {self.landed.get(call_id)}"
            )

    def _do(self, verb: str, name: str, result: RecordsResult) -> str:
        if verb == "open":
            self.executor = Executor(self.repo)
            return "ok"
        ex = self.executor
        if verb == "show":
            receipt = ex.show(self.call_ids[name])
            if receipt.status == "committed":
                self._committed_ok(f"show {name}", receipt.call_id, receipt.commit, result)
            return receipt.status
        if verb == "calls":
            return f"{len(ex.calls())} calls"
        if verb == "audit":
            report = ex.audit()
            return "clean" if report.clean else "problems"
        if verb == "replay":
            replay = ex.replay()
            return "agrees" if not replay.disagreements else "disagreements"
        if verb == "recover":
            report = ex.recover()
            for outcome in report.outcomes:
                if outcome.now == "committed" and outcome.call_id not in self.landed:
                    result.wrong_committed.append(f"recover: {outcome}")
            return "unknown" if report.unknown else "ok"
        receipt = ex.apply(PATCHES[name], idempotency_key=KEYS.get(name))
        if receipt.status == "committed":
            self._committed_ok(f"apply {name}", receipt.call_id, receipt.commit, result)
        return receipt.status


def _sql_value(value: Any) -> Any:
    """``value`` as SQLite can store it: JSON for lists and dicts, bytes for a surrogate."""
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, str) and "\udce9" in value:
        return value.encode("utf-8", "surrogateescape")
    return value


def tamper_cases() -> st.SearchStrategy[list[Tamper]]:
    return st.lists(tampers, min_size=1, max_size=3)


def run_cli_readers(
    harness: RecordsHarness,
    case: list[Tamper],
    *,
    commands: tuple[str, ...] = ("show committed", "show keyed", "audit", "replay", "recover"),
    timeout: float = 60,
) -> RecordsResult:
    """``show`` of each call, ``log``, ``audit``, ``replay`` and ``recover`` in their own processes
    on a tampered record: exit 0, 1, 2, 4 or 5, a one-line ``error:`` and no traceback, and a
    ``show --json`` that says committed only with the commit Git has."""
    shutil.rmtree(harness.state)
    shutil.copytree(harness.pristine, harness.state, symlinks=True)
    for t in case:
        harness.tamper(t)
    skip = ("repo/.git/applyonce", "repo/.git/objects", "pristine-state")
    before = files_under(harness.root, skip=skip)
    result = RecordsResult()
    for command in commands:
        verb, _, name = command.partition(" ")
        args = [verb, harness.call_ids[name], "--json"] if name else [verb]
        proc = subprocess.run(
            [sys.executable, "-m", "applyonce", *args, "--repo", str(harness.repo)],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        stderr = proc.stderr.decode("utf-8", "replace")
        step = verb
        result.outcomes.append(f"{step}: exit {proc.returncode}")
        if proc.returncode not in {0, *ALLOWED_EXITS} or "Traceback" in stderr:
            result.internal_errors.append(f"{step}: exit {proc.returncode}: {stderr[-300:]}")
        elif proc.returncode in (2, 4, 5) and not stderr.startswith("error: "):
            result.internal_errors.append(f"{step}: exit {proc.returncode} without one error line")
        if args[0] == "show" and proc.returncode == 0:
            receipt = json.loads(proc.stdout)
            if receipt["status"] == "committed":
                harness._committed_ok("show", receipt["call_id"], receipt["commit"], result)
    result.wrote = changed_paths(before, files_under(harness.root, skip=skip))
    harness.outcomes.update(result.outcomes)
    return result
