"""The matrix as a table, from a run's JUnit XML:

    python -m pytest -n 2 tests/situations --junitxml=matrix.xml
    python -m tests.situations.report matrix.xml

Each cell: ``landed`` (a correct success), ``refused`` (a clean one-line refusal), ``FAIL: …``
(the first broken promise), ``xfail: …`` (a known defect, its one-line reason), ``n/a`` (the
column does not apply to the state).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

from tests.situations.states import STATES
from tests.situations.test_matrix import COLUMNS


def cells(path: str) -> dict[tuple[str, str], str]:
    found = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if not name.startswith("test_cell["):
            continue
        cell_id = name[len("test_cell[") : -1]
        state, column = next((s, c) for s in STATES for c in COLUMNS if f"{s}-{c}" == cell_id)
        outcome = {p.get("name"): p.get("value") for p in case.iter("property")}.get("outcome")
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            text = (failure.get("message") or "").splitlines()[0][:140]
            found[state, column] = f"FAIL: {text}"
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            found[state, column] = f"xfail: {skipped.get('message', '')[:140]}"
        elif skipped is not None:  # the cell does not apply to the state (its reason says why)
            found[state, column] = "n/a"
        else:
            found[state, column] = outcome or "passed"
    return found


def main(path: str) -> None:
    found = cells(path)
    print("| state | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for state in STATES:
        row = [found.get((state, column), "n/a") for column in COLUMNS]
        print(f"| {state} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
