"""The sampling pass over many chunks: one graph linear in the chunk count, the same sample as in memory under any
chunking and scheduler, ``max_chunks``' random chunks, and a progress bar of its tasks."""

import re
import warnings

import dask
import numpy as np
import pytest
import xarray as xr

import ppa_xr  # noqa: F401  (the .ppa accessor)
from ppa_xr.cube import sampling

from .conftest import curved_sample


def _cube(seed: int = 0, shape=(60, 50), d: int = 3) -> xr.DataArray:
    """Curved pixels on a grid (band last, as the sampler takes it), a few with a NaN band."""
    values = curved_sample(shape[0] * shape[1], d=d, seed=seed).reshape(*shape, d).astype(np.float32)
    rng = np.random.default_rng(seed)
    values[rng.random(shape) < 0.1, rng.integers(d)] = np.nan
    return xr.DataArray(values, dims=("y", "x", "band"))


def _same(got: sampling.Sample, expected: sampling.Sample) -> None:
    for field in ("values", "keys", "groups", "index"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), err_msg=field)
        assert getattr(got, field).dtype == getattr(expected, field).dtype
    assert got.n_valid == expected.n_valid and got.drawn == expected.drawn


def _tasks(lazy) -> tuple[int, int]:
    """Layers and tasks of a lazy draw's graph."""
    graph = lazy.__dask_graph__()
    return len(graph.layers), len(dict(graph))


@pytest.mark.parametrize("chunks", [(60, 50), (4, 4), (3, 2), (7, 50)])
def test_graph_grows_linearly_with_the_chunks(chunks):
    """Two layers whatever the chunk count (the chunks, fused with the tasks that make them, and a merge tree of
    fan-in up to FAN_IN): a delayed call per chunk and per merge made a layer each, and a graph built in Python
    that grew faster than the chunks."""
    cube = _cube().chunk({"y": chunks[0], "x": chunks[1]})
    count = cube.data.npartitions
    lazy = sampling._lazy_draw(cube, "band", 100, 1, (), None, None)
    layers, tasks = _tasks(lazy)
    merges = sum(-(-count // sampling.FAN_IN**level) for level in range(1, 8) if count > sampling.FAN_IN ** (level - 1))
    assert layers <= 2
    assert tasks <= 2 * count + merges  # a chunk's task and its alias after fusion, and the merges


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 70, 10**12])
def test_same_sample_in_memory_and_in_many_small_chunks(seed, n):
    """Trees of one, two and three levels (1, 195 and 500 chunks), merges that drop rows and a request larger
    than the cube: the sample in memory, bit for bit; a chunk smaller than ``n`` holds no ``n x d`` rows."""
    cube = _cube(seed)
    expected = sampling.sample_features(cube, "band", n, seed, warn=False)
    for chunks, order in (({"y": 4, "x": 4}, ("y", "x", "band")), ({"y": 3, "x": 2}, ("band", "y", "x")), ({"y": 60, "x": 7}, ("y", "band", "x"))):
        chunked = cube.transpose(*order).chunk(chunks)  # features anywhere in the chunk's axes
        _same(sampling.sample_features(chunked, "band", n, seed, warn=False), expected)
    assert len(expected.keys) == min(n, expected.n_valid)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads", "processes", "cluster"])
def test_same_sample_under_every_scheduler(scheduler):
    cube = _cube(3)
    expected = sampling.sample_features(cube, "band", 200, 5)
    chunked = cube.chunk({"y": 4, "x": 5})
    if scheduler == "cluster":
        distributed = pytest.importorskip("distributed")
        with (
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
            distributed.Client(cluster),
        ):
            assert not sampling._local_scheduler()  # no bar of dask's local schedulers on a cluster
            got = sampling.sample_features(chunked, "band", 200, 5)
    else:
        with dask.config.set(scheduler=scheduler):
            assert sampling._local_scheduler()
            got = sampling.sample_features(chunked, "band", 200, 5)
    _same(got, expected)


