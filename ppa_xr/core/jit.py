"""Where numba keeps the compiled loops between sessions, wherever the package is installed.

:func:`njit` is ``numba.njit(cache=True, nogil=True)`` with a cache folder that works for the user
running it. numba picks a function's cache folder among ``NUMBA_CACHE_DIR`` (``numba.config.CACHE_DIR``),
the ``__pycache__`` beside the source, and its user-wide folder, and raises ``RuntimeError`` where none is
writable (a package installed by root, used by a user whose home is not writable). Here the first writable
folder of

1. ``NUMBA_CACHE_DIR``, where set;
2. ``__pycache__`` beside the source (numba's default);
3. ``$XDG_CACHE_HOME/ppa_xr/numba`` (``~/.cache/ppa_xr/numba``);
4. ``<tempfile.gettempdir()>/ppa_xr-numba-<uid>``, used only when it is a folder of this user's alone
   (created ``0700``; one another user made, or one others can write, is passed over);

is given to numba (as ``numba.config.CACHE_DIR`` while numba finds the function's folder, then restored);
a ``NUMBA_CACHE_DIR`` passed over (a file, a folder this user cannot write) is named in one :class:`CacheWarning`.
With none, the loops are compiled in each session without a cache, and one :class:`CacheWarning` says how
to keep one.

All of this happens at a function's first compile (:class:`FirstUseCache`), not when it is decorated: an
import touches no cache file (numba itself would create and delete a file in the folder for each function
decorated), and a session reads the files of the functions it calls alone.

A cache file that is not a whole pickle stream (a truncated ``.nbi`` index or ``.nbc`` entry, which
numba's loader would fail on at every later call) is removed before numba reads it, so numba
compiles that function again and rewrites it. The files are checked with :func:`pickletools.genops`,
which reads the opcodes without building any object.
"""

from __future__ import annotations

import io
import os
import pickletools
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numba
from numba.core import config as numba_config
from numba.core.caching import FunctionCache, NullCache

#: the environment variable numba reads its cache folder from
ENV = "NUMBA_CACHE_DIR"
#: numba's own choice: the ``__pycache__`` beside the source
IN_TREE = "in-tree"

_config_lock = threading.Lock()


class CacheWarning(UserWarning):
    """numba's disk cache of the compiled loops: none could be kept (every session compiles them again), or a
    damaged file of it was removed."""


