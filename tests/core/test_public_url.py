"""The remote URL a receipt and the messages show: its user information is dropped whole."""

from __future__ import annotations


def test_a_remote_url_whose_password_holds_an_at_sign_keeps_none_of_it() -> None:
    """The receipt's ``remote`` (and messages) drop the whole user information: a password with
    an '@' in it (pasted unencoded) left its tail behind ('https://ss@host/r')."""
    from applyonce.core.receipt import public_url

    assert public_url("https://u:p@ss@host/r.git") == "https://host/r.git"
    assert public_url("https://tok@host/r") == "https://host/r"
    assert public_url("https://host/r?x=a@b") == "https://host/r?x=a@b"  # not user information
