"""Weights: matched to pixels by label, one check and one scaling everywhere, pinned against repeated rows."""

import warnings

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA
from ppa_xr.core import candidates, checks, errors, kernels
from ppa_xr.core.entropy import Histograms
from ppa_xr.core.ppa import fit_params
from ppa_xr.core.spec import Spec
from ppa_xr.cube.report import _statistics

from .conftest import curved_sample

SEEDS = [0, 1, 2]


def _regional(seed: int) -> tuple[xr.DataArray, xr.DataArray]:
    """A cube on a regional part of a global 3-degree grid whose values change with latitude, and the global cos(lat)."""
    rng = np.random.default_rng(seed)
    lat, lon = np.arange(-90.0, 90.1, 3.0), np.arange(0.0, 120.0, 1.5)
    glob = xr.DataArray(np.cos(np.deg2rad(lat)), dims="lat", coords={"lat": lat})
    region = lat[(lat >= -30) & (lat <= 60)]
    t = rng.uniform(-2, 2, (region.size, lon.size)) + region[:, None] / 40
    values = np.stack([t, t**2, np.sin(2 * t), 0.3 * t**3]) + 0.05 * rng.normal(size=(4, region.size, lon.size))
    cube = xr.DataArray(values, dims=("band", "lat", "lon"), coords={"band": [1, 2, 3, 4], "lat": region, "lon": lon})
    return cube, glob


