"""The same lazy transform under every dask scheduler, on a real LocalCluster, and through a lost worker."""

import subprocess
import sys
import threading
import time

import dask
import numpy as np
import pytest
import xarray as xr

import ppa_xr  # noqa: F401
from ppa_xr import PPA

from .conftest import curved_sample


@pytest.fixture(scope="module")
def setup():
    model = PPA(random_state=0).fit(curved_sample(4000, d=5))
    data = curved_sample(600 * 400, d=5, seed=9).reshape(600, 400, 5).transpose(2, 0, 1).astype(np.float32)
    cube = xr.DataArray(data, dims=("band", "y", "x")).chunk({"y": 100, "x": 100})
    ref = model.transform(data.transpose(1, 2, 0).reshape(-1, 5)).reshape(600, 400, 5).transpose(2, 0, 1)
    return model, cube, ref


@pytest.mark.parametrize("scheduler", ["threads", "processes", "synchronous"])
def test_local_schedulers(setup, scheduler):
    model, cube, ref = setup
    with dask.config.set(scheduler=scheduler):
        out = cube.ppa.transform(model).values
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-6 * np.abs(ref).max())


def test_distributed_local_cluster(setup, cluster):
    distributed = pytest.importorskip("distributed")
    model, cube, ref = setup
    with distributed.Client(cluster):
        assert len(cluster.workers) == 2
        out = cube.ppa.transform(model).values
        sample = cube.ppa.sample(n_samples=5000, random_state=0)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(sample, cube.ppa.sample(n_samples=5000, random_state=0))


def test_writing_a_geotiff_on_a_cluster_with_the_readme_lock(tmp_path, cluster):
    """README's ``to_raster(..., lock=ppa_xr.file_lock())`` works on a distributed cluster (a threading.Lock does not
    travel to the workers) and on the threaded scheduler."""
    distributed = pytest.importorskip("distributed")
    rioxarray = pytest.importorskip("rioxarray")
    from ppa_xr.datasets import open_landsat8_sample

    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    model = cube.ppa.fit(n_samples=3000, random_state=0, degree=2)
    expected = cube.ppa.transform(model, n_components=3, check=False).values
    assert isinstance(ppa_xr.file_lock(), type(threading.Lock()))
    with distributed.Client(cluster):
        assert isinstance(ppa_xr.file_lock(), distributed.Lock)
        cube.ppa.transform(model, n_components=3, check=False).rio.to_raster(tmp_path / "c.tif", lock=ppa_xr.file_lock())
    np.testing.assert_allclose(rioxarray.open_rasterio(tmp_path / "c.tif").values, expected, rtol=1e-6)


def test_losing_a_worker_mid_computation(setup):
    distributed = pytest.importorskip("distributed")
    model, cube, ref = setup
    # a slow source (as a remote read would be), so the kill lands while tasks are pending
    slow = xr.DataArray(cube.data.map_blocks(lambda b: (time.sleep(0.15), b)[1], dtype=cube.dtype), dims=cube.dims)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            future = client.compute(slow.ppa.transform(model).data)
            deadline = time.monotonic() + 60
            while not any(ts.state == "memory" for ts in cluster.scheduler.tasks.values()):
                assert time.monotonic() < deadline, "no task finished"
                time.sleep(0.05)
            victim = next(iter(cluster.workers.values()))
            address = victim.worker_address
            victim.process.process.kill()  # the worker process dies without warning
            out = future.result(timeout=120)
            assert address not in client.scheduler_info()["workers"]  # it really was lost
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-6 * np.abs(ref).max())


def test_geotiff_round_trip(tmp_path):
    rioxarray = pytest.importorskip("rioxarray")
    from ppa_xr.datasets import rgb_byte_path

    cube = rioxarray.open_rasterio(rgb_byte_path(), chunks={"x": 256, "y": 256}, masked=True)
    model = cube.ppa.fit(n_samples=30_000, random_state=0)
    scores = cube.ppa.transform(model)
    path = tmp_path / "scores.tif"
    scores.rio.to_raster(path, lock=threading.Lock(), tiled=True, compress="deflate")
    back = rioxarray.open_rasterio(path, masked=True)
    assert back.shape == scores.shape
    assert back.rio.crs == cube.rio.crs
    assert back.rio.transform().almost_equals(cube.rio.transform(), precision=1e-9)
    assert scores.rio.transform() == cube.rio.transform()
    assert np.isnan(back.rio.encoded_nodata)
    expected = cube.compute().ppa.transform(model).values
    np.testing.assert_array_equal(back.values, expected)
    assert np.isnan(back.values).any() and np.isfinite(back.values).any()



_THREADS_SCRIPT = """
import sys, dask, numpy as np, scipy.linalg, xarray as xr
from threadpoolctl import threadpool_info, threadpool_limits
import ppa_xr
from ppa_xr import PPA

def blas():
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

before = blas()
X = np.random.default_rng(0).normal(size=(40000, 4)) ** 2
cube = xr.DataArray(X.T.reshape(4, 200, 200), dims=("band", "y", "x")).chunk({"y": 50})
model = PPA(degree=2).fit(X)
if sys.argv[1] == "eager":
    model.transform(X)
else:
    with dask.config.set(scheduler=sys.argv[1]):
        cube.ppa.transform(model).values
after = blas()
with threadpool_limits(limits=1, user_api="blas"):
    limited = blas()
    cube.ppa.transform(model).values
    kept = blas()
print(before == after, set(limited.values()) == {1} == set(kept.values()), blas() == before, len(before), before, after)
"""


@pytest.mark.parametrize("scheduler", ["threads", "synchronous", "eager"])
def test_blas_threads_are_left_as_they_were(scheduler):
    """In a fresh process: after a transform every BLAS reports the thread count it had before,
    and the user's own ``threadpool_limits`` still limits them all, also during a computation."""
    run = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, scheduler], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    same, limited, restored, n_libs, *_ = run.stdout.split(" ", 4)
    assert int(n_libs) >= 1
    assert (same, limited, restored) == ("True", "True", "True"), run.stdout
