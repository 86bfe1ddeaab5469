"""Marginal entropies, multi-information reduction (table and per pixel) and the report."""

import sys

import numpy as np
import pytest
import xarray as xr

from ppa_xr import PPA
from ppa_xr.datasets import open_landsat8_sample, open_rgb_byte
from ppa_xr.information import (
    EqualMassBins,
    Histograms,
    PointwiseReduction,
    information_report,
    marginal_entropy,
    multi_information_reduction,
    plot_report,
    summary_table,
)

from .conftest import curved_sample


def test_entropy_by_hand():
    # n = 4 -> 2 bins of width 0.5; p = (1/2, 1/2): plug-in 1 bit, Miller-Madow 1 / (8 ln 2), log2(0.5) = -1
    h = marginal_entropy(np.array([[0.0], [0.0], [1.0], [1.0]]), "histogram")
    assert h[0] == pytest.approx(1 / (8 * np.log(2)), abs=1e-12)
    assert Histograms.fit(np.array([[0.0], [0.0], [1.0], [1.0]])).sample_entropy()[0] == pytest.approx(0.0, abs=1e-12)


def test_entropy_of_known_densities():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(0, 2, 200_000), rng.uniform(0, 8, 200_000)])
    h = marginal_entropy(X)
    assert h[0] == pytest.approx(0.5 * np.log2(2 * np.pi * np.e * 4), abs=0.02)
    assert h[1] == pytest.approx(3.0, abs=0.001)  # reached 0.00018 bits


def test_rotation_of_independent_gaussians():
    """PCA undoes a rotation of independent Gaussians: it removes I(x) = -1/2 log2 det(corr)."""
    rng = np.random.default_rng(1)
    S = rng.normal(size=(200_000, 3)) * [3.0, 1.0, 0.3]
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    X = S @ Q.T
    corr = np.corrcoef(X.T)
    expected = -0.5 * np.log2(np.linalg.det(corr))
    pca = PPA(degree=1).fit(X)
    result = multi_information_reduction(X, pca.transform(X))
    assert result.total == pytest.approx(expected, abs=0.005)  # reached 0.0015 bits
    assert result.per_dimension == pytest.approx(result.total / 3)


def test_ppa_removes_more_redundancy_than_pca_on_curves():
    X = curved_sample(20_000, d=4, noise=0.05)
    ppa = multi_information_reduction(X, PPA(random_state=0).fit(X).transform(X))
    pca = multi_information_reduction(X, PPA(degree=1).fit(X).transform(X))
    assert ppa.total > pca.total + 0.5


@pytest.mark.parametrize("estimator", ["spacing", "histogram"])
def test_pointwise_mean_equals_total(estimator):
    X = curved_sample(5000, d=4)
    model = PPA(random_state=0).fit(X)
    measure = PointwiseReduction.fit(model.params_, X, estimator=estimator)
    per_pixel = measure(X)
    assert per_pixel.shape == (5000,)
    assert np.mean(per_pixel) == pytest.approx(measure.total(), abs=1e-9)  # the maps average to the plug-in total
    reported = multi_information_reduction(X, model.transform(X), estimator).total  # bias-corrected
    assert measure.total() == pytest.approx(reported, abs=0.01)  # the plug-in total against the bias-corrected one: 0.002 (spacing), 0.004 (histogram)


def test_equal_mass_bins_lookup_with_ties_and_pixel_grids():
    rng = np.random.default_rng(3)
    X = np.column_stack([np.round(rng.normal(size=3000) * 3), rng.standard_t(3, size=3000)])  # quantised (ties), heavy tails
    bins = EqualMassBins.fit(X)
    dens = bins.log2_density(X)
    np.testing.assert_allclose(bins.sample_entropy(), -dens.mean(axis=0), rtol=0, atol=1e-12)  # plug-in from bin counts
    by_hand = bins.log_density[0][[np.sum(bins.edges[0, 1:-1] <= v) for v in X[:, 0]]]  # bin = #{interior edges <= v}
    np.testing.assert_array_equal(dens[:, 0], by_hand)
    grid = X[:2400].reshape(40, 60, 2).copy()
    grid[0, 0, 1] = np.nan
    out = bins.log2_density(grid)
    assert out.shape == (40, 60, 2) and np.isnan(out[0, 0, 1]) and out[0, 0, 0] == dens[0, 0]
    np.testing.assert_array_equal(out.reshape(-1, 2)[1:], dens[1:2400])


