"""Replay (docs/design.md §6): re-derive every call's decision and tool output from the record
alone.

No Git access at all and no patch application: the ledger's events are folded into each call's
state and compared with the ``calls`` table, and each terminal receipt's output is derived again
from its own fields (the Codex summary from ``files``, the error line from ``error``) and compared
with the stored ``output``, byte for byte. Any disagreement is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.core.texts import receipt_text
from applyonce.flow.context import Context
from applyonce.state.ledger import fold_events

COMPARED = ("state", "commit_id", "base_commit", "exit_code", "receipt_sha256")


@dataclass(frozen=True)
class Decision:
    call_id: str
    state: str
    exit_code: int | None
    output: str
    agrees: bool
    problems: tuple[str, ...] = ()


@dataclass
class ReplayReport:
    decisions: list[Decision] = field(default_factory=list)

    @property
    def disagreements(self) -> int:
        return sum(not d.agrees for d in self.decisions)

    def to_dict(self) -> dict[str, object]:
        return {
            "calls": len(self.decisions),
            "disagreements": self.disagreements,
            "decisions": [asdict(d) for d in self.decisions],
        }


def replay(ctx: Context) -> ReplayReport:
    """Fold every call's events and derive its output again; compare with the record."""
    ledger = ctx.ledger
    report = ReplayReport()
    folded = fold_events(ledger.events())
    rows = {row.call_id: row for row in ledger.calls()}
    for call_id in sorted(set(rows) | set(folded) | set(ctx.receipts.call_ids())):
        problems: list[str] = []
        row = rows.get(call_id)
        state = folded.get(call_id, {})
        if row is None:
            problems.append("has a receipt but no ledger row")
        else:
            for column in COMPARED:
                if column in state and state[column] != getattr(row, column):
                    problems.append(
                        f"events say {column}={state[column]!r}, calls say {getattr(row, column)!r}"
                    )
        receipt: Receipt | None = None
        try:
            receipt = ctx.receipts.load(
                call_id, expected_sha256=row.receipt_sha256 if row else None
            )
        except ReceiptError as exc:
            problems.append(exc.message)
        if receipt is None and not problems and row is not None and row.state != "claimed":
            problems.append("the receipt is missing")
        output = ""
        if receipt is not None:
            output = receipt.output
            if row is not None and receipt.status != row.state and row.state != "claimed":
                problems.append(f"receipt says {receipt.status}, ledger says {row.state}")
            expected = receipt_text(receipt)
            if expected is not None and expected != receipt.output:
                problems.append("the stored output is not what the recorded decision gives")
            if (
                row is not None
                and receipt.status in ("committed", "rejected")
                and (receipt.exit_code != row.exit_code)
            ):
                problems.append(
                    f"exit code {receipt.exit_code} in the receipt, {row.exit_code} in the ledger"
                )
        report.decisions.append(
            Decision(
                call_id=call_id,
                state=receipt.status if receipt else (row.state if row else "?"),
                exit_code=receipt.exit_code if receipt else None,
                output=output,
                agrees=not problems,
                problems=tuple(problems),
            )
        )
    return report
