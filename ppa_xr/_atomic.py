"""Writing files without losing anything: checked output paths and atomic replacement.

Every file ppa_xr writes (models, CLI outputs, reports) is written to a
hidden temporary sibling, flushed to disk, and then renamed over the target,
so a process killed at any moment leaves either the old file or the new one.
A directory (a zarr store, a report folder) cannot be renamed over another
atomically; the old one is first renamed to a hidden backup sibling, which
:func:`recover_interrupted` puts back if the process dies before the new one
is in place. Model saves and loads of one path take turns through a lock
file beside it (:func:`locked`), so the hidden siblings a save finds are
those of killed processes, never of a save still running.

Durability costs what was written and nothing else: the new file (or every
file and directory of the new store), then the one directory entry that
changed (the parent directory itself, not what else it holds). Hidden
siblings are found by their exact names (:func:`hidden_name`), never by a
pattern of the target's name, so ``m[1].zarr`` and ``m1.zarr`` never see
each other's temporaries; a name too long to carry the hidden prefix and
suffix within the file system's limit is replaced there by its SHA-256.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

_TMP, _OLD, _LOCK = ".tmp-", ".old-", ".lock"
#: the random part of a temporary's or backup's name: this many hex digits
_TOKEN_LENGTH = 8
_TOKEN = re.compile(f"[0-9a-f]{{{_TOKEN_LENGTH}}}")
#: the longest file name (bytes) where the file system does not say (Linux, macOS, Windows: 255)
NAME_MAX = 255
#: room asked beyond an output's estimated size: file-system blocks, the format's own metadata
SPACE_MARGIN = 1 << 20


def as_path(value: Any, what: str = "path") -> Path:
    """``value`` (a str, bytes or ``os.PathLike``) as a :class:`~pathlib.Path`; anything else is a TypeError naming ``what``."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return Path(os.fsdecode(value))
    raise TypeError(f"{what} must be a path (str, bytes or os.PathLike), got {type(value).__name__}")


def as_paths(value: Any, what: str = "path") -> list[Path]:
    """``value``, one path or a sequence of them, as a list of :class:`~pathlib.Path` (a str alone is one name, not its
    characters as names)."""
    return [as_path(v, what) for v in ([value] if isinstance(value, (str, bytes, os.PathLike)) else value)]


def suffix_of(path: Path, suffixes: Iterable[str], what: str = "output") -> str:
    """The lower-case suffix of ``path`` among ``suffixes``, or a ValueError saying what the name lacks."""
    suffixes = tuple(suffixes)
    if path.name.lower() in suffixes:  # ".nc": a hidden file with no name, whose suffix pathlib does not see
        raise ValueError(f"{what} {path} has no name before its suffix; name it, e.g. {path.with_name('name' + path.name.lower())}")
    if path.suffix.lower() not in suffixes:
        raise ValueError(f"{what} {path} must end in one of {', '.join(suffixes)} (the suffix picks the format)")
    return path.suffix.lower()


def check_output(path: str | os.PathLike, suffixes: Iterable[str], inputs: Iterable[str | os.PathLike] = (), overwrite: bool = False,
                 what: str = "output") -> Path:
    """Refuse an output path that would lose data: an unknown suffix, an input, an existing path without ``overwrite``,
    a missing directory (or a parent that is a file)."""
    path = as_path(path, what)
    suffix_of(path, suffixes, what)
    refuse_inputs(path, inputs, what)
    parent = path.resolve().parent
    if not parent.is_dir():
        state = "is a file, not a directory" if parent.exists() else "does not exist; create it first"
        raise FileNotFoundError(f"the directory of {what} {path} ({parent}) {state}")
    if (path.exists() or path.is_symlink()) and not overwrite:
        raise FileExistsError(f"{what} {path} exists; choose another path or allow replacing it (overwrite=True, CLI: --overwrite)")
    _check_replaceable(path, what)
    check_writable(path, what)
    return path


def check_writable(path: Path, what: str = "output") -> None:
    """An OSError naming the folder where ``path`` is to be written (the nearest that exists: a report's folder is made
    later) when nothing can be created in it (no permission, a read-only file system), found by creating and removing a
    hidden sibling of ``path`` there: checked before any work, as the outputs are, not after the work is done."""
    folder = Path(os.path.abspath(path)).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    probe = _new_sibling(folder / path.name, _TMP)
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as err:
        raise OSError(err.errno, f"{what} {path} cannot be written: nothing can be created in {folder} ({err.strerror}); "
                                 "write it to another folder (nothing was written)") from err
    os.remove(probe)


#: what marks a folder as a zarr store (version 3, version 2 group or array)
_ZARR_MARKS = ("zarr.json", ".zgroup", ".zarray")


