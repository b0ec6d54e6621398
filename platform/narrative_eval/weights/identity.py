"""What identifies a model's weights in request-cache keys: a file's sha256 (memoised), a fingerprint of a large
file or a directory, or a hub id at a revision."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path


@cache
def file_digest(path: str, size: int, mtime: float) -> str:
    """sha256 of a weights file (memoised on path, size and mtime)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


# Bytes read from each end of a large weights file for its fingerprint: hashing a 140 GB
# checkpoint in full on every start would cost minutes, while sizes plus both ends plus the
# small files (config, tokenizer, index) pin a checkpoint in practice.
FINGERPRINT_EDGE = 1 << 20
SMALL_FILE = 16 << 20


def _file_fingerprint(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        if size <= SMALL_FILE:
            digest.update(handle.read())
        else:
            digest.update(handle.read(FINGERPRINT_EDGE))
            handle.seek(size - FINGERPRINT_EDGE)
            digest.update(handle.read(FINGERPRINT_EDGE))
    return digest.hexdigest()


def weights_identity(path: str, revision: str | None = None) -> str:
    """Cache identity of local weights (a file or a directory), or of a hub id at a revision."""
    local = Path(path)
    if local.is_file():
        if local.stat().st_size <= SMALL_FILE or local.suffix == ".gguf":
            stat = local.stat()
            return "sha256:" + file_digest(str(local), stat.st_size, stat.st_mtime)
        return "fingerprint:" + _file_fingerprint(local)
    if local.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in local.rglob("*") if p.is_file() and not p.name.startswith(".")):
            digest.update(str(file.relative_to(local)).encode())
            digest.update(_file_fingerprint(file).encode())
        return "fingerprint:" + digest.hexdigest()
    return f"hub:{path}@{revision or 'main'}"
