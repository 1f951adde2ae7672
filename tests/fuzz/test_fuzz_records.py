"""Fuzz: tampered receipts and garbage ledger rows, read by show, log, audit, replay, recover and
a repeated apply (``tests/fuzz/records.py``): never an internal error, never a wrong
"committed", nothing written to the work tree, the index or the refs.

The regressions are the inputs the fuzzer found crashing a reader (each was an exit 3 with a
traceback in a log file); the bounded fuzz run (hypothesis "ci" profile) looks for more.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.records import RecordsHarness, Tamper, run_cli_readers, tamper_cases


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordsHarness]:
    # Shared: every case starts from a fresh copy of the pristine state directory.
    yield RecordsHarness(tmp_path_factory.mktemp("records"))


def _data(value: str) -> int:
    from tests.fuzz.records import EVENT_DATA

    return EVENT_DATA.index(value)


def _column(name: str) -> int:
    from tests.fuzz.records import CALL_COLUMNS

    return CALL_COLUMNS.index(name)


def _value(value: object) -> int:
    from tests.fuzz.records import HOSTILE_VALUES

    return next(i for i, v in enumerate(HOSTILE_VALUES) if v == value and type(v) is type(value))


def _field(name: str) -> int:
    from tests.fuzz.records import RECEIPT_FIELDS

    return RECEIPT_FIELDS.index(name)


# (tampering, a step, what that step must say): each crashed the step before the fix.
REGRESSIONS = {
    "receipt-is-a-directory": (
        [Tamper("receipt-dir", "committed")],
        "show committed",
        "error receipt-invalid",
    ),
    "receipt-is-a-directory-recover": (
        [Tamper("receipt-dir", "keyed")],
        "recover",
        "error receipt-invalid",
    ),
    "row-with-null-call-id": (
        [Tamper("row-column", "committed", _column("call_id"), _value(None))],
        "calls",
        "error ledger-unreadable",
    ),
    "row-with-bytes-ref": (
        [Tamper("row-column", "keyed", _column("ref"), _value("\udce9"))],
        "calls",
        "error ledger-unreadable",
    ),
    "event-data-not-json": (
        [Tamper("event-data", "committed", _data("not json"), 1)],
        "replay",
        "error ledger-unreadable",
    ),
    "event-data-a-list": (
        [Tamper("event-data", "rejected", _data("[]"), 0)],
        "replay",
        "error ledger-unreadable",
    ),
    "calls-table-dropped": (
        [Tamper("ledger-drop-table", "committed", 0)],
        "show committed",
        "error ledger-unreadable",
    ),
    "receipt-commit-not-hex": (
        [Tamper("receipt-field", "committed", _field("commit"), _value("z" * 40), True)],
        "show committed",
        "error receipt-invalid",
    ),
    "receipt-base-commit-not-the-parent": (
        # Without its row, recover adopts the receipt, and syncs from its base.
        [
            Tamper("receipt-field", "keyed", _field("base_commit"), _value("0" * 40), True),
            Tamper("row-delete", "keyed"),
        ],
        "recover",
        "ok",
    ),
    "recorded-identity-garbage": (
        [
            Tamper("event-data", "committed", _data('{"identity": {"call_id": 1}}'), 0),
            Tamper("receipt-delete", "committed"),
        ],
        "recover",
        "error ledger-unreadable",
    ),
    "recorded-source-garbage": (
        [
            Tamper("event-data", "keyed", _data('{"source": {"text_utf8b": 5}}'), 0),
            Tamper("receipt-delete", "keyed"),
        ],
        "recover",
        "ok",
    ),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_tampered_record_regressions(records: RecordsHarness, name: str) -> None:
    case, step, expected = REGRESSIONS[name]
    result = records.run(case)
    assert result.ok, (result.internal_errors, result.wrong_committed, result.wrote)
    assert f"{step}: {expected}" in result.outcomes, result.outcomes


def test_tampered_records_in_process(records: RecordsHarness) -> None:
    @settings(
        max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
    )
    @given(case=tamper_cases())
    def run(case: list[Tamper]) -> None:
        result = records.run(case)
        assert result.ok, (case, result.internal_errors, result.wrong_committed, result.wrote)

    run()


def test_a_receipt_that_is_a_fifo_is_refused_not_waited_on(records: RecordsHarness) -> None:
    """Reading a FIFO put in a receipt's place would block forever: it is not a regular file."""
    result = run_cli_readers(
        records, [Tamper("receipt-fifo", "committed")], commands=("show committed",), timeout=30
    )
    assert result.ok, (result.outcomes, result.internal_errors, result.wrote)
    assert result.outcomes[0] == "show: exit 5", result.outcomes


def test_tampered_records_through_the_cli(records: RecordsHarness) -> None:
    case = [
        Tamper("receipt-dir", "committed"),
        Tamper("receipt-field", "keyed", _field("status"), _value("rejected"), True),
    ]
    result = run_cli_readers(records, case, commands=("show committed", "audit", "recover"))
    assert result.ok, (
        result.outcomes,
        result.internal_errors,
        result.wrong_committed,
        result.wrote,
    )
    assert "show: exit 5" in result.outcomes, result.outcomes  # the directory: one error line
