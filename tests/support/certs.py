"""Test certificates made with the ``openssl`` command line tool: a CA, a server
certificate for the names given, a client certificate (for mutual TLS)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

LOCALHOST = "DNS:localhost,IP:127.0.0.1"


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(
        ["openssl", *args], check=False, cwd=cwd, capture_output=True, text=True
    )
    if result.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)} failed:\n{result.stderr}")


def _leaf(directory: Path, name: str, usages: str, san: str | None) -> None:
    _openssl(
        "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip
    extensions = ["basicConstraints=CA:FALSE", f"extendedKeyUsage={usages}"]
    if san is not None:
        extensions.append(f"subjectAltName={san}")
    (directory / f"{name}.ext").write_text("\n".join(extensions) + "\n")
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-set_serial", str(uuid.uuid4().int >> 64), "-days", "2",
        "-extfile", f"{name}.ext", "-out", f"{name}.pem",
        cwd=directory,
    )  # fmt: skip


def make_certs(directory: Path, server_names: str = LOCALHOST) -> Path:
    """``ca.pem``; ``server.pem``/``.key`` (``server_names``, an openssl subjectAltName;
    server and client use); ``client.pem``/``.key`` (client use only), in ``directory``."""
    if shutil.which("openssl") is None:
        pytest.fail("these tests need the `openssl` command line tool on PATH")
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=millrace test CA",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    _leaf(directory, "server", "serverAuth,clientAuth", server_names)
    _leaf(directory, "client", "clientAuth", None)
    return directory
