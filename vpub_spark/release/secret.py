"""The release seed is a secret (the threat model: the adversary knows the algorithm, the
code, the QI values and every public file, never the owner's private state); with it
she could re-run the algorithm over every candidate table and keep those that fit.

How the seed is drawn, proved and kept, and why: docs/explanation/threat-model.md, "The
adversary and the seed".
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from datetime import UTC, datetime
from pathlib import Path

from ..errors import SpecError, VpubError

SEED_BITS = 63
SECRET = "secret"  # what a manifest says where the seed would be
WARNING = (
    "the seed you gave makes this release reproducible: keep it private like a password "
    "(anyone who knows it can re-run the algorithm and narrow the sensitive values); "
    "without --seed / seed_file every run draws a secret seed"
)


def draw_seed() -> int:
    """A fresh secret seed from the operating system's randomness."""
    return secrets.randbits(SEED_BITS)


def owner_only(path: Path, what: str) -> None:
    """Refuse a private file or directory that the group or others may access."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise VpubError(
            f"{path}: mode {mode:o}; the {what} must be owner-only (chmod go-rwx {path})"
        )


def read_seed_file(path: str | Path) -> int:
    """The seed in an owner-only file: one integer, decimal or 0x-hex."""
    p = Path(path)
    if not p.is_file():
        raise SpecError(f"seed_file {p.name}: no such file")
    owner_only(p, "seed file")
    text = p.read_text().strip()
    try:
        seed = int(text, 0)
    except ValueError:
        raise SpecError(f"seed_file {p.name}: expected one integer") from None
    if seed < 0:
        raise SpecError(f"seed_file {p.name}: the seed must be >= 0")
    return seed


def default_private_dir() -> Path:
    """The owner's private directory when the config names none
    (docs/explanation/threat-model.md)."""
    if os.environ.get("VPUB_PRIVATE_DIR"):
        return Path(os.environ["VPUB_PRIVATE_DIR"])
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "vpub"


def keyed(seed: int, message: bytes) -> str:
    """HMAC-SHA256 of `message` under the seed: reveals nothing without the seed."""
    key = seed.to_bytes(16, "big", signed=False)
    return "hmac-sha256:" + hmac.new(key, message, hashlib.sha256).hexdigest()


def proof_message(manifest: dict) -> bytes:
    """What the proof binds: the release id, the source fingerprint, every file's digest."""
    files = {
        f"{e['path']}/{name}": digest
        for t in manifest.get("tables", [])
        for e in t.get("parts", {}).values()
        for name, digest in e.get("sha256", {}).items()
    }
    body = {
        "release_id": manifest.get("release_id"),
        "source": (manifest.get("source") or {}).get("fingerprint"),
        "files": dict(sorted(files.items())),
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def randomness_entry(seed: int, manifest: dict) -> dict:
    """The manifest's `randomness`: that a secret seed was used, and the owner's proof."""
    return {"seed": SECRET, "proof": keyed(seed, proof_message(manifest))}


def proves(seed: int, manifest: dict) -> bool:
    """Whether `seed` made the release whose manifest this is."""
    claimed = (manifest.get("randomness") or {}).get("proof", "")
    return hmac.compare_digest(str(claimed), keyed(seed, proof_message(manifest)))


def write_run_record(private_dir: str | Path, output: str, release_id: str, seed: int) -> Path:
    """Keep the seed in an owner-only run record (docs/explanation/threat-model.md);
    returns its path."""
    from .stores.store import check_store_location

    root = Path(private_dir).expanduser()
    if "://" in str(private_dir):
        raise SpecError(f"private_dir must be a local directory, not {private_dir}")
    check_store_location(root, output, new=False, what="private directory")
    runs = root / "runs"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    runs.mkdir(exist_ok=True, mode=0o700)
    for d in (root, runs):
        owner_only(d, "private directory")
    record = runs / f"{release_id}.json"
    tmp = runs / f".{release_id}.{secrets.token_hex(4)}.tmp"
    body = {
        "release_id": release_id,
        "seed": seed,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(body, f)
    os.replace(tmp, record)
    return record


def read_secret(path: str | Path) -> int:
    """The seed of a run record, a private store's `store.json` or a seed file."""
    p = Path(path)
    if p.is_dir():
        p = p / "store.json"
    if p.suffix != ".json":
        return read_seed_file(p)
    if not p.is_file():
        raise SpecError(f"{p.name}: no such run record or store")
    owner_only(p, "run record")
    try:
        return int(json.loads(p.read_text())["seed"])
    except (ValueError, KeyError, TypeError):
        raise SpecError(f"{p.name}: not a run record (no seed)") from None
