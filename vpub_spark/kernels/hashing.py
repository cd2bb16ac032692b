"""Hashes of encoded rows, identical on both engines, depending on content only, never
on row order or batching: `content_hash` (splitmix64 over two codes per word: sampling,
the statistical database's updates), `spark_xxhash64` (Spark's own `xxhash64`, which the
JVM computes too: the plan's shards and fingerprint), and `key_hash` (record
identifiers). Decisions and timings: docs/explanation/performance.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_LOW = np.uint64(0xFFFFFFFF)


def content_hash(frame: pd.DataFrame, seed: int, names: Sequence[str] | None = None) -> np.ndarray:
    """uint64 hash of each row's integer codes (of the columns `names`, default all,
    read in place: no copy of the frame) and `seed`; depends on content, never on row
    order."""
    names = list(frame.columns) if names is None else list(names)
    columns = [frame[c].to_numpy() for c in names]
    for name, c in zip(names, columns, strict=True):
        if not np.issubdtype(c.dtype, np.integer):
            raise TypeError(f"content_hash takes integer codes; {name} is {c.dtype}")
    salt = _mix(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    h = np.full(len(frame), salt, dtype=np.uint64)
    for i in range(0, len(columns), 2):
        word = columns[i].astype(np.uint64) & _LOW
        if i + 1 < len(columns):
            word |= (columns[i + 1].astype(np.uint64) & _LOW) << np.uint64(32)
        h += _GOLDEN
        h ^= word
        _mix(h)
    return h


_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
SPARK_SEED = 42
"""The seed of Spark's `xxhash64(...)`."""


def spark_xxhash64(columns: list[np.ndarray], seed: int = SPARK_SEED) -> np.ndarray:
    """Spark's `xxhash64(c1, c2, ...)` of integer columns, as uint64: each column hashed
    into the previous column's hash (the first into `seed`), an int64 column as a
    bigint (`hashLong`), any other as an int (`hashInt`, its low 32 bits). So a hash the
    JVM computes with no Python worker is the same the in-process engine computes;
    a test checks it against Spark.

    Args:
        columns: integer arrays of one length (no nulls).
        seed: the first column's seed (Spark's is 42).

    Returns:
        The hashes, uint64 (Spark's bigint, viewed unsigned).
    """
    h = np.full(len(columns[0]) if columns else 0, seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for c in columns:
            if c.dtype == np.int64 or c.dtype == np.uint64:
                h = hash_long(c.view(np.uint64), h)
            else:  # an int: its low 32 bits
                low = c.astype(np.int32, copy=False).view(np.uint32).astype(np.uint64)
                h = _hash_int(low, h)
    return h


def hash_long(value: np.ndarray, seed: np.ndarray | np.uint64) -> np.ndarray:
    """Spark's `XXH64.hashLong(value, seed)`, elementwise on uint64."""
    with np.errstate(over="ignore"):
        h = seed + (_P5 + np.uint64(8))
        k = value * _P2
        _rotl(k, 31)
        k *= _P1
        h ^= k
        _rotl(h, 27)
        h *= _P1
        h += _P4
        return _fmix(h)


def _hash_int(value: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's `XXH64.hashInt`; `value` (uint64 low 32 bits, a fresh array) is reused."""
    h = seed + (_P5 + np.uint64(4))
    value *= _P1
    h ^= value
    _rotl(h, 23)
    h *= _P2
    h += _P3
    return _fmix(h)


def _rotl(x: np.ndarray, r: int) -> None:
    """Rotate left by `r` bits, in place."""
    high = x >> np.uint64(64 - r)
    x <<= np.uint64(r)
    x |= high


def _fmix(h: np.ndarray) -> np.ndarray:
    """XXH64's final mix, in place."""
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, in place."""
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


KEY_COLUMNS = ("key0", "key1")
_KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def key_hash(labels, secret: int) -> tuple[np.ndarray, np.ndarray]:
    """Two keyed 64-bit hashes of each record identifier (its text): SipHash-2-4
    (pandas' `hash_array`) under two 96-bit keys drawn from HMAC-SHA256 of the store's
    secret. What a private store keeps in place of the identifiers: without the secret
    nobody can test a candidate identifier against it; 128 bits make two identifiers of
    one store collide with probability about n^2 / 2^129."""
    import hashlib
    import hmac

    digest = hmac.new(str(secret).encode(), b"vpub record keys", hashlib.sha256).digest()
    keys = ["".join(_KEY_ALPHABET[b % 64] for b in digest[i : i + 16]) for i in (0, 16)]
    text = np.asarray(labels, dtype=object)
    if len(text) and not isinstance(text[0], str):
        text = text.astype(str).astype(object)
    return tuple(
        pd.util.hash_array(text, hash_key=k, categorize=False).astype(np.uint64) for k in keys
    )