def _check_replaceable(path: Path, what: str) -> None:
    """Refuse to overwrite what an output of that kind is not: a folder where a file goes, or at a ``.zarr`` path a file or a
    folder that is not a zarr store (a folder of other files would be replaced whole, and lost)."""
    if not path.exists():
        return
    if path.suffix.lower() == ".zarr":
        if path.is_dir() and any((path / mark).exists() for mark in _ZARR_MARKS):
            if foreign := foreign_entries(path):
                raise FileExistsError(f"{what} {path} is a zarr store holding files zarr does not write ({', '.join(foreign[:5])}"
                                      f"{', ...' if len(foreign) > 5 else ''}); replacing the store would delete them: move them "
                                      "out of it, or write to another path")
            return
        held = "a file" if not path.is_dir() else f"a folder holding {', '.join(sorted(os.listdir(path))[:3]) or 'nothing'}"
        raise FileExistsError(f"{what} {path} is not a zarr store ({held}); overwriting replaces only a zarr store: choose another path")
    if path.is_dir():
        raise FileExistsError(f"{what} {path} is a folder; overwriting replaces only a file: choose another path")


#: the metadata files of a zarr store (v2 and v3) and of each of its arrays
_META = {"zarr.json", ".zattrs", ".zgroup", ".zmetadata", ".zarray"}
#: a chunk's key: ``c/0/1`` (zarr v3) or ``0.1`` (v2)
_CHUNK = re.compile(r"\d+(\.\d+)*")


def foreign_entries(store: Path, allowed: Callable[[str], bool] = lambda name: True) -> list[str]:
    """Everything in a zarr store, at any depth, that zarr does not write for arrays named as ``allowed`` says (a
    model's variables; any name by default): replacing the store would delete it. Zarr writes the store's metadata
    files and, per array, a folder of array metadata and chunks (a store of nested groups is foreign too)."""
    foreign = []
    for entry in sorted(store.iterdir()):
        if entry.name in _META and entry.is_file() and not entry.is_symlink():
            continue
        array = any((entry / meta).is_file() for meta in ("zarr.json", ".zarray"))
        if not (entry.is_dir() and not entry.is_symlink() and allowed(entry.name) and array):
            foreign.append(entry.name)
            continue
        foreign += [str(inner.relative_to(store)) for inner in sorted(entry.rglob("*")) if not _array_entry(inner.relative_to(entry), inner)]
    return foreign


def _array_entry(relative: Path, inner: Path) -> bool:
    """Whether ``inner`` (``relative`` to its array's folder) is what zarr writes there: metadata, or a chunk
    (``c/0/1``, zarr v3; ``0.1``, v2) and the folders holding chunks; never a link."""
    parts = relative.parts
    chunk = parts[0] == "c" and all(part.isdigit() for part in parts[1:])
    return not inner.is_symlink() and (chunk or (len(parts) == 1 and (parts[0] in _META or bool(_CHUNK.fullmatch(parts[0])))))


def refuse_inputs(path: Path, inputs: Iterable[str | os.PathLike], what: str = "output") -> None:
    """A ValueError when ``path`` is one of ``inputs``, holds one (a folder or store that would be replaced), or lies
    inside one (a zarr store, a folder of inputs)."""
    target = path.resolve()
    for source in inputs:
        resolved = as_path(source, "an input").resolve()
        if resolved == target or target in resolved.parents or (resolved in target.parents and resolved.is_dir()):
            how = "is also an input" if resolved == target else \
                f"holds an input ({source})" if target in resolved.parents else f"lies inside an input ({source})"
            raise ValueError(f"{what} {path} {how}; write it to another path")


def special(path: Path) -> str | None:
    """What ``path`` is (after links) when it is neither a regular file nor a directory: ``"a FIFO (named pipe)"``,
    ``"a socket"``, ``"a device"``; None otherwise (a dangling link or a missing path included). Opening a FIFO
    waits for a writer that never comes, so nothing is opened before this says None."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"


def hidden_name(path: Path, marker: str) -> str:
    """The name of ``path``'s hidden sibling of kind ``marker`` without its random part: ``.<name><marker>``,
    or ``.<sha256 of name><marker>`` where the full name with its random part would exceed the file system's limit."""
    name = f".{path.name}{marker}"
    if len(os.fsencode(name)) + _TOKEN_LENGTH <= _name_max(path.parent):
        return name
    return f".{hashlib.sha256(os.fsencode(path.name)).hexdigest()[:40]}{marker}"


def _name_max(folder: Path) -> int:
    """The longest file name ``folder``'s file system takes, in bytes (:data:`NAME_MAX` where it does not say)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return NAME_MAX


def _new_sibling(path: Path, marker: str) -> Path:
    """A new hidden sibling's path: :func:`hidden_name` and a random part."""
    return path.with_name(hidden_name(path, marker) + uuid.uuid4().hex[:_TOKEN_LENGTH])


def _siblings(path: Path, marker: str) -> list[Path]:
    """``path``'s hidden siblings of kind ``marker`` (exactly its own, by name), oldest first."""
    prefix = hidden_name(path, marker)
    try:
        with os.scandir(path.parent) as entries:
            found = [path.with_name(e.name) for e in entries if e.name.startswith(prefix) and _TOKEN.fullmatch(e.name[len(prefix):])]
    except FileNotFoundError:
        return []
    return sorted(found, key=_mtime)


