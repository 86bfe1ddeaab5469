"""Files as a hostile user leaves them: outputs that are inputs' zarr stores, labels that would not reload, a full
disk, arrays of two saves in one store, FIFOs where files belong, links, long non-ASCII names, kills and Ctrl-C
mid-save. Each case with real files, mounts, processes and signals, and each asserts what is left on disk."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, load_model
from ppa_xr.cli import main
from ppa_xr.model import atomic

from .test_files import hidden, listing


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 1] += X[:, 0] ** 2
    return PPA(degree=2, random_state=0).fit(X), PPA(degree=1).fit(X)


@pytest.fixture(scope="module")
def cube_model():
    """A small labelled cube and a model of it."""
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 16, 16))
    values[1] += values[0] ** 2
    cube = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": [1, 2, 3]})
    return cube, cube.ppa.fit(degree=(1, 2), random_state=0)


def finished(target, *args, timeout: float = 30):
    """``target(*args)`` in a thread; what it returned or raised, or a failure (not a hang) if it still runs."""
    out: dict = {}

    def run():
        try:
            out["value"] = target(*args)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"{target.__name__} still running after {timeout} s: it hangs")
    if "error" in out:
        raise out["error"]
    return out.get("value")


# --------------------------------------------------------------------------- outputs never replace a zarr input
def test_write_cube_never_replaces_the_zarr_store_it_reads(tmp_path, cube_model):
    cube, model = cube_model
    (tmp_path / "outer.zarr").mkdir()
    cube.to_dataset(name="cube").to_zarr(tmp_path / "src.zarr", consolidated=False)
    cube.to_dataset(name="cube").to_zarr(tmp_path / "outer.zarr", group="inner", consolidated=False)
    before = listing(tmp_path)
    lazy = xr.open_zarr(tmp_path / "src.zarr")["cube"]
    with pytest.raises(ValueError, match=r"output .*src.zarr is also an input; write it to another path"):
        ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "src.zarr", overwrite=True)
    with pytest.raises(ValueError, match=r"output .*out.nc lies inside an input \(.*src.zarr\)"):
        ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "src.zarr" / "out.nc")
    grouped = xr.open_zarr(tmp_path / "outer.zarr", group="inner")["cube"]  # the store is the parent of the group read
    with pytest.raises(ValueError, match=r"output .*outer.zarr is also an input"):
        ppa_xr.write_cube(grouped.ppa.transform(model), tmp_path / "outer.zarr", overwrite=True)
    assert listing(tmp_path) == before
    nested = tmp_path / "a.zarr" / "b.zarr"
    cube.to_dataset(name="cube").to_zarr(nested, consolidated=False)
    with pytest.raises(ValueError, match=r"output .*a.zarr holds an input \(.*b.zarr\)"):
        ppa_xr.write_cube(xr.open_zarr(nested)["cube"].ppa.transform(model), tmp_path / "a.zarr", overwrite=True)
    xr.testing.assert_identical(xr.open_zarr(tmp_path / "src.zarr").load(), cube.to_dataset(name="cube"))
    assert ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "out.zarr") == tmp_path / "out.zarr"
