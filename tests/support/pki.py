"""A throw-away certificate authority for TLS tests, made with the openssl CLI.

Its keys are ECDSA P-256: TLS verifies them as it does RSA keys, and openssl makes the
three in a hundredth of the CPU time of RSA-2048 (1.1 CPU-s), which every module that
asks for a PKI paid. The shipped script (scripts/extender-certs) still makes RSA keys,
and its own test runs it as shipped."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path  # for 127.0.0.1, signed by the CA
    server_key: Path
    client_cert: Path  # for client authentication, signed by the CA
    client_key: Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(folder: Path) -> Pki:
    ca_key, ca_cert = folder / "ca.key", folder / "ca.crt"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_cert),
    )
    extensions = {"server": "subjectAltName=IP:127.0.0.1", "client": "extendedKeyUsage=clientAuth"}
    for name, extension in extensions.items():
        (folder / f"{name}.ext").write_text(extension + "\n")
        _openssl(
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            f"/CN={name}",
            "-keyout",
            str(folder / f"{name}.key"),
            "-out",
            str(folder / f"{name}.csr"),
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            str(folder / f"{name}.csr"),
            "-CA",
            str(ca_cert),
            "-CAkey",
            str(ca_key),
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            str(folder / f"{name}.ext"),
            "-out",
            str(folder / f"{name}.crt"),
        )
    return Pki(
        ca_cert,
        folder / "server.crt",
        folder / "server.key",
        folder / "client.crt",
        folder / "client.key",
    )