def _mtime(path: Path) -> float:
    """When ``path`` (not what a link points to) last changed."""
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:  # removed meanwhile: first, and gone
        return float("-inf")


def _fsync(path: Path) -> None:
    """Flush one file or directory (its entries) to disk; a file system that cannot flush it has nothing to flush."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def _fsync_written(path: Path) -> None:
    """Flush what was just written at ``path``: the file, or every file and directory of a new store (all of them
    its writer's own: nothing else lies below a fresh temporary)."""
    if not path.is_dir():
        _fsync(path)
        return
    for root, _, files in os.walk(path):
        for name in files:
            _fsync(Path(root, name))
        _fsync(Path(root))


def _remove(path: Path) -> None:
    """Delete a file, a link or a directory tree."""
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)


@contextmanager
def locked(path: str | os.PathLike, reading: bool = False) -> Iterator[None]:
    """Hold the lock of ``path`` (a hidden lock file beside it, :func:`hidden_name`; released when the process dies).

    ``reading``: where no lock file can be made (a read-only directory, where
    nothing is being saved either), go on without one.
    """
    path = as_path(path)
    lock_path = path.with_name(hidden_name(path, _LOCK))
    if lock_path.is_dir() or special(lock_path):
        what = "a directory" if lock_path.is_dir() else special(lock_path)
        raise OSError(errno.EEXIST, f"the lock file of {path} ({lock_path}) is {what}; ppa_xr keeps a plain lock file there "
                                    "while a model is saved or loaded: move it away (it is not ppa_xr's), or use another path")
    lock = FileLock(lock_path)
    try:
        lock.acquire()
    except OSError:
        if not reading:
            raise
    try:
        yield
    finally:
        if lock.is_locked:
            lock.release()


def check_space(path: Path, size: int, what: str = "output") -> None:
    """An OSError (ENOSPC) naming the bytes needed and free when ``path``'s disk lacks room for ``size`` bytes and
    :data:`SPACE_MARGIN`: checked before writing, since a library that meets a full disk may crash (h5py) or
    write a truncated file without an error (GDAL)."""
    needed, free = int(size) + SPACE_MARGIN, shutil.disk_usage(path.parent).free
    if needed > free:
        raise OSError(errno.ENOSPC, f"{what} {path} needs about {needed:,} bytes and its disk has {free:,} free; free some "
                                    "space or write it elsewhere (nothing was written)")


def replace_atomically(path: Path, write: Callable[[Path], None], size: int | None = None, what: str = "output") -> Path:
    """Run ``write(tmp)`` on a hidden sibling, flush it, and move it to ``path`` (replacing what is there).

    The caller has decided that ``path`` may be replaced (see :func:`check_output`),
    and holds its lock (:func:`locked`) where other processes may save there too.
    ``size``: the bytes the write needs at most, checked against the free space
    first (:func:`check_space`); a disk left full by the write is taken as a write
    that did not fit. On any error or interruption the temporary is removed and
    the old ``path`` is where it was; temporaries and backups that killed processes
    left are removed after a write succeeds.
    """
    path = as_path(path)
    if size is not None:
        check_space(path, size, what)
    tmp = _new_sibling(path, _TMP)
    try:
        write(tmp)
        if shutil.disk_usage(path.parent).free == 0:
            raise OSError(errno.ENOSPC, f"the disk of {what} {path} filled up while it was written; free some space or write "
                                        "it elsewhere (the partial file was removed)")
        _fsync_written(tmp)
        if tmp.is_dir() and (path.exists() or path.is_symlink()):
            backup = _new_sibling(path, _OLD)
            os.replace(path, backup)
            os.replace(tmp, path)
            _fsync(path.parent)
            _remove(backup)
        else:
            os.replace(tmp, path)
            _fsync(path.parent)
    except BaseException:
        with contextlib.suppress(OSError):  # never hide why the write failed
            _remove(tmp)
        if not recover_interrupted(path) and path.exists():  # interrupted while the old one was removed: finish that
            with contextlib.suppress(OSError):
                remove_stale(path, _OLD)
        raise
    remove_stale(path)  # left by processes killed earlier
    return path


def remove_stale(path: str | os.PathLike, *markers: str) -> None:
    """Remove the hidden temporaries and backups of ``path`` (of kinds ``markers``: both by default) that interrupted or
    killed writes left, once ``path`` is whole. Call it holding the lock of ``path`` (:func:`locked`): a save in
    progress has siblings too."""
    path = as_path(path)
    for stale in (s for marker in markers or (_TMP, _OLD) for s in _siblings(path, marker)):
        with contextlib.suppress(FileNotFoundError):
            _remove(stale)


def recover_interrupted(path: str | os.PathLike) -> bool:
    """Put back the previous version of a directory whose replacement was interrupted (its newest backup);
    True if it did."""
    path = as_path(path)
    backups = _siblings(path, _OLD)
    if path.exists() or path.is_symlink() or not backups:
        return False
    os.replace(backups[-1], path)
    return True
