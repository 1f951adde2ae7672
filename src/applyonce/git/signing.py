"""Signing a commit as ``git commit -S`` does (docs/design.md §2): the same git config, the same
programs, the same ``gpgsig`` header.

=============================  ==============================================================
git config                     what it does here (as in git's gpg-interface.c)
=============================  ==============================================================
``commit.gpgSign``             sign every call's commit (``--sign`` / ``--no-sign`` per call)
``gpg.format``                 ``openpgp`` (default), ``x509`` or ``ssh``
``user.signingKey``            the key: ``gpg -u`` / ``gpgsm -u`` (default: the committer's
                               ``Name <mail>``); for ssh a key file, or a public key given
                               literally (``key::ssh-ed25519 AAAA…``, or starting ``ssh-``)
                               whose private half the ssh-agent holds
``gpg.ssh.defaultKeyCommand``  ssh with no ``user.signingKey``: a command whose first output
                               line is the literal key to use
``gpg.program``                the openpgp program (``gpg``); ``gpg.openpgp.program`` too
``gpg.x509.program``           the x509 program (``gpgsm``)
``gpg.ssh.program``            the ssh program (``ssh-keygen``)
=============================  ==============================================================

openpgp and x509 run ``PROGRAM --status-fd=2 -bsau KEY`` with the commit on stdin and succeed only
if the status says ``SIG_CREATED``; ssh runs ``PROGRAM -Y sign -n git -f KEYFILE [-U] FILE`` and
reads ``FILE.sig``. A program that fails, is missing or takes longer than
:data:`SIGN_TIMEOUT_S` is a :class:`SigningError`: the call is rejected before any commit object
is written, and may be repeated once the key is fixed (or with ``--no-sign``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from applyonce.errors import ConflictError, UsageError

FORMATS = ("openpgp", "x509", "ssh")
SIGN_TIMEOUT_S = 120.0
_DEFAULT_PROGRAMS = {"openpgp": "gpg", "x509": "gpgsm", "ssh": "ssh-keygen"}

ConfigValue = Callable[[str], "str | None"]


class SigningError(ConflictError):
    """The signing program did not sign the commit (no key, a locked key, no program)."""

    kind = "signing-failed"
    default_retryable = True
    default_hint = (
        "fix the signing key (git config user.signingKey, gpg.format) and repeat the call, or "
        "repeat it with --no-sign (nothing was committed)"
    )


@dataclass(frozen=True)
class Signer:
    """How this repository's commits are signed: its git config, read once for a call."""

    format: str
    key: str | None
    program: str
    default_key_command: str | None
    committer: str  # "Name <mail>": openpgp's and x509's key when user.signingKey is unset

    def sign(self, payload: str) -> str:
        """The armored signature of the commit ``payload`` (the commit object without its
        ``gpgsig`` header), without its last newline (libgit2 adds the header's own).

        Raises:
            SigningError: the program failed, is missing, or hung.
        """
        data = payload.encode()
        signature = self._sign_ssh(data) if self.format == "ssh" else self._sign_gpg(data)
        return signature.replace("\r", "").rstrip("\n")

    def _sign_gpg(self, data: bytes) -> str:
        key = self.key or self.committer
        proc = _run([self.program, "--status-fd=2", "-bsau", key], data, self.program)
        if proc.returncode != 0 or b"[GNUPG:] SIG_CREATED " not in proc.stderr:
            raise SigningError(
                f"{self.format} signing with key {key!r} failed: {_first_error(proc.stderr)}"
            )
        return proc.stdout.decode("utf-8", "replace")

    def _sign_ssh(self, data: bytes) -> str:
        key = self.key or self._default_ssh_key()
        literal = _literal_ssh_key(key)
        with tempfile.TemporaryDirectory(prefix="applyonce-sign-") as tmp:
            payload = Path(tmp, "commit")
            payload.write_bytes(data)
            argv = [self.program, "-Y", "sign", "-n", "git", "-f"]
            if literal is not None:
                key_file = Path(tmp, "key.pub")
                key_file.write_text(literal + "\n")
                argv += [str(key_file), "-U"]
            else:
                argv.append(os.path.expanduser(key))
            proc = _run([*argv, str(payload)], b"", self.program)
            signature = Path(tmp, "commit.sig")
            if proc.returncode != 0 or not signature.is_file():
                shown = key if literal is None else literal[:40] + "…"
                raise SigningError(
                    f"ssh signing with key {shown!r} failed: {_first_error(proc.stderr)}"
                )
            return signature.read_text("utf-8", "replace")

    def _default_ssh_key(self) -> str:
        if not self.default_key_command:
            raise SigningError(
                "ssh signing needs a key, and neither user.signingKey nor "
                "gpg.ssh.defaultKeyCommand is set",
                hint="set one with 'git config user.signingKey ~/.ssh/id_ed25519.pub', or "
                "repeat the call with --no-sign (nothing was committed)",
            )
        argv = shlex.split(self.default_key_command)
        proc = _run(argv, b"", argv[0] if argv else "gpg.ssh.defaultKeyCommand")
        first = proc.stdout.decode("utf-8", "replace").split("\n", 1)[0].strip()
        if proc.returncode != 0 or _literal_ssh_key(first) is None:
            raise SigningError(
                f"gpg.ssh.defaultKeyCommand {self.default_key_command!r} gave no key: "
                f"{_first_error(proc.stderr) if proc.returncode else 'no ssh- line'}"
            )
        return first


def signer(config_value: ConfigValue, committer: str) -> Signer:
    """The repository's signer, from its git config.

    Raises:
        UsageError: ``gpg.format`` is not openpgp, x509 or ssh (as git refuses it).
    """
    fmt = (config_value("gpg.format") or "openpgp").strip().lower()
    if fmt not in FORMATS:
        raise UsageError(
            f"git config gpg.format is {fmt!r}, which is not {', '.join(FORMATS)}",
            hint="fix it with 'git config gpg.format openpgp' (or x509, ssh)",
        )
    program = config_value(f"gpg.{fmt}.program")
    if fmt == "openpgp" and not program:
        program = config_value("gpg.program")
    return Signer(
        format=fmt,
        key=config_value("user.signingKey") or None,
        program=os.path.expanduser(program or _DEFAULT_PROGRAMS[fmt]),
        default_key_command=config_value("gpg.ssh.defaultKeyCommand") if fmt == "ssh" else None,
        committer=committer,
    )


def _literal_ssh_key(key: str) -> str | None:
    """The public key of a literal ``user.signingKey`` (``key::…`` or ``ssh-…``), else None."""
    if key.startswith("key::"):
        return key[len("key::") :].strip()
    if key.startswith("ssh-"):
        return key.strip()
    return None


def _run(argv: list[str], data: bytes, program: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            argv,
            input=data,
            capture_output=True,
            timeout=SIGN_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise SigningError(f"the signing program {program!r} was not found") from None
    except PermissionError:
        raise SigningError(f"the signing program {program!r} cannot be run") from None
    except subprocess.TimeoutExpired:
        raise SigningError(
            f"the signing program {program!r} did not finish in {SIGN_TIMEOUT_S:g} s (is it"
            " asking for a passphrase?)",
        ) from None


def _first_error(stderr: bytes) -> str:
    """The first line of a program's stderr that is not a ``[GNUPG:]`` status line."""
    for line in stderr.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line and not line.startswith("[GNUPG:]"):
            return line[:200]
    return "it signed nothing"
