"""``millrace security init``: a token (and on request a local CA and certificates).

Writes into ``--dir`` (default ``secrets`` beside ``--config``'s file, else in
the working directory), every file readable by its owner only:

- ``token``: 32 random bytes, URL-safe base64 (what every call then carries);
- with ``--tls``: ``ca.pem``/``ca.key`` (a local CA) and ``node.pem``/``node.key``
  (a certificate for ``--host`` names, signed by it, for servers and clients
  alike), made with the ``openssl`` command.

It prints the ``[security]`` lines to add to the deployment file. Existing
files are never overwritten.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from millrace.commands._options import add_config_argument

OWNER_ONLY = 0o600


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``security`` sub-command."""
    parser = subparsers.add_parser(
        "security",
        help="make a token (and a local CA and certificates) for a deployment",
        description=(
            "Write a random token (and with --tls a local CA and a certificate) readable by "
            "the owner only, and print the [security] lines that use them."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    init = actions.add_parser("init", help="write the token (and certificates)")
    add_config_argument(init, required=False, purpose="the files go beside it")
    init.add_argument("--dir", help="where to write (default: secrets/ beside --config)")
    init.add_argument("--tls", action="store_true", help="also a local CA and a certificate")
    init.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name or IP the certificate is for (repeat; default localhost, 127.0.0.1)",
    )
    init.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Write the files; print the settings; 0, or 2 with a message."""
    base = Path(args.deployment).parent if args.deployment else Path(".")
    directory = Path(args.dir) if args.dir else base / "secrets"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    token_path = directory / "token"
    try:
        _write_owner_only(token_path, secrets.token_urlsafe(32) + "\n")
        if args.tls:
            _make_certificates(directory, args.host or ["localhost", "127.0.0.1"])
    except (FileExistsError, RuntimeError) as exc:
        print(f"millrace security init: {exc}", file=sys.stderr)
        return 2
    relative = os.path.relpath(directory, base)
    lines = ["[security]", f'token_file = "{relative}/token"']
    if args.tls:
        lines += [
            f'tls_cert = "{relative}/node.pem"',
            f'tls_key = "{relative}/node.key"',
            f'tls_ca = "{relative}/ca.pem"',
            "require_client_cert = true",
        ]
    print(f"wrote {token_path}" + (" and a CA and certificate" if args.tls else ""))
    print("add to the deployment file (paths relative to it):\n")
    print("\n".join(lines))
    return 0


def _write_owner_only(path: Path, text: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, OWNER_ONLY)
    except FileExistsError:
        raise FileExistsError(f"{path} exists already; it is left as it is") from None
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _make_certificates(directory: Path, hosts: list[str]) -> None:
    """A local CA and a certificate for ``hosts``, signed by it, with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("--tls needs the openssl command (apt-get install openssl)")
    for name in ("ca.key", "ca.pem", "node.key", "node.pem"):
        if (directory / name).exists():
            raise FileExistsError(f"{directory / name} exists already; it is left as it is")
    names = ",".join(
        f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts
    )
    ca_key, ca_pem = directory / "ca.key", directory / "ca.pem"
    key, csr, pem = directory / "node.key", directory / "node.csr", directory / "node.pem"
    extensions = directory / "node.ext"
    extensions.write_text(f"subjectAltName={names}\n")
    steps = [
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
         "-subj", "/CN=millrace local CA", "-keyout", str(ca_key), "-out", str(ca_pem)],
        [openssl, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=millrace",
         "-keyout", str(key), "-out", str(csr)],
        [openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca_pem), "-CAkey", str(ca_key),
         "-CAcreateserial", "-days", "825", "-extfile", str(extensions), "-out", str(pem)],
    ]  # fmt: skip
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"openssl failed: {done.stderr.strip()}")
    for leftover in (csr, extensions, directory / "ca.srl"):
        leftover.unlink(missing_ok=True)
    for secret in (ca_key, key):
        secret.chmod(OWNER_ONLY)
