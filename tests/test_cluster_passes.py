"""Every public pass of the ``.ppa`` accessor on a real ``distributed.LocalCluster`` (worker processes with memory
limits) against the synchronous scheduler: the same values bit for bit, nothing computed before it is asked for, no
large graphs, workers intact and within their limits, outputs written from the cluster, and the sampling pass's
progress bar. The transform's own scheduler tests are in test_schedulers.py."""

import contextlib
import sys
import warnings

import dask
import numpy as np
import pytest
import xarray as xr

import ppa_xr

from .conftest import curved_sample

distributed = pytest.importorskip("distributed")
psutil = pytest.importorskip("psutil")

#: each worker's memory limit: the cubes here are tiny, so a worker near it holds what it should not
MEMORY_LIMIT = 2**30


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes with memory limits, one for the module."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  memory_limit=MEMORY_LIMIT) as cluster, distributed.Client(cluster) as connected:
        yield connected


def cube_of(dtype=np.float32, nodata=None, chunks=None, seed: int = 9) -> xr.DataArray:
    """A curved 5-band cube of 90 x 72 pixels in 3 x 3 chunks (``chunks`` to chunk otherwise), integers scaled to
    digital numbers, ``nodata`` in a corner and declared as a file opened unmasked declares it."""
    ny, nx = 90, 72
    data = curved_sample(ny * nx, d=5, seed=seed).reshape(ny, nx, 5).transpose(2, 0, 1)
    data = np.round((data - data.min()) * 1000).astype(dtype) if np.dtype(dtype).kind in "iu" else data.astype(dtype)
    if nodata is not None:
        data[:, :7, :5] = nodata
        data[2, 40:45, 30:33] = nodata  # pixels with one band missing: gaps for the fill
    cube = xr.DataArray(data, dims=("band", "y", "x"), coords={"band": list("abcde"), "y": 30.0 * np.arange(ny)[::-1], "x": 30.0 * np.arange(nx)},
                        attrs={} if nodata is None else {"_FillValue": nodata})
    return cube.chunk(chunks or {"y": 30, "x": 24})


@contextlib.contextmanager
def on_the_cluster(client):
    """Computations here run on ``client`` (not a scheduler set in dask's configuration), none of them sends a large
    graph, and the workers are the same ones afterwards, each within its memory limit."""
    workers = set(client.scheduler_info()["workers"])
    with warnings.catch_warnings(record=True) as caught, dask.config.set(scheduler=client.get):
        warnings.simplefilter("always")
        yield
    assert not [w for w in caught if "large graph" in str(w.message)], [str(w.message)[:200] for w in caught]
    assert set(client.scheduler_info()["workers"]) == workers, "a worker was lost"
    rss = client.run(lambda: psutil.Process().memory_info().rss)
    assert max(rss.values()) < 0.6 * MEMORY_LIMIT, rss  # below the limit's spill threshold (60%)


def synchronously(func):
    with dask.config.set(scheduler="synchronous"):
        return func()


def same(got, expected) -> None:
    """The same values bit for bit (NaN where NaN), dims, coords and attributes."""
    assert type(got) is type(expected)
    xr.testing.assert_identical(got, expected)


def lazy_passes(cube, model, report: bool = True) -> dict:
    """The maps of ``cube``, lazy, and the information report (its sample drawn now, its maps lazy)."""
    scores = cube.ppa.transform(model, n_components=3)
    filled, mask = cube.ppa.fill(model, return_mask=True)
    maps = {"transform": scores, "inverse_transform": scores.ppa.inverse_transform(model), "reconstruct": cube.ppa.reconstruct(model, 2),
            "reconstruction_error": cube.ppa.reconstruction_error(model, 2), "fill": filled, "fill mask": mask}
    return maps | ({"report": cube.ppa.information_report(model, n_samples=1500)} if report else {})


class Raising(Exception):
    pass