def test_out_of_range_and_nan_values():
    X = curved_sample(2000, d=3)
    hist = Histograms.fit(X)
    far = np.array([[1e6, 0.0, -1e6], [np.nan, 0.0, 0.0]])
    dens = hist.log2_density(far)
    floor = np.log2(0.5 / (hist.n * hist.width))
    assert dens[0, 0] == pytest.approx(floor[0]) and dens[0, 2] == pytest.approx(floor[2])
    assert np.isnan(dens[1, 0]) and np.isfinite(dens[1, 1:]).all()
    assert (floor < hist.log2_density(X).min(axis=0)).all()


def test_constant_columns_and_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"columns \[1\] are constant"):
        marginal_entropy(np.column_stack([np.arange(10.0), np.ones(10)]))
    with pytest.raises(ValueError, match="same shape"):
        multi_information_reduction(np.zeros((5, 3)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="2-D"):
        marginal_entropy(np.zeros(5))


def test_report_on_a_raster(tmp_path):
    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    report = cube.ppa.information_report(model, n_components=2, n_samples=20_000)
    assert report["mi_reduction_ppa"].chunks is not None  # maps stay lazy
    assert report["mi_reduction_ppa"].dims == ("y", "x") and report["error_pca"].dims == ("y", "x")
    assert report.sizes["component"] == 10
    computed = report.compute()
    assert computed["total_mi_reduction_ppa"] > computed["total_mi_reduction_pca"] > 0
    assert (computed["mse_ppa"][:-1] <= computed["mse_pca"][:-1] * (1 + 1e-9)).all()
    assert float(computed["error_ppa"].mean()) < float(computed["error_pca"].mean())
    assert computed["entropy_input"].dims == ("band",)
    table = summary_table(computed)
    assert "| multi-information reduction (bits) |" in table and table.count("\n") > 10
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = plot_report(computed)
    assert plt.get_fignums() == before  # not registered with pyplot: a notebook draws it once
    fig.savefig(tmp_path / "report.png")
    assert (tmp_path / "report.png").stat().st_size > 10_000
    maps = [ax for ax in fig.axes if ax.get_xlabel() == "x (m)"]
    assert len(maps) == 4 and all(ax.get_ylabel() == "y (m)" for ax in maps)
    assert all(not ax.xaxis.get_major_formatter().get_offset() for ax in maps)  # no stray 1e6 offset
    assert "PPA minus PCA" in maps[1].get_title() and "PPA minus PCA" in maps[3].get_title()
    curve = next(ax for ax in fig.axes if ax.get_xlabel() == "components kept k")
    assert all(float(t).is_integer() for t in curve.get_xticks())


def test_figures_without_matplotlib_say_what_to_install(monkeypatch):
    """Without the plot extra (matplotlib not importable), a figure is refused with the install line."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what Python does for a module that cannot be imported
    with pytest.raises(ImportError, match=r"pip install 'ppa_xr\[plot\]'"):
        plot_report(xr.Dataset(attrs={"n_components": 1}))


def test_summary_of_many_bands_fits_a_screen():
    X = curved_sample(4000, d=30)
    model = PPA(degree=(1, 2), random_state=0).fit(X[:2000])
    table = summary_table(information_report(X[2000:], model, n_components=3))
    assert table.count("reconstruction error per pixel, k =") == 10 and "k = 11 to 29" in table
    assert "mean over k = 1..29, worst k" in table and table.count("\n") < 20


def test_report_maps_are_nan_on_invalid_pixels():
    rgb = open_rgb_byte(chunks={"x": 256, "y": 256})
    model = rgb.ppa.fit(n_samples=20_000, random_state=0)
    report = rgb.ppa.information_report(model, n_components=1, n_samples=20_000).compute()
    invalid = (rgb == 0).any("band").values
    for name in ("mi_reduction_ppa", "mi_reduction_pca", "error_ppa", "error_pca"):
        assert np.isnan(report[name].values[invalid]).all()
        assert np.isfinite(report[name].values[~invalid]).all()


def test_report_on_a_plain_table():
    X = curved_sample(3000, d=4)
    model = PPA(random_state=0).fit(X)
    report = information_report(X, model, n_components=1, n_samples=3000).compute()
    assert report["mi_reduction_ppa"].dims == ("pixel",)
    # over the whole table (the sample is the table) the map averages to the plug-in total, up to
    # the few pixels that rounding in another memory layout moves across a bin edge
    measure = PointwiseReduction.fit(model.params_, X)
    assert float(report["mi_reduction_ppa"].mean()) == pytest.approx(measure.total(), abs=0.01)


def test_a_rank_deficient_sample_is_named_not_measured():
    """Linearly dependent features have infinite multi-information: the report warns that its figures are rounding."""
    X = curved_sample(6000, d=4)
    X = np.column_stack([X, X[:, 0] - X[:, 1]])  # a fifth feature the first two make
    model = PPA(random_state=0).fit(X[:3000])
    with pytest.warns(UserWarning, match="rank 4 of 5 features: its last 1 PCA components hold only rounding"):
        report = information_report(X[3000:], model)
    assert report.attrs["rank"] == 4
    assert information_report(X[3000:, :4], PPA(random_state=0).fit(X[:3000, :4])).attrs["rank"] == 4


def test_report_on_a_scene_fitted_on_every_pixel_falls_back_with_the_bias_stated():
    import warnings

    from ppa_xr.information import MIN_HELD_OUT

    rng = np.random.default_rng(0)
    cube = xr.DataArray(rng.normal(size=(4, 30, 30)) * [[[1]], [[2]], [[3]], [[4]]], dims=("band", "y", "x"))
    model = cube.ppa.fit(random_state=0)  # all 900 pixels: none left to hold out
    with pytest.warns(UserWarning, match=r"only 0 valid pixels of this cube lie outside .* biased up by about d \(d - 1\) / \(4 n ln 2\) = 0.0048 bits"):
        report = cube.ppa.information_report(model)
    assert report.attrs["estimated_on"].startswith("in sample") and report.attrs["sample_size"] == 900
    big = xr.DataArray(rng.normal(size=(4, 60, 60)), dims=("band", "y", "x"))
    fitted = big.ppa.fit(n_samples=3600 - MIN_HELD_OUT + 1, random_state=0)  # one pixel short of a held-out pool
    with pytest.warns(UserWarning, match=f"only {MIN_HELD_OUT - 1} valid pixels of this cube lie outside"):
        big.ppa.information_report(fitted)
    enough = big.ppa.fit(n_samples=1000, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 2,600 held-out pixels, fewer than the default 100,000: no warning unasked
        held = big.ppa.information_report(enough)
    assert held.attrs["estimated_on"].startswith("held out") and held.attrs["sample_size"] == 2600
    with pytest.warns(UserWarning, match=r"only 2600 valid pixels lie outside the model's fitting sample, fewer than n_samples=5000"):
        big.ppa.information_report(enough, n_samples=5000)


@pytest.mark.parametrize("estimator", ["spacing", "histogram"])
def test_weighted_entropies_are_those_of_the_weighted_population(estimator):
    rng = np.random.default_rng(0)
    narrow, wide = rng.normal(0, 1, (20_000, 1)), rng.normal(0, 4, (20_000, 1))
    X = np.vstack([narrow, wide])
    # equal weights are the unweighted estimate, exactly
    np.testing.assert_array_equal(marginal_entropy(X, estimator, weights=np.full(len(X), 3.0)), marginal_entropy(X, estimator))
    # weight 0 on one part: the other part's entropy (a Gaussian of sd 1: 2.047 bits)
    only_narrow = marginal_entropy(X, estimator, weights=np.repeat([1.0, 0.0], 20_000))
    assert only_narrow[0] == pytest.approx(0.5 * np.log2(2 * np.pi * np.e), abs=0.03 if estimator == "spacing" else 0.1)
    # integer weights: the entropy of the rows repeated (jittered below the data's resolution, so they do not tie)
    repeated = np.vstack([narrow] * 3 + [wide])
    repeated = repeated + 1e-9 * rng.normal(size=repeated.shape)
    weighted = marginal_entropy(X, estimator, weights=np.repeat([3.0, 1.0], 20_000))
    assert weighted[0] == pytest.approx(marginal_entropy(repeated, estimator)[0], abs=0.01)


def test_a_weighted_report_is_the_report_of_the_weighted_pixels(landsat):
    model = landsat.isel(x=slice(160, None)).ppa.fit(n_samples=20_000, random_state=0, degree=(1, 2, 3))
    left = (landsat.x < landsat.x[160]).astype(float)  # weight 1 on the left half, 0 on the right (the fitted) half
    weighted = landsat.ppa.information_report(model, n_components=3, weights=left)
    cropped = landsat.isel(x=slice(None, 160)).ppa.information_report(model, n_components=3)
    unweighted = landsat.ppa.information_report(model, n_components=3)
    assert weighted.attrs["weighted"] == 1 and cropped.attrs["weighted"] == 0
    for name in ("total_mi_reduction_ppa", "total_mi_reduction_pca"):
        assert float(weighted[name]) == pytest.approx(float(cropped[name]), abs=0.05)
    np.testing.assert_allclose(weighted.entropy_input, cropped.entropy_input, atol=0.03)
    np.testing.assert_allclose(weighted.mse_ppa, cropped.mse_ppa, rtol=0.03)
    # the right half differs: the unweighted report is not the left half's
    assert np.abs(unweighted.mse_ppa - cropped.mse_ppa).max() > 3 * np.abs(weighted.mse_ppa - cropped.mse_ppa).max()
    ones = landsat.ppa.information_report(model, n_components=3, weights=xr.ones_like(left))
    for name in ("total_mi_reduction_ppa", "entropy_ppa", "variance_ppa", "mse_pca"):
        np.testing.assert_allclose(ones[name], unweighted[name], rtol=1e-9, atol=1e-12)


def test_the_whole_report_written_holds_a_few_chunks_of_maps(tmp_path):
    """``report.to_zarr`` of every variable: each chunk's maps computed once, and only a few alive at a time (the
    four map variables share one task per chunk; an order that wrote one variable through before the next would
    hold every chunk's maps). Counted on the real threaded scheduler, 2 threads."""
    import weakref

    import dask
    from dask.callbacks import Callback

    cube = open_landsat8_sample(chunks={"x": 50, "y": 50})
    model = cube.ppa.fit(n_samples=5_000, random_state=0)
    report = cube.ppa.information_report(model, n_components=2, n_samples=5_000)
    count = {"computed": 0, "alive": 0, "peak": 0}

    def freed():
        count["alive"] -= 1

    def posttask(key, result, dsk, state, worker_id):
        if isinstance(key, tuple) and str(key[0]).startswith("_apply_block"):
            count["computed"] += 1
            count["alive"] += 1
            count["peak"] = max(count["peak"], count["alive"])
            weakref.finalize(result, freed)

    with Callback(posttask=posttask), dask.config.set(scheduler="threads", num_workers=2):
        report.to_zarr(tmp_path / "report.zarr")
    chunks = report["mi_reduction_ppa"].data.npartitions
    assert chunks >= 30 and count["computed"] == chunks
    assert count["peak"] <= 6  # measured 2-3; every chunk's maps would be >= 30
    written = xr.open_zarr(tmp_path / "report.zarr")
    np.testing.assert_array_equal(written["error_pca"].values, report["error_pca"].values)


@pytest.mark.parametrize("seed, cores", [(0, 2), (1, 2), (2, 1)])
def test_the_reports_passes_side_by_side_give_the_same_bits(seed, cores, monkeypatch):
    """The report's passes that run side by side on two threads where two cores are free give the bits they give one
    after another: the two maps' error curves over the sample (with their outputs and squared errors), the three
    density grids, and the sample's three sets of look-ups; the sample's feature-major copy is the sample. The free
    cores (``blas.pair_threads``, read from the load) are set here, so that both ways run on any machine."""
    from concurrent.futures import ThreadPoolExecutor

    from ppa_xr.core import blas, errors, kernels
    from ppa_xr.core.entropy import MapDensities
    from ppa_xr.core.linalg import power_of_two
    from ppa_xr.cube.inputs import model_features
    from ppa_xr.cube.report import REUSE_FEATURES, _report_sample, _sample_maps, _statistics

    d, side, k = REUSE_FEATURES + 6, 50, 3
    cube = xr.DataArray(curved_sample(side * side, d=d, seed=seed).reshape(side, side, d), dims=("y", "x", "band"))
    model = cube.ppa.fit(n_samples=1200, random_state=seed)
    params = model.params_
    da, dim = model_features(cube, model, None)
    sample, _, _ = _report_sample(da, dim, model, None, 0, True)
    monkeypatch.setattr(blas, "pair_threads", lambda: cores)
    _, r_ppa, r_pca, e_ppa, e_pca = errors.compare_errors_and_forward(params, sample, None, k)
    c = 1 / float(power_of_two(np.abs(params.to_fit_space(sample)).max()))
    for method, r, e in ((params, r_ppa, e_ppa), (params.pca(), r_pca, e_pca)):  # one after the other, on this thread
        curve, forward = kernels.error_curve(np.asfortranarray(sample * c), method.scaled(c), with_forward=True)
        np.testing.assert_array_equal(r, forward / c)
        np.testing.assert_array_equal(e, curve[:, k - 1] / c / c)
    _, discrete, _, measures, curves, outputs = _statistics(params, sample, "spacing", 0, for_maps=k)
    np.testing.assert_array_equal(outputs[0], sample.T)
    monkeypatch.setattr(blas, "pair_threads", lambda: 3 - cores)  # the statistics the other way: the same numbers
    _, _, _, other, again, _ = _statistics(params, sample, "spacing", 0, for_maps=k)
    for method in ("ppa", "pca"):
        for name, curve in curves[method].items():
            np.testing.assert_array_equal(again[method][name], curve)
        np.testing.assert_array_equal(other[method].outputs.log_density, measures[method].outputs.log_density)
    alone = MapDensities.of(measures["ppa"], measures["pca"], discrete)
    with ThreadPoolExecutor(2) as pool:
        beside = MapDensities.of(measures["ppa"], measures["pca"], discrete, pool.map)
        maps = _sample_maps(outputs, alone, np.dtype(np.float64), pool.map)
    for grid in ("inputs", "ppa", "pca"):
        np.testing.assert_array_equal(getattr(beside, grid).table, getattr(alone, grid).table)
    np.testing.assert_array_equal(maps, _sample_maps(outputs, alone, np.dtype(np.float64)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_maps_at_the_reports_own_pixels_come_from_its_sample_passes(seed):
    """A float64 cube of ``REUSE_FEATURES`` features or more: at the pixels of the report's own sample the four maps
    are those the statistics' passes over the sample gave (``_sample_maps``), copied bit for bit, so that the maps'
    pass computes only the other pixels; they agree with the maps' own kernel up to rounding (the error maps to
    1e-12 of their scale; a redundancy map moves where that rounding crosses a grid cell's edge, on a few pixels);
    and the maps are the same bit for bit in memory, in any chunks and under any scheduler (which pixels the
    sample holds does not depend on the chunks)."""
    import dask

    from ppa_xr.core.entropy import MapDensities
    from ppa_xr.cube.inputs import model_features
    from ppa_xr.cube.report import REUSE_FEATURES, _pixel_block, _report_sample, _sample_maps, _statistics

    d, side = REUSE_FEATURES, 60
    cube = xr.DataArray(curved_sample(side * side, d=d, seed=seed).reshape(side, side, d), dims=("y", "x", "band"))
    model = cube.ppa.fit(n_samples=1500, random_state=seed)
    k = 3
    maps = ("mi_reduction_ppa", "mi_reduction_pca", "error_ppa", "error_pca")
    got = cube.chunk({"y": 25, "x": 40}).ppa.information_report(model, n_components=k).compute()
    assert got.attrs["estimated_on"].startswith("held out")
    band_first = xr.DataArray(np.ascontiguousarray(cube.transpose("band", "y", "x").values), dims=("band", "y", "x")).chunk({"y": 25, "x": 40})
    for other, scheduler in ((cube, None), (cube.chunk({"y": 7, "x": 60}), "threads"), (cube.chunk({"y": 30}), "synchronous"), (band_first, "threads")):
        with dask.config.set(scheduler=scheduler or "threads"):
            again = other.ppa.information_report(model, n_components=k)[list(maps)].compute()
        for name in maps:
            np.testing.assert_array_equal(again[name].values, got[name].values)
    weights = xr.DataArray(np.linspace(0.5, 2, side), dims="y")  # weighted statistics: the same maps in any chunks
    one, two = (c.ppa.information_report(model, n_components=k, weights=weights)[list(maps)].compute() for c in (cube, cube.chunk({"y": 13})))
    for name in maps:
        np.testing.assert_array_equal(one[name].values, two[name].values)
    da, dim = model_features(cube, model, None)
    sample, index, _ = _report_sample(da, dim, model, None, 0, True)
    _, discrete, _, measures, _, outputs = _statistics(model.params_, sample, "spacing", 0, for_maps=k)
    densities = MapDensities.of(measures["ppa"], measures["pca"], discrete)
    at_sample = np.stack([got[name].values.ravel()[index] for name in maps])
    np.testing.assert_array_equal(at_sample, _sample_maps(outputs, densities, np.dtype(np.float64)))
    own = _pixel_block(sample, measures["ppa"], measures["pca"], k, 1, densities).T  # the maps' own kernel on those pixels
    for row in (2, 3):
        np.testing.assert_allclose(at_sample[row], own[row], rtol=0, atol=1e-12 * own[row].max())
    moved = np.abs(at_sample[:2] - own[:2]) > 1e-9 * np.abs(own[:2]).max()
    assert moved.mean() < 0.02  # measured 0-1% (a cell's edge crossed by rounding)
    assert len(index) > 0.3 * side * side  # the sample is much of the cube: most pixels came from it


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_summary_and_figure_of_a_selection_of_components_label_each_k(seed):
    """A report narrowed to some components (``report.sel(component=[3, 4, 5])``) is summarised and drawn at their own
    k: the rows were numbered 1, 2, ... by position, and the last selected k was dropped as if it were k = d."""
    X = curved_sample(4000, d=6, seed=seed)
    model = PPA(degree=(1, 2), random_state=0).fit(X[:2000])
    report = information_report(X[2000:], model, n_components=2).compute()
    part = report.sel(component=[3, 4, 5])
    table = summary_table(part)
    for k in (3, 4, 5):
        assert f"| reconstruction error per pixel, k = {k} | {float(report.mse_pca.sel(component=k)):.6g} |" in table
    assert "k = 1 |" not in table and "mean over k = 3, 4, 5, worst k" in table
    ratio = 100 * report.mse_ppa.sel(component=[3, 4, 5]) / report.mse_pca.sel(component=[3, 4, 5])
    assert f"(k = {int(ratio.component[int(np.argmax(ratio.values))])}) |" in table
    assert summary_table(report) == summary_table(report.sel(component=slice(None)))  # the whole report: as before
    curve = next(ax for ax in plot_report(part).axes if ax.get_xlabel() == "components kept k")
    for line in curve.get_lines():
        assert list(line.get_xdata()) == [3, 4, 5]
        method = "ppa" if line.get_label() == "PPA" else "pca"
        np.testing.assert_array_equal(line.get_ydata(), report[f"mse_{method}"].sel(component=[3, 4, 5]).values)


def test_principal_curves_are_drawn_over_the_models_features_only():
    """``plot_principal_curves`` drew any table under the model's curves: another column count, or a DataFrame's
    columns in another order, silently. It reads the data as ``transform`` does."""
    import pandas as pd

    from ppa_xr.geometry import plot_principal_curves

    X = pd.DataFrame(curved_sample(1000, d=3), columns=["a", "b", "c"])
    model = PPA(degree=2, configuration="fixed").fit(X)
    plot_principal_curves(model, X)
    with pytest.raises(ValueError, match="same order"):
        plot_principal_curves(model, X[["b", "a", "c"]])
    with pytest.raises(ValueError, match="3 features"):
        plot_principal_curves(PPA(degree=2, configuration="fixed").fit(X.values), np.c_[X.values, X.values[:, :1]])


def test_the_reduction_of_a_model_reads_a_table_as_the_model_does():
    """``multi_information_reduction(X, model)`` took a DataFrame's columns by position: a table of the model's
    features in another order was measured through the map as if in order, silently."""
    import pandas as pd

    X = pd.DataFrame(curved_sample(4000, d=3), columns=["a", "b", "c"])
    model = PPA(degree=2, configuration="fixed").fit(X[:2000])
    held = X[2000:]
    from ppa_xr.core.entropy import multi_information_reduction as of_parameters

    assert multi_information_reduction(held, model).total == of_parameters(held.values, model.params_).total
    with pytest.raises(ValueError, match="same order"):
        multi_information_reduction(held[["c", "a", "b"]], model)


def test_an_unknown_entropy_estimator_is_refused_before_the_sampling_pass(landsat):
    from dask.callbacks import Callback

    model = landsat.ppa.fit(n_samples=2000, random_state=0, configuration="fixed")
    started = []
    with Callback(start=lambda dsk: started.append(len(dsk))):
        with pytest.raises(ValueError, match=r"estimator must be one of \['histogram', 'spacing'\], got 'knn'"):
            landsat.chunk({"x": 160}).ppa.information_report(model, estimator="knn")
    assert started == []  # nothing read: the pass over the cube's chunks would have come first
