"""ppa_xr where users install it: a read-only install used by another user, numba's cache folder, a damaged
cache, the lower bounds CI pins, and the suite testing the installed package.

The other-user tests run a real copy of the package, made read-only, as user ``nobody`` (``setpriv``), with
only a scratch folder writable; they need root and ``setpriv``, and an interpreter that user can run.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

import ppa_xr
from ppa_xr.core import jit

ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534
PACKAGE = Path(ppa_xr.__file__).resolve().parent

#: calls two compiled loops and prints numba's cache statistics of the outer one
_CALL = """
import numpy as np
from ppa_xr.core import compiled
out = compiled.row_coordinates(np.array([[0.5, -2.0]]), np.array([0.0]), np.array([1.0]))
assert out.shape == (1, 2) and out[0, 0] > 0 > out[0, 1], out
print("hits", sum(compiled.row_coordinates.stats.cache_hits.values()), "path", compiled.row_coordinates.stats.cache_path)
"""


def _site_paths() -> list[str]:
    """Where this interpreter's dependencies live (the folders of ppa_xr's own dependencies)."""
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    return sorted(paths)


def _as_nobody(args: list[str], scratch: Path, extra_env: dict[str, str] | None = None, timeout: int = 600):
    """Run ``args`` as ``nobody`` with an empty environment but for PATH, an unwritable HOME and
    ``TMPDIR=<scratch>/tmp``, from ``scratch``."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "TMPDIR": str(scratch / "tmp"), "LANG": "C.UTF-8"}
    env.update(extra_env or {})
    cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env", "-i"]
    cmd += [f"{k}={v}" for k, v in env.items()] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=scratch)


@pytest.fixture(scope="module")
def read_only_install():
    """A read-only copy of the installed package, a scratch folder that ``nobody`` owns, and an
    interpreter of this Python version that ``nobody`` can run: (python, PYTHONPATH, scratch)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to run the package as another user (the tests do not run as root)")
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to run the package as another user")
    # nobody cannot enter pytest's 0700 temporary folders: a folder of our own, readable by all
    top = Path(tempfile.mkdtemp(prefix="ppa_xr-install-test-"))
    top.chmod(0o755)
    site = top / "site"
    shutil.copytree(PACKAGE, site / "ppa_xr", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".ci" / "smoke.py", top / "smoke.py")
    subprocess.run(["chmod", "-R", "a+rX,a-w", str(site), str(top / "smoke.py")], check=True)
    pythonpath = os.pathsep.join([str(site), *_site_paths()])
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    probe = "import sys, numba, xarray, zarr, sklearn; print(sys.version_info[:2])"  # the dependencies, not ppa_xr
    for python in (sys.executable, shutil.which(f"python{version}"), f"/usr/bin/python{version}"):
        run = _as_nobody([python, "-c", probe], top, {"PYTHONPATH": os.pathsep.join(_site_paths())}) if python else None
        if run is not None and run.stdout.strip() == str(sys.version_info[:2]):
            break
    else:
        pytest.skip(f"no Python {version} with ppa_xr's dependencies that user nobody can run ({sys.executable} and "
                    f"{_site_paths()} must be readable by other users)")
    yield python, pythonpath, top
    shutil.rmtree(top, ignore_errors=True)


def _scratch(top: Path, name: str) -> Path:
    """A fresh scratch folder owned by nobody, with a ``tmp`` folder in it."""
    scratch = top / name
    (scratch / "tmp").mkdir(parents=True)
    for path in (scratch, scratch / "tmp"):
        os.chown(path, NOBODY, NOBODY)
    return scratch


def test_read_only_install_fits_reports_saves_and_loads_as_another_user(read_only_install):
    """A root-owned read-only install used by a user with no writable home: the whole smoke run works, the
    compiled loops are cached in a private temporary folder, and the next session loads them from it."""
    python, pythonpath, top = read_only_install
    scratch = _scratch(top, "smoke")
    run = _as_nobody([python, str(top / "smoke.py"), str(scratch / "out")], scratch, {"PYTHONPATH": pythonpath})
    assert run.returncode == 0, run.stderr[-3000:]
    assert "smoke: ok" in run.stdout and f"ppa_xr from {top / 'site'}" in run.stdout, run.stdout
    assert "CacheWarning" not in run.stderr, run.stderr[-2000:]
    cache = scratch / "tmp" / f"ppa_xr-numba-{NOBODY}"
    info = cache.stat()
    assert info.st_uid == NOBODY and stat.S_IMODE(info.st_mode) == 0o700
    assert list(cache.glob("core_*/compiled.*.nbi")), "nothing was cached"
    again = _as_nobody([python, "-c", _CALL], scratch, {"PYTHONPATH": pythonpath})
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.startswith("hits 1 ") and str(cache) in again.stdout, again.stdout


def test_no_writable_cache_folder_compiles_without_one_and_says_how_to_keep_one(read_only_install):
    """Where every folder is refused (the temporary one was made by another user, so it is passed over and
    left untouched), the loops compile without a cache, with one warning naming NUMBA_CACHE_DIR."""
    python, pythonpath, top = read_only_install
    scratch = _scratch(top, "planted")
    planted = scratch / "tmp" / f"ppa_xr-numba-{NOBODY}"
    planted.mkdir(mode=0o777)  # root's, as another user could have made it
    planted.chmod(0o777)
    run = _as_nobody([python, "-c", _CALL], scratch, {"PYTHONPATH": pythonpath})
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("hits 0 "), run.stdout
    warnings = [line for line in run.stderr.splitlines() if "CacheWarning" in line]
    assert len(warnings) == 1 and "set NUMBA_CACHE_DIR" in warnings[0], run.stderr
    assert list(planted.iterdir()) == []


def _call(tmp_path: Path, cache: Path, code: str = _CALL) -> subprocess.CompletedProcess:
    """:data:`_CALL` (or ``code``) in a fresh interpreter importing the tested ppa_xr, with ``NUMBA_CACHE_DIR=cache``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(PACKAGE.parent)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