def test_lazy_passes_compute_nothing_until_asked():
    """Every map is a dask graph when it is returned: a scheduler that refuses to run is never called. The fit,
    its noise estimate, ``evaluate`` and the report's sample read the cube in one pass (plus the one pixel that
    tells whether this is the fitting cube), counted."""
    cube = cube_of(np.uint16, nodata=0)
    model = synchronously(lambda: cube.ppa.fit(n_samples=2000, random_state=0, degree=2))
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return dask.get(*args, **kwargs)

    def refusing(*args, **kwargs):
        raise Raising("computed on call")

    report = synchronously(lambda: cube.ppa.information_report(model, n_samples=1500))
    with dask.config.set(scheduler=refusing):
        outputs = lazy_passes(cube, model, report=False)
        outputs |= {f"report {name}": report[name] for name in ("mi_reduction_ppa", "mi_reduction_pca", "error_ppa", "error_pca")}
        outputs["Dataset transform"] = cube.to_dataset("band").ppa.transform(model)
        for name, out in outputs.items():
            assert all(v.chunks is not None for v in (out.data_vars.values() if isinstance(out, xr.Dataset) else [out])), name
    with dask.config.set(scheduler=counting):
        for name, call, passes in (("fit", lambda: cube.ppa.fit(n_samples=2000, random_state=0), 1),
                                   ("fit with noise_cov='shift'", lambda: cube.ppa.fit(n_samples=2000, random_state=0, noise_cov="shift", degree=1), 1),
                                   ("evaluate", lambda: cube.ppa.evaluate(model, n_samples=1500), 2),
                                   ("information_report", lambda: cube.ppa.information_report(model, n_samples=1500), 2)):
            calls.clear()
            call()
            assert len(calls) == passes, (name, len(calls))


def test_the_sampling_bar_follows_the_client_that_computes(monkeypatch, capsys):
    """The sampling pass's bar on a cluster watches the scheduler of the client that computes, which need not be the
    default one (``dask.config.set(scheduler=client.get)`` of a client made with ``set_as_default=False``): it asked the
    default client for its scheduler, and raised "No clients found" (or, with another default client, waited for the
    tasks on the other cluster forever). Where distributed's drawing hooks are missing (they are not public API), the
    fit goes on without the bar, with a warning. The same model as fitted synchronously. Placed before the module's
    ``client`` fixture: no default client exists here."""
    cube = cube_of()
    fit = lambda: cube.ppa.fit(n_samples=2000, random_state=0, degree=1, progress=True)  # noqa: E731
    expected = synchronously(fit)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as other, dask.config.set(scheduler=other.get):
        capsys.readouterr()
        model = fit()
        assert "sampling: 100%" in capsys.readouterr().err
        monkeypatch.setitem(sys.modules, "distributed.diagnostics.progressbar", None)  # a distributed without the module
        with pytest.warns(UserWarning, match="no progress bar of the sampling pass on this cluster"):
            without_bar = fit()
    assert model.params_.digest == without_bar.params_.digest == expected.params_.digest


CASES = {
    "float32 in x/y chunks": dict(dtype=np.float32),
    "uint16 with nodata, chunked along the bands too": dict(dtype=np.uint16, nodata=0, chunks={"band": 2, "y": 30, "x": 24}),
}


@pytest.mark.parametrize("case", CASES)
def test_every_pass_on_a_cluster_is_the_synchronous_one(client, case):
    cube = cube_of(**CASES[case])
    fit = lambda **kw: cube.ppa.fit(n_samples=2000, random_state=0, **kw)  # noqa: E731
    model = synchronously(lambda: fit(degree=2))
    expected = {name: synchronously(out.compute) for name, out in lazy_passes(cube, model).items()}
    expected_evaluate = synchronously(lambda: cube.ppa.evaluate(model, n_samples=1500))
    expected_shift = synchronously(lambda: fit(degree=1, noise_cov="shift"))
    with on_the_cluster(client):
        fitted = fit(degree=2)
        got = {name: out.compute() for name, out in lazy_passes(cube, model).items()}
        got_evaluate = cube.ppa.evaluate(model, n_samples=1500)
        got_shift = fit(degree=1, noise_cov="shift")
        with warnings.catch_warnings():
            warnings.simplefilter("error", ppa_xr.ShiftWarning)
            cube.ppa.transform(model, check=True)  # the shift check's quick sample, on the cluster
    assert fitted.params_.digest == model.params_.digest and fitted.sample_ == model.sample_
    assert got_shift.params_.digest == expected_shift.params_.digest
    np.testing.assert_array_equal(got_shift.noise_cov_, expected_shift.noise_cov_)
    for name in expected:
        same(got[name], expected[name])
    same(got_evaluate, expected_evaluate)
    assert np.isnan(got["transform"].values).any() == ("nodata" in case)


