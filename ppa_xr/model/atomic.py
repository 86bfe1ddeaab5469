"""Writing files without losing anything: checked output paths and atomic replacement.

Every file ppa_xr writes (models, CLI outputs) is written to a hidden
temporary sibling, flushed to disk, and then renamed over the target, so a
process killed at any moment leaves either the old file or the new one.
A directory (a zarr store) cannot be renamed over another atomically; the
old one is first renamed to a hidden backup sibling, which
:func:`recover_interrupted` puts back if the process dies before the new one
is in place. Model saves and loads of one path take turns through a lock
file beside it (``.<name>.lock``, :func:`locked`), so the hidden siblings a
save finds are those of killed processes, never of a save still running.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

_TMP, _OLD = ".tmp-", ".old-"


def check_output(path: str | os.PathLike, suffixes: Iterable[str], inputs: Iterable[str | os.PathLike] = (), overwrite: bool = False, what: str = "output") -> Path:
    """Refuse an output path that would lose data: an unknown suffix, an input, an existing path without ``overwrite``, a missing directory."""
    path = Path(path)
    suffixes = tuple(suffixes)
    if path.suffix.lower() not in suffixes:
        raise ValueError(f"{what} {path} must end in one of {', '.join(suffixes)} (the suffix picks the format)")
    target = path.resolve()
    for source in inputs:
        if Path(source).resolve() == target:
            raise ValueError(f"{what} {path} is also an input; write it to another path")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"the directory of {what} {path} does not exist; create it first")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise FileExistsError(f"{what} {path} exists; choose another path or allow replacing it (overwrite=True, CLI: --overwrite)")
    return path


def _fsync_tree(path: Path) -> None:
    """Flush a file, or every file and directory below a directory, to disk."""
    paths = [path] if path.is_file() else [Path(root) / name for root, dirs, files in os.walk(path) for name in files + dirs] + [path]
    for item in paths:
        fd = os.open(item, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _siblings(path: Path, marker: str) -> list[Path]:
    return sorted(path.parent.glob(f".{path.name}{marker}*"), key=lambda p: p.stat().st_mtime)


def _remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)


@contextmanager
def locked(path: str | os.PathLike, reading: bool = False):
    """Hold the lock of ``path`` (a ``.<name>.lock`` file beside it; released when the process dies).

    ``reading``: where no lock file can be made (a read-only directory, where
    nothing is being saved either), go on without one.
    """
    path = Path(path)
    lock: FileLock | None = FileLock(path.with_name(f".{path.name}.lock"))
    try:
        lock.acquire()
    except OSError:
        if not reading:
            raise
        lock = None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()


def replace_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write(tmp)`` on a hidden sibling, flush it, and move it to ``path`` (replacing what is there).

    The caller has decided that ``path`` may be replaced (see :func:`check_output`),
    and holds its lock (:func:`locked`) where other processes may save there too.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}{_TMP}{uuid.uuid4().hex[:8]}")
    try:
        write(tmp)
        _fsync_tree(tmp)
        if tmp.is_dir() and path.exists():
            backup = path.with_name(f".{path.name}{_OLD}{uuid.uuid4().hex[:8]}")
            os.replace(path, backup)
            os.replace(tmp, path)
            _fsync_tree(path.parent)
            _remove(backup)
        else:
            os.replace(tmp, path)
            _fsync_tree(path.parent)
    except BaseException:
        if tmp.exists():
            _remove(tmp)
        recover_interrupted(path)
        raise
    for stale in _siblings(path, _TMP) + _siblings(path, _OLD):  # left by processes killed earlier
        _remove(stale)
    return path


def recover_interrupted(path: Path) -> bool:
    """Put back the previous version of a directory whose replacement was interrupted; True if it did."""
    path = Path(path)
    backups = _siblings(path, _OLD)
    if path.exists() or not backups:
        return False
    os.replace(backups[-1], path)
    return True