@pytest.mark.parametrize("seed", [0, 4, 9])
def test_max_chunks_is_the_sample_of_its_random_chunks(seed):
    """``max_chunks`` reads that many chunks, chosen by the generator after the key seed: its sample is the
    in-memory sample of the cube with every other chunk's pixels invalid (keys depend on the pixel alone)."""
    cube = _cube(seed)
    chunked = cube.chunk({"y": 6, "x": 5})
    rng = np.random.default_rng(seed)
    key_seed = sampling._seed(rng)
    blocks = list(np.ndindex(chunked.data.numblocks))
    chosen = [blocks[i] for i in np.sort(rng.choice(len(blocks), 7, replace=False))]
    masked = np.full(cube.shape, np.nan, np.float32)
    for y, x, _ in chosen:
        masked[6 * y : 6 * y + 6, 5 * x : 5 * x + 5] = cube.values[6 * y : 6 * y + 6, 5 * x : 5 * x + 5]
    expected = sampling.sample_features(cube.copy(data=masked), "band", 40, None, seed=key_seed)
    _same(sampling.sample_features(chunked, "band", 40, seed, max_chunks=7), expected)
    assert expected.n_valid < 7 * 30 < cube.sizes["x"] * cube.sizes["y"]


def _bars(text: str, desc: str) -> list[tuple[int, int]]:
    """``(done, total)`` of each refresh of the tqdm bar ``desc`` on stderr."""
    return [(int(done), int(total)) for done, total in re.findall(rf"{desc}:\s+\d+%\|[^|]*\|\s*(\d+)/(\d+)", text)]


def test_progress_bar_covers_the_sampling_pass(capsys):
    """``fit(progress=True)``: a bar of the sampling pass's tasks (every chunk, the merges and the noise estimate's
    tasks computed in the same pass) that reaches its total, then the fit's steps; none without ``progress``."""
    cubes = [_cube(1).chunk({"y": 10, "x": 10}), _cube(2).chunk({"y": 20, "x": 25})]
    chunks = sum(c.data.npartitions for c in cubes)
    ppa_xr.fit_pooled(cubes, dim="band", n_samples=500, random_state=0, degree=1, configuration="fixed", noise_cov="shift")
    assert not _bars(capsys.readouterr().err, "sampling")
    ppa_xr.fit_pooled(cubes, dim="band", n_samples=500, random_state=0, degree=1, configuration="fixed", noise_cov="shift",
                      progress=True)
    bars = _bars(capsys.readouterr().err, "sampling")
    assert bars and bars[-1][0] == bars[-1][1] > 2 * chunks  # each chunk's sample and its noise moments, and the merges


def test_one_progress_bar_where_dask_shows_one():
    """Inside dask's ``ProgressBar`` (the command line's) the sampling pass shows no second bar of the same tasks."""
    from dask.diagnostics import ProgressBar

    assert isinstance(sampling._task_bar(True), sampling._TaskBar)
    with ProgressBar():
        assert not isinstance(sampling._task_bar(True), sampling._TaskBar)
    assert not isinstance(sampling._task_bar(False), sampling._TaskBar)


def test_spatial_blocks_guessed_among_other_pixel_dims_warn_naming_them():
    """A ``(band, rows, cols, member)`` cube's spatial blocks went along its last pixel dims, cols and member, so the
    members of one place fell in other blocks (held out against each other) and rows in none, silently: the degree
    selection warns naming the dims it blocks and the rename to y and x, as the noise estimate does. Named y/x, or a
    single degree (nothing held out), passes quietly."""
    values = curved_sample(20 * 20 * 4, d=3, seed=1).reshape(20, 20, 4, 3)
    cube = xr.DataArray(values, dims=("rows", "cols", "member", "band"))
    fit = dict(n_samples=1000, random_state=0)
    with pytest.warns(UserWarning, match=r"holds out spatial blocks along \['cols', 'member'\].*other pixel dims \['rows'\]"
                                         r".*cube.rename\(\{'cols': 'y', 'member': 'x'\}\)"):
        cube.ppa.fit(**fit)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cube.rename(rows="y", cols="x").ppa.fit(**fit)
        cube.ppa.fit(degree=2, **fit)