def _estimator_modules() -> list[str]:
    """The modules of scikit-learn and of ppa_xr's estimator this process has imported, and whether ppa_xr's kernels are among its modules."""
    return sorted(name for name in sys.modules if name.split(".")[0] == "sklearn" or name.startswith("ppa_xr.model.estimator")) + \
        ["kernels" if "ppa_xr.core.kernels" in sys.modules else "no kernels"]


def test_workers_import_no_scikit_learn(client):
    """A worker imports ppa_xr to run the cube layer's tasks (the fit's sampling pass, every map, the report's maps), and
    those need neither the estimator nor scikit-learn (0.4 s of a 1.1 s import of ppa_xr): they are imported at the
    estimator's first use, in the client."""
    cube = cube_of(np.uint16, nodata=0)
    with on_the_cluster(client):
        model = cube.ppa.fit(n_samples=2000, degree=2, random_state=0)
        for out in lazy_passes(cube, model).values():
            out.compute()
    assert set(map(tuple, client.run(_estimator_modules).values())) == {("kernels",)}


def test_a_dataset_of_variables_on_a_cluster(client):
    ds = cube_of(np.uint16, nodata=0).to_dataset("band")
    model = synchronously(lambda: ds.ppa.fit(n_samples=2000, random_state=0, degree=2))
    passes = lambda: [ds.ppa.transform(model), ds.ppa.fill(model), ds.ppa.reconstruct(model, 2),  # noqa: E731
                      ds.ppa.transform(model).ppa.inverse_transform(model), ds.ppa.reconstruction_error(model, 2)]
    expected = [synchronously(out.compute) for out in passes()]
    with on_the_cluster(client):
        fitted = ds.ppa.fit(n_samples=2000, random_state=0, degree=2)
        got = [out.compute() for out in passes()]
    assert fitted.params_.digest == model.params_.digest
    for g, e in zip(got, expected):
        same(g, e)


def test_pooled_weighted_and_gappy_fits_on_a_cluster(client):
    """Several cubes pooled, a fit, ``evaluate`` and report weighted by a lazy ``cos(lat)``, a fit with gaps filled."""
    a, b = cube_of(seed=1), cube_of(np.uint16, nodata=0, seed=2, chunks={"y": 45, "x": 36})
    weights = xr.DataArray(np.cos(np.linspace(0, 1.2, a.sizes["y"])), dims="y", coords={"y": a.y}).chunk({"y": 30})
    gappy = a.where(np.random.default_rng(0).random(a.shape) > 0.2)
    weighted = synchronously(lambda: a.ppa.fit(n_samples=2000, random_state=0, degree=2, weights=weights))
    fits = lambda: [ppa_xr.fit_pooled([a, b], n_samples=2000, random_state=0, degree=2),  # noqa: E731
                    a.ppa.fit(n_samples=2000, random_state=0, degree=2, weights=weights),
                    gappy.ppa.fit(n_samples=2000, random_state=0, degree=2, missing="fill")]
    outputs = lambda: [a.ppa.evaluate(weighted, weights=weights, n_samples=1500),  # noqa: E731
                       a.ppa.information_report(weighted, weights=weights, n_samples=1500).compute(), gappy.ppa.fill(weighted).compute()]
    expected_fits, expected = synchronously(fits), synchronously(outputs)
    with on_the_cluster(client):
        got_fits, got = fits(), outputs()
    assert [m.params_.digest for m in got_fits] == [m.params_.digest for m in expected_fits]
    for g, e in zip(got, expected):
        same(g, e)


