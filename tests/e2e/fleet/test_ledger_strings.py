"""A ledger's connection string in either libpq form (a URL, or ``key=value`` words with quoted
values and a ``passfile``): its password is in no output — text, ``--json``, the crash log — and
an option libpq refuses is the string's fault: exit 2, ``invalid-ledger-url``, never a "retry"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import UTIL_PATCH, Served, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

SECRET = "s3cr3t-Pw"


def _call(served: Served, ledger: str, *more: str) -> tuple[int, str]:
    run = run_cli(
        "apply", "-", "--repo", str(served.clone.path), "--remote", "origin",
        "--ledger", ledger, *more, input=UTIL_PATCH,
    )  # fmt: skip
    assert "Traceback" not in run.stderr
    return run.returncode, run.stdout + run.stderr


@pytest.mark.parametrize(
    "ledger",
    [
        "host={dir} dbname=fleet user=agent password={secret} connect_timeout=2",
        "host={dir} dbname=fleet password='{secret} with spaces' connect_timeout=2",
        "host={dir} dbname=fleet passfile={dir}/pgpass password={secret} connect_timeout=2",
        "postgresql://agent:{secret}@/fleet?host={dir}&connect_timeout=2",
        "postgresql://agent@/fleet?host={dir}&password={secret}&connect_timeout=2",
    ],
)
def test_a_ledger_that_cannot_be_reached_never_shows_its_password(
    served: Served, tmp_path: Path, ledger: str
) -> None:
    ledger = ledger.format(dir=tmp_path, secret=SECRET)
    for more in ((), ("--json",)):
        code, out = _call(served, ledger, *more)
        assert code == 4, out
        assert "cannot reach the ledger database 'fleet'" in out
        assert SECRET not in out and "with spaces" not in out


@pytest.mark.parametrize(
    ("ledger", "said"),
    [
        ("postgresql://agent:{secret}@/fleet?host={dir}&sslmode=bogus", 'invalid sslmode value: "bogus"'),
        ("host={dir} dbname=fleet password={secret} sslmode=bogus", 'invalid sslmode value: "bogus"'),
        ("host={dir} dbname=fleet password={secret} bogus=1", 'invalid connection option "bogus"'),
        ("postgresql://agent@/fleet?host={dir}&password={secret}&bogus=1", 'invalid URI query parameter: "bogus"'),
        ("host={dir} port=abc dbname=fleet password={secret}", 'invalid integer value "abc"'),
        ("host={dir} dbname=fleet target_session_attrs=any-of-them password={secret}", "target_session_attrs"),
        ("host={dir} dbname=fleet password='{secret}", "not a valid PostgreSQL connection string"),
    ],
)  # fmt: skip
def test_an_option_libpq_refuses_is_a_usage_error(
    served: Served, tmp_path: Path, ledger: str, said: str
) -> None:
    ledger = ledger.format(dir=tmp_path, secret=SECRET)
    head = served.clone.head()
    code, out = _call(served, ledger)
    assert code == 2, out
    assert said in out and SECRET not in out
    code, out = _call(served, ledger, "--json")
    assert code == 2, out
    error = json.loads(out[: out.rindex("}") + 1])["error"]
    assert error["kind"] == "invalid-ledger-url" and error["retryable"] is False
    assert SECRET not in out
    assert served.clone.head() == head and not served.clone.state_dir().exists()


def test_a_connection_string_that_is_refused_is_shown_without_its_password(served: Served) -> None:
    for ledger in (f"mysql://agent:{SECRET}@db/app", f"redis://db/0?password={SECRET}"):
        code, out = _call(served, ledger, "--json")
        assert code == 2 and "is not a ledger applyonce can use" in out, out
        assert SECRET not in out
