"""Every ``applyonce.*`` git config key the code reads is in ``KNOWN_KEYS``; an unknown one gets
a warning naming the nearest known key."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

import applyonce
from applyonce.core.configkeys import KNOWN_KEYS, nearest_key, unknown_key_warnings

SRC = Path(applyonce.__file__).parent
# Strings spelled like a key that are not git config keys: the CLI's ctx.meta entry.
NOT_CONFIG = {"applyonce.json"}


def _key_literals() -> dict[str, set[str]]:
    """Each ``"applyonce.<name>"`` string in the package that is not a module or a logger's
    name, with the files it is in."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        loggers = {
            arg.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger"
            for arg in node.args
            if isinstance(arg, ast.Constant)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            value = node.value
            if not re.fullmatch(r"applyonce\.[A-Za-z]+", value) or value in loggers:
                continue
            if value in NOT_CONFIG or importlib.util.find_spec(value) is not None:
                continue
            found.setdefault(value, set()).add(str(path.relative_to(SRC)))
    return found


def test_every_key_the_code_reads_is_known() -> None:
    read = {
        key: files
        for key, files in _key_literals().items()
        if files != {"core/configkeys.py"}  # the list itself
    }
    assert {"applyonce.check", "applyonce.leaseSeconds", "applyonce.maxFiles"} <= set(read)
    unknown = sorted(set(read) - set(KNOWN_KEYS))
    assert unknown == [], f"add them to applyonce.core.configkeys.KNOWN_KEYS: {unknown}"


def test_the_sign_off_key_is_known() -> None:
    assert "applyonce.signoff" in KNOWN_KEYS


def test_every_key_the_code_reads_is_documented() -> None:
    cli = (SRC.parents[1] / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    read = [k for k, files in _key_literals().items() if files != {"core/configkeys.py"}]
    missing = [k for k in read if k not in cli and not k.startswith("applyonce.max")]
    assert missing == []


@pytest.mark.parametrize(
    ("name", "near"),
    [
        ("applyonce.leasesecond", "applyonce.leaseSeconds"),
        ("applyonce.skipchecks", "applyonce.skipCheck"),
        ("applyonce.maxfile", "applyonce.maxFiles"),
        ("applyonce.signOf", "applyonce.signoff"),
        ("applyonce.check.timeout", "applyonce.check"),
        ("applyonce.frobnicate", None),
    ],
)
def test_the_nearest_known_key(name: str, near: str | None) -> None:
    assert nearest_key(name) == near


def test_known_keys_in_any_case_and_other_sections_get_no_warning() -> None:
    names = ["applyonce.leaseseconds", "applyonce.SKIPCHECK", "core.bare", "applyoncex.a"]
    assert unknown_key_warnings(names) == []


def test_one_line_per_unknown_key_once() -> None:
    names = ["applyonce.dirtty", "applyonce.frobnicate", "applyonce.DIRTTY"]
    assert unknown_key_warnings(names) == [
        "unknown git config key applyonce.dirtty is ignored; did you mean applyonce.dirty?",
        "unknown git config key applyonce.frobnicate is ignored; applyonce reads no such key",
    ]
