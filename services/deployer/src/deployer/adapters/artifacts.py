"""Build artifacts: a deterministic tar of a commit's tree, named by the SHA-256 of its bytes.

The same tree always packs to the same bytes (entries in path order, mtime 0, owner 0:0, modes 0644 or 0755, no
compression), so the name is the content's: two commits with the same tree share one artifact. An artifact is
written once (to a temporary name, then renamed) and never changed.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path


def pack(files: Iterable[tuple[str, int, bytes]]) -> bytes:
    """The tar of ``files`` (path, git mode, bytes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, mode, data in sorted(files):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o755 if mode & 0o111 else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Artifacts:
    """Artifacts under ``root``, one file per digest."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / f"{name.replace(':', '-')}.tar"

    def store(self, data: bytes) -> str:
        """Keep ``data`` under its digest (once) and return the digest."""
        name = digest(data)
        final = self.path(name)
        if not final.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            scratch = final.with_suffix(f".tmp{os.getpid()}")
            scratch.write_bytes(data)
            os.replace(scratch, final)
        return name