def _private_folder(path: Path) -> bool:
    """``path`` (made ``0700`` where missing) is a real folder, not a link, owned by this user, that no one
    else can write to."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    owner = getattr(os, "getuid", lambda: info.st_uid)()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == owner and not info.st_mode & 0o022


def _writable(path: Path, private: bool = False) -> bool:
    """A file can be created in ``path`` (made if missing); with ``private``, only by this user."""
    try:
        if private and not _private_folder(path):
            return False
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _whole_pickles(path: Path, streams: int) -> bool:
    """``path`` holds exactly ``streams`` complete pickle streams (opcodes read, no object built)."""
    data = path.read_bytes()
    buffer = io.BytesIO(data)
    try:
        for _ in range(streams):
            for _op in pickletools.genops(buffer):
                pass
    except (ValueError, EOFError):
        return False
    return buffer.tell() == len(data)


def _remove_broken(folder: Path, pattern: str) -> bool:
    """Remove the cache files ``folder.glob(pattern + suffix)`` that numba could not load (an index is two
    pickle streams, an entry one), with one warning naming them. False where one cannot be removed."""
    broken = [p for suffix, n in ((".nbi", 2), (".nbc", 1)) for p in folder.glob(pattern + suffix) if not _whole_pickles(p, n)]
    for path in broken:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            return False
    if broken:
        names = ", ".join(str(p) for p in broken)
        warnings.warn(f"ppa_xr: removed {len(broken)} damaged numba cache file(s) ({names}); the loops they held compile again", CacheWarning, stacklevel=2)
    return True


def _user_cache_home() -> Path | None:
    """``$XDG_CACHE_HOME``, else ``~/.cache``; None where the home cannot be found."""
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"])
    try:
        return Path.home() / ".cache"
    except RuntimeError:
        return None


def candidates(source: Path) -> list[tuple[str, Path, bool]]:
    """The cache folders tried for the functions of ``source``, in order: (numba's ``CACHE_DIR`` to set,
    the folder the files go in, whether it must be private)."""
    out = []
    if numba_config.CACHE_DIR:
        out.append((numba_config.CACHE_DIR, Path(numba_config.CACHE_DIR), False))
    out.append((IN_TREE, source.parent / "__pycache__", False))
    home = _user_cache_home()
    if home is not None:
        out.append((str(home / "ppa_xr" / "numba"), home / "ppa_xr" / "numba", False))
    uid = getattr(os, "getuid", lambda: "user")()
    out.append((str(Path(tempfile.gettempdir()) / f"ppa_xr-numba-{uid}"), Path(tempfile.gettempdir()) / f"ppa_xr-numba-{uid}", True))
    return out


@lru_cache(maxsize=None)
def cache_dir(source: str) -> str | None:
    """numba's ``CACHE_DIR`` for the functions of the file ``source`` (:data:`IN_TREE`: numba's own folder
    beside it), or None with one :class:`CacheWarning` where no folder is writable."""
    path = Path(source)
    for setting, folder, private in candidates(path):
        if _writable(folder, private):
            if numba_config.CACHE_DIR and setting != numba_config.CACHE_DIR:  # the user's folder passed over: say so
                warnings.warn(f"ppa_xr: {ENV}={numba_config.CACHE_DIR} is not a folder a file can be created in, so numba's "
                              f"compile cache goes to {folder}; set {ENV} to a writable folder", CacheWarning, stacklevel=2)
            return setting
    tried = ", ".join(str(folder) for _, folder, _ in candidates(path))
    warnings.warn(
        f"ppa_xr: no writable folder for numba's compile cache (tried {tried}), so the compiled loops are compiled "
        f"again in every session; set {ENV} to a writable folder to keep a cache", CacheWarning, stacklevel=2,
    )
    return None


@contextmanager
def _numba_cache_dir(setting: str):
    """numba's ``CACHE_DIR`` set to ``setting`` ("" for :data:`IN_TREE`) while numba picks a function's folder."""
    with _config_lock:
        saved = numba_config.CACHE_DIR
        numba_config.CACHE_DIR = "" if setting == IN_TREE else setting
        try:
            yield
        finally:
            numba_config.CACHE_DIR = saved


class FirstUseCache:
    """numba's disk cache of one function (the methods of numba's ``_Cache`` that a dispatcher calls), found at
    the function's first compile: the folder (:func:`cache_dir`), numba's own probe of it and the check of the
    function's files, a damaged one removed (:func:`_remove_broken`), cost an import nothing."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self._func = func
        self._cache: Any = None
        self._enabled = True

    def _found(self) -> Any:
        """numba's cache of the function (a ``FunctionCache``, or a ``NullCache`` where none can be kept), made once."""
        if self._cache is None:
            self._cache = _function_cache(self._func)
            if not self._enabled:
                self._cache.disable()
        return self._cache

    @property
    def cache_path(self) -> str | None:
        return self._found().cache_path

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        return self._found().load_overload(sig, target_context)

    def save_overload(self, sig: Any, data: Any) -> None:
        self._found().save_overload(sig, data)

    def enable(self) -> None:
        self._enabled = True
        if self._cache is not None:
            self._cache.enable()

    def disable(self) -> None:
        self._enabled = False
        if self._cache is not None:
            self._cache.disable()

    def flush(self) -> None:
        self._found().flush()


def _function_cache(func: Callable[..., Any]) -> Any:
    """numba's ``FunctionCache`` of ``func`` in :func:`cache_dir`'s folder, its damaged files removed first; a
    ``NullCache`` (compiled in each session) with one :class:`CacheWarning` where none can be kept."""
    setting = cache_dir(os.path.abspath(func.__code__.co_filename))
    if setting is None:
        return NullCache()
    with _numba_cache_dir(setting):
        try:
            cache = FunctionCache(func)
        except RuntimeError as error:  # numba found no locator after all (the folder changed since)
            warnings.warn(f"ppa_xr: {error}; {func.__name__} compiles without a cache (set {ENV} to keep one)", CacheWarning, stacklevel=2)
            return NullCache()
    # numba's files of the function: ``<module>.<qualname>-<first line>.py<version>.nbi`` and ``.<n>.nbc``
    pattern = f"{Path(func.__code__.co_filename).stem}.{func.__qualname__}-{func.__code__.co_firstlineno}.*"
    if not _remove_broken(Path(cache.cache_path), pattern):
        warnings.warn(f"ppa_xr: a damaged numba cache file of {func.__name__} in {cache.cache_path} cannot be removed, so it "
                      f"compiles without a cache (set {ENV} to a writable folder to keep one)", CacheWarning, stacklevel=2)
        return NullCache()
    return cache


def njit(func: Callable[..., Any], **options: Any) -> Any:
    """``numba.njit(cache=True, nogil=True, **options)(func)``, cached in :func:`cache_dir`'s folder, or compiled
    without a cache where there is none (``func`` compiles, or loads from the cache, on its first call either
    way); the cache is found at that call (:class:`FirstUseCache`)."""
    dispatcher = numba.njit(nogil=True, **options)(func)
    dispatcher._cache = FirstUseCache(func)  # what numba's cache=True sets at once (dispatcher.enable_caching)
    return dispatcher


def inlined(func: Callable[..., Any]) -> Any:
    """:func:`njit` with ``inline="always"``: a helper of a per-pixel loop, compiled into each caller (no call,
    and no reference counting of the arrays it is passed, at each pixel)."""
    return njit(func, inline="always")
