"""Releases that prove their integrity (docs/reference/release-format.md): the manifest
lists a SHA-256 of every part file (the audit recomputes them), and a release can be
signed: the final
manifest's bytes signed with an Ed25519 key (`cryptography`), the signature written
beside it as `manifest.json.sig` (base64), the key's id recorded in the manifest
(`signed_by`). Whoever reads the lake checks it with the public key
(`vpub audit REL --verify-key PUB`)."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from ..errors import SpecError
from .layout import MANIFEST

SIGNATURE = f"{MANIFEST}.sig"


def generate_keys(directory: str | Path) -> tuple[Path, Path]:
    """A new Ed25519 key pair: `signing-key.pem` (owner-only) and `verify-key.pem`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    private, public = out / "signing-key.pem", out / "verify-key.pem"
    if private.exists() or public.exists():
        raise SpecError(f"{out} already holds a key pair; choose another directory")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def _load(path: str | Path, private: bool):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

    try:
        data = Path(path).read_bytes()
        key = (
            serialization.load_pem_private_key(data, None)
            if private
            else serialization.load_pem_public_key(data)
        )
    except (OSError, ValueError, TypeError) as e:
        raise SpecError(
            f"{path}: not a readable {'private' if private else 'public'} key ({e})"
        ) from None
    wanted = Ed25519PrivateKey if private else Ed25519PublicKey
    if not isinstance(key, wanted):
        raise SpecError(f"{path}: not an Ed25519 key (make one with `vpub keys generate`)")
    return key


def key_id(public_key) -> str:
    """The first 16 hex digits of the SHA-256 of the raw public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def signer_id(private_key_path: str | Path) -> str:
    return key_id(_load(private_key_path, True).public_key())


def sign(stage: Path, private_key_path: str | Path) -> None:
    """Sign the final manifest's bytes; write the signature beside it."""
    key = _load(private_key_path, True)
    signature = key.sign((stage / MANIFEST).read_bytes())
    (stage / SIGNATURE).write_text(base64.b64encode(signature).decode() + "\n")


def verify(release: str | Path, public_key_path: str | Path) -> tuple[bool, str]:
    """(ok, why): the release's manifest is signed by that key, byte for byte."""
    key = _load(public_key_path, False)
    return signed_by(
        key, Path(release) / MANIFEST, Path(release) / SIGNATURE, "the manifest", "release"
    )


def signed_by(key, signed: Path, signature: Path, what: str, holder: str) -> tuple[bool, str]:
    """(ok, why): file `signed` is, byte for byte, what `key`'s private half signed in
    `signature` (a release's manifest, a store's store.json)."""
    from cryptography.exceptions import InvalidSignature

    if not signature.is_file():
        return False, f"no {signature.name}: the {holder} is not signed"
    try:
        key.verify(base64.b64decode(signature.read_text()), signed.read_bytes())
    except (InvalidSignature, ValueError):
        return False, f"{what} is not what key {key_id(key)} signed"
    return True, f"signed by key {key_id(key)}"