def test_s_mode_on_a_cluster(client):
    """Maps as samples (time steps), grid cells as features: the fit in the span of its samples, its maps and report."""
    rng = np.random.default_rng(3)
    latent = rng.normal(size=(30, 3))
    patterns = rng.normal(size=(3, 120))
    field = latent @ patterns + 0.3 * latent[:, :1] ** 2 @ patterns[:1] + 0.05 * rng.normal(size=(30, 120))
    sst = xr.DataArray(field.reshape(30, 10, 12).astype(np.float32), dims=("time", "lat", "lon"),
                       coords={"time": np.arange(30), "lat": np.arange(10.0), "lon": np.arange(12.0)})
    cells = sst.stack(cell=("lat", "lon")).chunk({"time": 10, "cell": 40})
    model = synchronously(lambda: cells.ppa.fit(dim="cell", n_samples=20, random_state=0))
    assert model.params_.s_mode
    passes = lambda: [cells.ppa.transform(model), cells.ppa.reconstruct(model, 2), cells.ppa.reconstruction_error(model, 2),  # noqa: E731
                      cells.ppa.fill(model), cells.ppa.information_report(model)]
    expected = [synchronously(out.compute) for out in passes()]
    with on_the_cluster(client):
        fitted = cells.ppa.fit(dim="cell", n_samples=20, random_state=0)
        got = [out.compute() for out in passes()]
    assert fitted.params_.digest == model.params_.digest
    for g, e in zip(got, expected):
        same(g, e)


def test_writing_zarr_netcdf_and_geotiff_from_a_cluster(client, tmp_path):
    rioxarray = pytest.importorskip("rioxarray")
    cube = cube_of(np.uint16, nodata=0).rio.write_crs("EPSG:32633")
    model = synchronously(lambda: cube.ppa.fit(n_samples=2000, random_state=0, degree=2))
    scores = cube.ppa.transform(model, n_components=3)
    expected, report = synchronously(scores.compute), synchronously(cube.ppa.information_report(model, n_samples=1500).compute)
    with on_the_cluster(client):
        scores.to_dataset(name="scores").to_zarr(tmp_path / "scores.zarr")
        scores.to_netcdf(tmp_path / "scores.nc")
        ppa_xr.to_raster(scores, tmp_path / "scores.tif")
        ppa_xr.write_cube(scores, tmp_path / "written.nc")
        lazy_report = cube.ppa.information_report(model, n_samples=1500)
        lazy_report.to_zarr(tmp_path / "report.zarr")
        lazy_report.to_netcdf(tmp_path / "report.nc")
    for back in (xr.open_zarr(tmp_path / "scores.zarr")["scores"], xr.open_dataset(tmp_path / "scores.nc")[scores.name],
                 rioxarray.open_rasterio(tmp_path / "scores.tif", masked=True), xr.open_dataset(tmp_path / "written.nc")[scores.name]):
        np.testing.assert_array_equal(np.asarray(back.values).squeeze(), expected.values)
    for back in (xr.open_zarr(tmp_path / "report.zarr"), xr.open_dataset(tmp_path / "report.nc")):
        for name in ("mi_reduction_ppa", "mi_reduction_pca", "error_ppa", "error_pca", "total_mi_reduction_ppa", "mse_ppa"):
            np.testing.assert_array_equal(back[name].values, report[name].values)


def test_the_progress_bar_covers_the_sampling_pass_on_a_cluster(client, capsys):
    """``progress=True`` shows the sampling pass's tasks on a cluster too (the distributed scheduler feeds the bar),
    then the fit's steps; the model is the one fitted without a bar."""
    cube = cube_of()
    expected = synchronously(lambda: cube.ppa.fit(n_samples=2000, random_state=0, degree=1, noise_cov="shift"))
    capsys.readouterr()
    with on_the_cluster(client):
        model = cube.ppa.fit(n_samples=2000, random_state=0, degree=1, noise_cov="shift", progress=True)
    err = capsys.readouterr().err
    assert "sampling: 100%" in err and "PPA fit" in err, err[-500:]
    assert err.index("sampling") < err.index("PPA fit")
    assert model.params_.digest == expected.params_.digest

