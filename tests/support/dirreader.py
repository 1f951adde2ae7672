"""A tree reader over a directory on disk, for planning patches without a repository."""

from __future__ import annotations

import stat
from pathlib import Path

from applyonce.core.plan import MODE_EXEC, MODE_FILE, EntryKind


class DirReader:
    """A :class:`~applyonce.plan.TreeReader` over a directory on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _full(self, path: str) -> Path:
        return self.root.joinpath(*path.split("/"))

    def kind(self, path: str) -> EntryKind | None:
        full = self._full(path)
        if full.is_symlink():
            return "symlink"
        if full.is_dir():
            return "dir"
        if full.is_file():
            return "file"
        return None

    def read(self, path: str) -> tuple[bytes, int]:
        full = self._full(path)
        executable = full.stat().st_mode & stat.S_IXUSR
        return full.read_bytes(), MODE_EXEC if executable else MODE_FILE
