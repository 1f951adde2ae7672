"""Throwaway signing keys for the real ``gpg``, ``gpgsm`` and ``ssh-keygen``, and a repository
configured to sign with one, as a user configures git (docs/design.md §2)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import Repo

SIGNER = "Test Author <author@example.invalid>"  # the tests' committer (tests/conftest.py)
FORMATS = ("openpgp", "ssh", "x509")


@dataclass
class Keys:
    """One key of ``format`` in a private GNUPGHOME (or key directory); ``key``: what a
    receipt records for it; ``config``: the git config that signs with it."""

    format: str
    home: Path
    key: str | None = None
    config: dict[str, str] = field(default_factory=dict)

    def configure(self, repo: Repo, *, always: bool = True) -> None:
        for name, value in self.config.items():
            repo.git("config", name, value)
        if always:
            repo.git("config", "commit.gpgSign", "true")


def _run(*argv: str, env: dict[str, str] | None = None, input: bytes | None = None) -> str:
    proc = subprocess.run(argv, capture_output=True, env=env, input=input, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def make_keys(fmt: str, home: Path) -> Keys:
    """A key of ``fmt`` under ``home`` (GNUPGHOME for openpgp and x509)."""
    env = {"GNUPGHOME": str(home), "PATH": "/usr/bin:/bin"}
    if fmt == "openpgp":
        _run(
            "gpg", "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", "",
            "--quick-gen-key", SIGNER, "ed25519", "sign", "never", env=env,
        )  # fmt: skip
        out = _run("gpg", "--list-secret-keys", "--with-colons", env=env)
        fpr = next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))
        return Keys(fmt, home, fpr, {"user.signingKey": fpr})
    if fmt == "x509":
        (home / "gpg-agent.conf").write_text("allow-loopback-pinentry\n")
        (home / "gpgsm.conf").write_text("disable-crl-checks\n")
        params = home / "params"
        params.write_text(
            "Key-Type: RSA\nKey-Length: 2048\nKey-Usage: sign\nSerial: random\n"
            "Name-DN: CN=Test Author\nName-Email: author@example.invalid\n"
        )
        cert = subprocess.run(
            ["gpgsm", "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
             "--gen-key", str(params)],
            capture_output=True, env=env, check=True,
        ).stdout  # fmt: skip
        _run("gpgsm", "--batch", "--import", env=env, input=cert)
        out = _run("gpgsm", "--list-secret-keys", "--with-colons", env=env)
        fpr = next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))
        (home / "trustlist.txt").write_text(f"{fpr} S relax\n")
        return Keys(fmt, home, None, {"gpg.format": "x509", "user.signingKey": fpr})
    assert fmt == "ssh"
    key = home / "id_ed25519"
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "signer", "-f", str(key))
    public = key.with_suffix(".pub").read_text().strip()
    allowed = home / "allowed_signers"
    allowed.write_text(f"author@example.invalid {public}\n")
    fingerprint = _run("ssh-keygen", "-lf", str(key.with_suffix(".pub"))).split()[1]
    return Keys(
        fmt,
        home,
        fingerprint,
        {
            "gpg.format": "ssh",
            "user.signingKey": str(key.with_suffix(".pub")),
            "gpg.ssh.allowedSignersFile": str(allowed),
        },
    )


def verify(repo: Repo, rev: str = "HEAD") -> subprocess.CompletedProcess[str]:
    """``git verify-commit REV``, as a user runs it."""
    return subprocess.run(
        ["git", "-C", str(repo.path), "verify-commit", "--raw", rev],
        capture_output=True,
        text=True,
        check=False,
    )