@pytest.fixture(scope="module")
def first_cache(tmp_path_factory):
    """The cache a first session wrote into an empty ``NUMBA_CACHE_DIR`` (it compiled: no hits), shared by the
    tests that damage a copy of it."""
    tmp_path = tmp_path_factory.mktemp("first-session")
    cache = tmp_path / "cache"
    first = _call(tmp_path, cache)
    assert first.returncode == 0 and first.stdout.startswith("hits 0 ") and str(cache) in first.stdout, first.stderr[-3000:]
    return cache


@pytest.mark.parametrize("suffix", [".nbi", ".nbc"])
def test_a_damaged_cache_file_is_removed_and_compiled_again(tmp_path, first_cache, suffix):
    """A truncated index or entry of numba's cache (NUMBA_CACHE_DIR honoured) made every later session fail
    with an UnpicklingError naming no file: now the file is removed, named in one warning, and rebuilt."""
    cache = tmp_path / "cache"
    shutil.copytree(first_cache, cache)  # a first session's cache, as it wrote it
    files = sorted(cache.glob(f"*/compiled.row_coordinates-*{suffix}"))
    assert files
    files[0].write_bytes(files[0].read_bytes()[: files[0].stat().st_size // 2])
    damaged = files[0].read_bytes()
    imported = _call(tmp_path, cache, "import ppa_xr; from ppa_xr.core import compiled")  # no loop called: no cache file read
    assert imported.returncode == 0 and "CacheWarning" not in imported.stderr, imported.stderr[-3000:]
    assert files[0].read_bytes() == damaged
    second = _call(tmp_path, cache)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "CacheWarning" in second.stderr and files[0].name in second.stderr, second.stderr
    assert second.stdout.startswith("hits 0 ")
    third = _call(tmp_path, cache)
    assert third.returncode == 0 and "CacheWarning" not in third.stderr and third.stdout.startswith("hits 1 "), third.stderr


def test_an_import_leaves_the_cache_folder_alone(tmp_path):
    """``import ppa_xr`` neither makes nor probes numba's cache folder (numba created and deleted a file in it for each
    of the 60 compiled loops, and every cache file was read for damage: 0.1-0.6 s of an import where the folder holds
    the files of earlier versions, more on a network file system); the first call of a loop does."""
    cache = tmp_path / "cache"
    imported = _call(tmp_path, cache, "import ppa_xr; from ppa_xr.core import compiled")
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert not cache.exists()
    called = _call(tmp_path, cache)
    assert called.returncode == 0 and called.stdout.startswith("hits 0 ") and list(cache.glob("*/compiled.row_coordinates-*.nbi"))


def test_a_numba_cache_dir_that_cannot_be_written_is_named_where_it_is_passed_over(tmp_path):
    """``NUMBA_CACHE_DIR`` naming a file (or a folder this user cannot write): the cache goes to the next folder, and
    one warning names the setting and that folder (it was passed over without a word)."""
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    run = _call(tmp_path, taken)
    assert run.returncode == 0, run.stderr[-3000:]
    warnings = [line for line in run.stderr.splitlines() if "CacheWarning" in line]
    assert len(warnings) == 1 and f"NUMBA_CACHE_DIR={taken} is not a folder" in warnings[0], run.stderr
    assert taken.read_text() == "not a folder"


def test_the_temporary_cache_folder_must_be_this_users_alone(tmp_path):
    """A folder others can write to, or a symlink, is not used for the cache (another user could plant
    files numba would load); a fresh one is made 0700."""
    fresh = tmp_path / "fresh"
    assert jit._writable(fresh, private=True) and stat.S_IMODE(fresh.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert not jit._writable(shared, private=True)
    link = tmp_path / "link"
    link.symlink_to(fresh)
    assert not jit._writable(link, private=True)
    assert jit._writable(shared)  # a folder the user chose (NUMBA_CACHE_DIR) is taken as it is


def test_lower_bound_pins_follow_pyproject():
    """.ci/run's second environment pins each dependency at its lower bound, read from pyproject.toml."""
    run = subprocess.run([sys.executable, str(ROOT / ".ci" / "lower_bounds.py"), str(ROOT)], capture_output=True, text=True, check=True)
    pins = run.stdout.split()
    assert "numpy==1.26" in pins and "threadpoolctl==3.1" in pins and any(p.startswith("dask[array]==") for p in pins)
    text = (ROOT / ".ci" / "run").read_text()
    assert 'python3 -m pip install ".[test]" && python3 -m pytest -q' in text and "lower_bounds.py" in text and "smoke.py" in text


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI installs the package (not editable) and sets CI=true")
def test_ci_tests_the_installed_package():
    """Under CI the suite imports the installed ppa_xr, so a file missing from the wheel fails it."""
    assert ROOT not in PACKAGE.parents, f"ppa_xr was imported from the checkout ({PACKAGE})"