def _fit(cube, weights, seed):
    return cube.ppa.fit(weights=weights, degree=2, configuration="fixed", n_samples=600, random_state=seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_cube_weights_are_matched_to_pixels_by_label(seed):
    """Reversed, global (longer, shifted) or reordered weights weigh the same pixels as the cube's own cos(lat):
    in the fit, evaluate, the report and a pooled fit (they were read by position: another fit, or the first rows)."""
    cube, glob = _regional(seed)
    own = np.cos(np.deg2rad(cube.lat))
    reference = _fit(cube, own, seed)
    probe = cube.isel(lat=slice(0, 5)).stack(pixel=("lat", "lon")).transpose("pixel", "band").values
    for other in (own.sortby("lat", ascending=False), glob, glob.sortby("lat", ascending=False)):
        np.testing.assert_allclose(_fit(cube, other, seed).transform(probe), reference.transform(probe), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(cube.ppa.evaluate(reference, weights=other, n_samples=None).relative_error,
                                   cube.ppa.evaluate(reference, weights=own, n_samples=None).relative_error, rtol=1e-9)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report, expected = (cube.ppa.information_report(reference, n_components=2, weights=w, held_out=False) for w in (other, own))
        xr.testing.assert_allclose(report.compute(), expected.compute())
        pooled = ppa_xr.fit_pooled([cube, cube.isel(lon=slice(5, None))], weights=other, degree=2, configuration="fixed", random_state=seed)
        alike = ppa_xr.fit_pooled([cube, cube.isel(lon=slice(5, None))], weights=own, degree=2, configuration="fixed", random_state=seed)
        np.testing.assert_allclose(pooled.transform(probe), alike.transform(probe), rtol=1e-9, atol=1e-9)


def test_cube_weights_missing_pixels_or_unlabelled_of_another_size_are_refused():
    cube, glob = _regional(0)
    north = glob.sel(lat=slice(0, 90))
    for call in (lambda w: _fit(cube, w, 0), lambda w: cube.ppa.evaluate(_fit(cube, None, 0), weights=w, n_samples=None),
                 lambda w: ppa_xr.fit_pooled([cube, cube], weights=w)):
        with pytest.raises(ValueError, match=r"weights lack 10 of the cube's 31 'lat' labels \(e.g. -30.0, -27.0, -24.0\)"):
            call(north)
    # without coordinates: by position, where the sizes agree
    bare = xr.DataArray(np.cos(np.deg2rad(cube.lat.values)), dims="lat")
    np.testing.assert_array_equal(_fit(cube, bare, 0).mean_, _fit(cube, np.cos(np.deg2rad(cube.lat)), 0).mean_)
    with pytest.raises(ValueError, match=r"weights along 'lat' have 61 entries and the cube 31.*no 'lat' coordinate"):
        _fit(cube, glob.drop_vars("lat"), 0)
    with pytest.raises(ValueError, match=r"the weights' 'lat' labels repeat"):
        _fit(cube, xr.concat([glob, glob], "lat"), 0)
    for bad in (1.0, np.ones(31), "coslat", [glob.values]):  # not numpy's "'float' object is not iterable"
        with pytest.raises(ValueError, match="weights must be a DataArray over the cube's pixel dimensions"):
            _fit(cube, bad, 0)


def test_cube_weights_read_only_the_sampled_pixels():
    """A lazy weight whose chunks outside the sample would fail is never computed there."""
    dask = pytest.importorskip("dask.array")
    cube, glob = _regional(0)
    sample = cube.isel(lat=slice(0, 10))
    poison = xr.DataArray(dask.from_array(np.cos(np.deg2rad(glob.values)), chunks=1), dims="lat", coords=glob.coords)
    calls = []
    poison = poison.copy(data=poison.data.map_blocks(lambda b, block_info=None: calls.append(block_info[0]["chunk-location"]) or b, dtype=float))
    sample.ppa.fit(weights=poison, degree=1, n_samples=100, random_state=0)
    assert calls and all(glob.lat.values[c[0]] in sample.lat.values for c in calls)


@pytest.mark.parametrize("bad, message", [
    (np.arange(3000).astype("datetime64[ns]"), "got dtype datetime64.*dates or durations"),
    (np.ones(3000).astype("timedelta64[s]"), "got dtype timedelta64.*dates or durations"),
    (np.ones(3000) + 1j, "got dtype complex128"),
    (np.array(["1.0"] * 3000), "got dtype <U3"),
    (np.array([{}] * 3000), "got dtype object"),
    ([[1.0, 2.0], [3.0]] * 1500, "must be one number per row"),
    (np.ones(2999), r"shape \(3000,\), got shape \(2999,\)"),
    (np.ma.masked_array(np.ones(3000), np.arange(3000) % 7 == 0), r"masked array with 429 masked entries.*filled\(0\)"),
])
def test_weights_that_are_not_numbers_get_one_message(curved, bad, message):
    model = PPA(degree=1).fit(curved)
    for call in (lambda: PPA(degree=1).fit(curved, sample_weight=bad), lambda: model.evaluate(curved, sample_weight=bad)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no ComplexWarning on the way
            with pytest.raises((TypeError, ValueError), match=f"sample_weight {'is' if 'masked' in message else ''}.*{message}"):
                call()


def test_bool_weights_are_zero_and_one_and_cube_dates_are_refused(curved):
    keep = np.arange(len(curved)) % 3 > 0
    a = PPA(degree=2, configuration="fixed").fit(curved, sample_weight=keep)
    b = PPA(degree=2, configuration="fixed").fit(curved, sample_weight=keep.astype(float))
    np.testing.assert_array_equal(a.transform(curved), b.transform(curved))
    cube, _ = _regional(0)
    dates = xr.DataArray(np.arange(cube.lat.size).astype("datetime64[D]"), dims="lat", coords={"lat": cube.lat})
    with pytest.raises(TypeError, match="weights.*got dtype datetime64"):
        _fit(cube, dates, 0)
    negative = -xr.ones_like(cube.lat)  # one name for weights read at the sampled pixels, one cube or pooled
    for fit in (lambda: _fit(cube, negative, 0), lambda: ppa_xr.fit_pooled([cube, cube], weights=negative, degree=1, n_samples=300)):
        with pytest.raises(ValueError, match=r"^weights at the sampled pixels must be finite and non-negative"):
            fit()


def test_a_masked_array_is_fitted_and_transformed_without_its_masked_entries(curved):
    mask = np.zeros(curved.shape, bool)
    mask[::5, 1] = True
    masked = np.ma.masked_array(curved, mask)
    with pytest.warns(UserWarning, match=f"X has {mask.any(axis=1).sum()} of 3000 rows with NaN"):
        model = PPA(degree=2, configuration="fixed").fit(masked)
    alone = PPA(degree=2, configuration="fixed").fit(curved[~mask.any(axis=1)])
    np.testing.assert_array_equal(model.transform(curved), alone.transform(curved))
    out = model.transform(masked)
    assert np.isnan(out[mask.any(axis=1)]).all() and np.isfinite(out[~mask.any(axis=1)]).all()
    scores = np.ma.masked_array(np.where(mask, 1e6, model.transform(curved)), mask)  # masked components: their values hidden
    back = model.inverse_transform(scores)  # were inverted as the 1e6 beneath the mask, silently
    assert np.isnan(back[mask.any(axis=1)]).all()
    np.testing.assert_array_equal(back[~mask.any(axis=1)], model.inverse_transform(scores.data[~mask.any(axis=1)]))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("scale", [1e-200, 1e200, 1e306])
def test_weights_of_any_scale_weigh_alike(seed, scale):
    """Weights times 1e-200 .. 1e306 fit and evaluate as the weights themselves (1e306 overflowed the mean:
    'rescale the features', and evaluate gave 100 at every k)."""
    X = curved_sample(3000, seed=seed)
    w = np.random.default_rng(seed).uniform(0.5, 2.0, len(X))
    plain = PPA(random_state=seed).fit(X, sample_weight=w)
    scaled = PPA(random_state=seed).fit(X, sample_weight=w * scale)
    np.testing.assert_allclose(scaled.transform(X), plain.transform(X), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(plain.evaluate(X, sample_weight=w * scale).relative, plain.evaluate(X, sample_weight=w).relative, rtol=1e-9)
    assert plain.evaluate(X, sample_weight=w * scale).relative.min() < 50  # a curve PPA describes


def test_round_off_negatives_are_zero_and_real_ones_refused(curved):
    """cos of float32 latitudes is -4.4e-8 at the poles: weight 0, as a fit without those rows; -1e-3 is refused."""
    lat = np.linspace(-90, 90, len(curved)).astype(np.float32)
    w = np.cos(np.deg2rad(lat))
    assert w.min() < 0
    weighted = PPA(degree=2, configuration="fixed").fit(curved, sample_weight=w)
    clipped = PPA(degree=2, configuration="fixed").fit(curved, sample_weight=np.maximum(w, 0))
    np.testing.assert_array_equal(weighted.transform(curved), clipped.transform(curved))
    cube = xr.DataArray(np.stack([curved[:, j].reshape(60, 50) for j in range(4)]), dims=("band", "lat", "lon"),
                        coords={"lat": np.linspace(-90, 90, 60).astype(np.float32)})
    coslat = np.cos(np.deg2rad(cube.lat))  # float32: -4.4e-8 at the poles
    assert coslat.dtype == np.float32 and coslat.min() < 0
    every = dict(degree=2, configuration="fixed", n_samples=3000, random_state=0)
    np.testing.assert_array_equal(cube.ppa.fit(weights=coslat, **every).mean_, cube.ppa.fit(weights=coslat.clip(min=0), **every).mean_)
    w[10] = -1e-3
    with pytest.raises(ValueError, match=r"1 of 3000 are not \(e.g. -0.001\).*never below 0"):
        PPA(degree=1).fit(curved, sample_weight=w)


def _candidate(rows, row_groups, child, row_weights, unit, **configuration):
    return fit_params(rows, Spec(degree=(1, 2, 3), leading="pca", **configuration), groups=row_groups, rng=child, weights=row_weights)


@pytest.mark.parametrize("seed", SEEDS)
def test_validation_weighs_rows_as_repeated_rows(seed):
    """With groups, integer weights validate as the rows repeated: every candidate's held-out errors
    (ignoring the training rows' weights moved them by up to 23%). The plain family: the robust one's fences
    are the projections' unweighted quartiles, which repeated rows move."""
    X = curved_sample(1200, seed=seed)
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 4, len(X))
    w[w.argmax()] = 25  # a heavy row: weights that matter
    groups = rng.integers(0, 12, len(X))
    weighted = candidates.select(X, _candidate, groups, np.random.default_rng(seed), 10, escalate=False, weights=w.astype(float))
    repeated = candidates.select(np.repeat(X, w, axis=0), _candidate, np.repeat(groups, w), np.random.default_rng(seed), 10, escalate=False)
    assert weighted.choice == repeated.choice and weighted.verdicts.keys() == repeated.verdicts.keys() and weighted.verdicts
    for key, verdict in weighted.verdicts.items():
        np.testing.assert_allclose(verdict.relative, repeated.verdicts[key].relative, rtol=1e-8)
        np.testing.assert_allclose(verdict.se, repeated.verdicts[key].se, rtol=1e-8)
    # the same fit through the estimator, where the validation stays in the plain family: the same configuration, and
    # its fit as the repeated rows' (least squares; the default's curves keep their axes' shares of signal, which
    # count rows as independent evidence, and repeated rows are not)
    model = PPA(random_state=seed).fit(X, groups=groups, sample_weight=w)
    if not model.configuration_["robust"]:
        again = PPA(random_state=seed).fit(np.repeat(X, w, axis=0), groups=np.repeat(groups, w))
        assert model.configuration_ == again.configuration_
        spec = PPA(configuration="fixed", max_curved=model.configuration_["max_curved"])._get_spec()
        weighted = fit_params(X, spec, groups=groups, rng=checks.rng_of(seed), weights=w.astype(float))
        repeats = fit_params(np.repeat(X, w, axis=0), spec, groups=np.repeat(groups, w), rng=checks.rng_of(seed))
        np.testing.assert_allclose(kernels.forward(X, weighted), kernels.forward(X, repeats), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_standard_error_is_the_documented_formula(seed):
    X = curved_sample(2000, seed=seed)
    model = PPA(degree=2, configuration="fixed").fit(X[:1000])
    w = np.random.default_rng(seed).uniform(0, 3, 1000)
    got = model.evaluate(X[1000:], sample_weight=w)
    a = kernels.error_curve(X[1000:], model.params_)[:, :-1]
    b = kernels.error_curve(X[1000:], model.params_.pca())[:, :-1]
    n, v = len(w), w / w.mean()
    r = (v @ a) / (v @ b)
    e = a - r * b
    e -= (v @ e) / n
    se = np.sqrt(n / (n - 1) * (v**2 @ e**2)) / (v @ b)
    np.testing.assert_allclose(got.relative, 100 * r, rtol=1e-10)
    np.testing.assert_allclose(got.se, 100 * se, rtol=1e-10)
    assert errors.compare_errors(model.params_, X[1000:], weights=w * 1e306).se == pytest.approx(100 * se, rel=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_report_variances_and_histograms_are_those_of_repeated_rows(seed):
    X = curved_sample(3000, seed=seed)
    model = PPA(degree=2, configuration="fixed").fit(X)
    w = np.random.default_rng(seed).integers(0, 4, 2000)
    sample = curved_sample(2000, seed=seed + 10)
    weighted = _statistics(model.params_, sample, "histogram", 0, w.astype(float))[4]
    for method, params in (("ppa", model.params_), ("pca", model.params_.pca())):
        R = kernels.forward(sample, params)
        deviations = R - (w @ R) / w.sum()
        np.testing.assert_allclose(weighted[method]["variance"], (w @ deviations**2) / w.sum(), rtol=1e-10)
        np.testing.assert_allclose(weighted[method]["mse"][:-1], (w @ kernels.error_curve(sample, params)[:, :-1]) / w.sum(), rtol=1e-10)
    # histograms of several columns: the counts of the rows repeated, column by column
    w = w + 1  # every row in the range of the bins
    one, many = Histograms.fit(sample, bins=40, weights=w.astype(float)), Histograms.fit(np.repeat(sample, w, axis=0), bins=40)
    np.testing.assert_allclose(one.counts / one.counts.sum(axis=1, keepdims=True), many.counts / many.counts.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(one.entropy(miller_madow=False), many.entropy(miller_madow=False), rtol=1e-12)


def test_one_valid_pixel_says_where_it_came_from():
    """Not scikit-learn's 'Found array with 1 sample(s)': the cube had one valid pixel, or n_samples asked for one."""
    cube = xr.DataArray(np.full((3, 10, 10), np.nan), dims=("band", "y", "x"))
    cube[:, 2, 3] = [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="the cube has only one valid pixel.*nodata"):
        cube.ppa.fit()
    with pytest.raises(ValueError, match=r"the cubes have only one valid pixel"):
        ppa_xr.fit_pooled([cube, cube.where(cube.y > 5)])
    with pytest.raises(ValueError, match=r"n_samples=1 \(ppa-xr --n-samples\) gave a sample of one pixel"):
        cube.fillna(1.0).ppa.fit(n_samples=1)


@pytest.mark.parametrize("seed", SEEDS)
def test_whiten_is_applied_by_the_cube_path_as_by_the_array_path(seed):
    """whiten=True divided model.transform's components by their standard deviations and not cube.ppa.transform's
    (-0.93 against -3476 for one pixel); the inverses undo it alike."""
    cube, _ = _regional(seed)
    cube = (cube * 1000).chunk({"lat": 10})
    model = cube.ppa.fit(whiten=True, degree=2, configuration="fixed", n_samples=600, random_state=seed)
    pixels = cube.stack(pixel=("lat", "lon")).transpose("pixel", "band")
    scores = cube.ppa.transform(model, n_components=4)
    np.testing.assert_allclose(scores.stack(pixel=("lat", "lon")).transpose("pixel", "component").values, model.transform(pixels.values),
                               rtol=1e-9, atol=1e-9)
    assert "units" not in scores.attrs and abs(float(scores.std(("lat", "lon")).isel(component=0)) - 1) < 0.2
    np.testing.assert_allclose(scores.ppa.inverse_transform(model).transpose(*cube.dims), cube, rtol=1e-8, atol=1e-6)
    np.testing.assert_allclose(model.inverse_transform(model.transform(pixels.values)), pixels.values, rtol=1e-8, atol=1e-6)


def test_too_few_samples_of_weight_above_0_are_named_as_such():
    """Weights 0 on all but two samples: the message counted the samples, without a word of weights."""
    X = np.random.default_rng(0).normal(size=(50, 3))
    weights = np.zeros(50)
    weights[:2] = 1.0
    with pytest.raises(ValueError, match=r"only 2 of the 50 samples have a weight above 0, and degree up to 1 needs at least 3"):
        PPA(degree=1).fit(X, sample_weight=weights)


def test_pooled_weights_refused_name_the_cube():
    """One weights DataArray for cubes on other grids: the refusal spoke of "the cube", not of which one."""
    rng = np.random.default_rng(0)
    a = xr.DataArray(rng.normal(size=(3, 20, 20)), dims=("band", "y", "x"), coords={"y": np.arange(20.0), "x": np.arange(20.0)})
    b = a.assign_coords(y=a.y + 100)
    with pytest.raises(ValueError, match=r"cube 2 of 2 \(the one weights DataArray given for every cube: give one per cube"):
        ppa_xr.fit_pooled([a, b], weights=xr.ones_like(a.y), degree=1, n_samples=300)
    with pytest.raises(ValueError, match=r"cube 1 of 2: weights lack 20 of the cube's 20 'y' labels"):
        ppa_xr.fit_pooled([a, b], weights=[xr.ones_like(b.y), xr.ones_like(a.y)], degree=1, n_samples=300)
    ppa_xr.fit_pooled([a, b], weights=[xr.ones_like(a.y), xr.ones_like(b.y)], degree=1, n_samples=300)
