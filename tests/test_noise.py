"""Noise-adjusted PPA: MNF equivalence with Spectral Python, the shift-difference noise estimate, files, round trips, denoising."""

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, load_model
from ppa_xr.cli import main
from ppa_xr.datasets.synthetic import make_noisy_scene
from ppa_xr.information import information_report, multi_information_reduction
from ppa_xr.cube.noise import shift_difference_covariance
from ppa_xr.cube.inputs import feature_array

from .test_information_truth import gaussian


@pytest.fixture(scope="module")
def scene():
    return make_noisy_scene(48, 48, n_bands=40, random_state=0)


def _pixels(cube: xr.DataArray) -> np.ndarray:
    return cube.transpose("y", "x", "band").values.reshape(-1, cube.sizes["band"])


def test_degree_1_is_spectral_pythons_mnf(scene):
    spectral = pytest.importorskip("spectral")
    image = scene.cube.transpose("y", "x", "band").values
    stats, noise = spectral.calc_stats(image), spectral.noise_from_diffs(image)
    theirs = spectral.mnf(stats, noise)
    X = _pixels(scene.cube)
    model = PPA(degree=1, noise_cov=noise.cov).fit(X)
    ours, reference = model.transform(X), theirs.reduce(image, num=40).reshape(-1, 40)
    ours *= np.sign(np.sum(ours * reference, axis=0))  # components are defined up to sign
    np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-6 * np.abs(reference).max())
    n = len(X)  # spectral's covariance divides by n - 1, ours by n (PPA.explained_variance_)
    np.testing.assert_allclose(1 / ((model.snr_ + 1) * n / (n - 1)), 1 / theirs.napc.eigenvalues, rtol=1e-6)  # noise fractions
    assert np.all(np.diff(model.snr_) <= 0)  # ordered by signal-to-noise ratio


def test_shift_estimate_is_chunk_invariant_and_skips_invalid_pairs(scene):
    cube = feature_array(scene.cube, "band")
    whole = shift_difference_covariance(cube)
    for chunks in ({"x": 7, "y": 13}, {"x": 48, "y": 5, "band": 9}):
        np.testing.assert_allclose(shift_difference_covariance(cube.chunk(chunks)), whole, rtol=1e-12, atol=0)
    holed = cube.copy(data=cube.values.copy())
    holed[:, 10:20, 5] = np.nan  # every pair touching these pixels drops out
    values = holed.transpose("y", "x", "band").values
    pairs = [(values[:, 1:] - values[:, :-1]).reshape(-1, 40), (values[1:] - values[:-1]).reshape(-1, 40)]
    scatter = sum(np.cov(p[np.isfinite(p).all(axis=1)].T, ddof=1) * (np.isfinite(p).all(axis=1).sum() - 1) for p in pairs)
    count = sum(np.isfinite(p).all(axis=1).sum() - 1 for p in pairs)
    np.testing.assert_allclose(shift_difference_covariance(holed.chunk({"x": 16})), scatter / count / 2, rtol=1e-10)
    ratio = np.sqrt(np.diag(whole)) / scene.noise_std  # a smooth scene: the differences are mostly noise
    assert 0.9 < np.median(ratio) < 1.2


def test_cube_fit_with_shift_noise_saves_loads_and_inverts(tmp_path, scene):
    model = scene.cube.chunk({"x": 16}).ppa.fit(noise_cov="shift", random_state=0, n_samples=2000)
    np.testing.assert_allclose(model.noise_cov_, shift_difference_covariance(feature_array(scene.cube, "band")), rtol=1e-12)
    W, N = model.whitening_, model.noise_cov_
    np.testing.assert_allclose(W @ N @ W.T, np.eye(40), atol=1e-9)
    assert model.scale_ is None and model.pca_.noise_cov is not None  # the like-for-like baseline is MNF
    X = _pixels(scene.cube)[:500]
    np.testing.assert_allclose(model.inverse_transform(model.transform(X)), X, rtol=0, atol=1e-9 * np.abs(X).max())
    np.testing.assert_allclose(np.linalg.slogdet(model.jacobian(X[:3]))[1], np.linalg.slogdet(W)[1], rtol=1e-9)
    for name in ("m.nc", "m.zarr"):
        loaded = load_model(model.save(tmp_path / name))
        np.testing.assert_array_equal(loaded.noise_cov_, N)
        np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
        np.testing.assert_array_equal(loaded.snr_, model.snr_)


def test_the_information_measures_count_the_whitening():
    """MNF of Gaussian data leaves uncorrelated Gaussian outputs: it removes the whole total correlation,
    which only holds with the whitening's log-determinant counted."""
    X, tc = gaussian(10, 100_000, 4)
    noise = np.diag(np.linspace(0.1, 1.0, 10))
    model = PPA(degree=1, noise_cov=noise).fit(X[:50_000])
    assert model.params_.log2_det_jacobian() == pytest.approx(-0.5 * np.log2(np.linalg.det(noise)))
    assert multi_information_reduction(X[50_000:], model).total == pytest.approx(tc, rel=0.005)


def test_bad_noise_covariances_are_refused():
    X = np.random.default_rng(0).normal(size=(300, 3))
    with pytest.raises(ValueError, match="standardize=True or noise_cov, not both"):
        PPA(standardize=True, noise_cov=np.eye(3)).fit(X)
    with pytest.raises(ValueError, match=r"noise_cov must be \(3, 3\) for 3 features"):
        PPA(noise_cov=np.eye(2)).fit(X)
    with pytest.raises(ValueError, match="singular or not positive definite.*add a small diagonal"):
        PPA(noise_cov=np.diag([1.0, 1.0, 0.0])).fit(X)
    with pytest.raises(ValueError, match="symmetric"):
        PPA(noise_cov=np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]])).fit(X)
    cube = xr.DataArray(X.T.reshape(3, 15, 20), dims=("band", "y", "x"))
    with pytest.raises(ValueError, match="noise_cov must be 'shift'"):
        cube.ppa.fit(noise_cov="dark")


def test_noise_adjusted_ppa_denoises_at_least_as_well_as_mnf_and_mnf_as_pca():
    """The clean signal is known: each method's error to it on unseen pixels, at the k validated on others."""
    scene = make_noisy_scene(64, 64, n_bands=100, random_state=1)
    X, S = _pixels(scene.cube), _pixels(scene.signal)
    noise = shift_difference_covariance(feature_array(scene.cube, "band"))
    order = np.random.default_rng(1).permutation(len(X))
    fit, val, test = order[:2500], order[2500:3300], order[3300:]

    def best(model):
        model.fit(X[fit])
        errors = [[np.mean(np.sum((model.reconstruct(X[i], k) - S[i]) ** 2, axis=1)) for k in range(1, 12)] for i in (val, test)]
        return errors[1][int(np.argmin(errors[0]))]

    pca, mnf = best(PPA(degree=1)), best(PPA(degree=1, noise_cov=noise))
    curved = best(PPA(noise_cov=noise, robust=True, random_state=0))
    assert curved <= mnf <= pca
    assert mnf < 0.5 * pca  # whitening the band-dependent noise is worth most of the error


def test_cli_fit_with_shift_noise(tmp_path, scene, capsys):
    scene.cube.to_dataset().to_netcdf(tmp_path / "scene.nc")
    assert main(["fit", str(tmp_path / "scene.nc"), str(tmp_path / "m.nc"), "--variable", "radiance", "--noise", "shift",
                 "--degree", "1", "--n-samples", "1000"]) == 0
    model = load_model(tmp_path / "m.nc")
    assert model.noise_cov_.shape == (40, 40) and np.all(np.diff(model.snr_) <= 0)
    np.testing.assert_allclose(model.noise_cov_, shift_difference_covariance(feature_array(scene.cube, "band")), rtol=1e-12)
    ratio = np.sqrt(np.diag(model.noise_cov_)) / scene.noise_std  # the scene's known noise, estimated from its neighbours
    assert 0.9 < np.median(ratio) < 1.2
    np.testing.assert_allclose(model.whitening_ @ model.noise_cov_ @ model.whitening_.T, np.eye(40), atol=1e-9)


def test_report_of_a_noise_adjusted_model_shows_snr_and_counts_the_whitening(scene):
    """The report's totals are the reduction of each map on its pixels, log2 |det W| counted (tens of bits here)."""
    X = _pixels(scene.cube)
    model = PPA(degree=(1, 2), noise_cov=shift_difference_covariance(feature_array(scene.cube, "band")), random_state=0).fit(X[:1000])
    held = X[1000:]
    report = information_report(held, model, n_components=2, n_samples=len(held)).compute()
    np.testing.assert_array_equal(report["snr_ppa"].values, model.snr_)
    assert report["snr_ppa"].dims == ("component",) and abs(model.params_.log2_det_jacobian()) > 10
    for method, params in (("ppa", model.params_), ("pca", model.params_.pca())):  # noise-adjusted PPA, and MNF
        expected = multi_information_reduction(held, params).total
        assert float(report[f"total_mi_reduction_{method}"]) == pytest.approx(expected, abs=1e-9)


def test_the_shift_estimate_shares_the_sampling_pass(scene):
    reads = []

    def counted(block):
        if block.size:  # not dask's meta probe
            reads.append(block.shape)
        return block

    source = scene.cube.chunk({"x": 12, "y": 12})  # 16 chunks
    cube = source.copy(data=source.data.map_blocks(counted, dtype=source.dtype))
    model = cube.ppa.fit(noise_cov="shift", degree=1, n_samples=1000, random_state=0)
    assert len(reads) == 16  # every chunk read once, for the sample and the noise together
    np.testing.assert_allclose(model.noise_cov_, shift_difference_covariance(feature_array(scene.cube, "band")), rtol=1e-12)


def test_a_noise_sample_gives_the_covariance(scene):
    rng = np.random.default_rng(3)
    dark = xr.DataArray(rng.normal(size=(40, 30, 30)) * scene.noise_std[:, None, None], dims=("band", "y", "x"),
                        coords={"band": scene.cube.band.values[::-1]})  # the bands in another order: matched by label
    model = scene.cube.ppa.fit(noise_cov=dark, degree=1, n_samples=1000, random_state=0)
    expected = np.cov(_pixels(dark.sel(band=scene.cube.band.values)), rowvar=False)
    np.testing.assert_allclose(model.noise_cov_, expected, rtol=1e-12)
    with pytest.raises(ValueError, match="valid pixels for 40 bands.*more pixels than bands"):
        scene.cube.ppa.fit(noise_cov=dark.isel(x=slice(0, 1), y=slice(0, 20)), degree=1)


def test_a_covariance_given_as_a_dataarray_is_named_as_such(scene):
    """A (d, d) covariance as a DataArray is read as a noise sample: the messages spoke of a dark frame too small, or
    advised dim='dim_0'. It says to pass the covariance as a numpy array."""
    cov = np.diag(scene.noise_std**2)
    bands = scene.cube.band.values
    labelled = r"noise_cov=cov.sel\(band=labels, band2=labels\).values with the cube's labels, e.g. labels=cube.band.values"
    for given, fix in ((xr.DataArray(cov, dims=("band", "band2"), coords={"band": bands, "band2": bands}), labelled),
                       (xr.DataArray(cov), "noise_cov=cov.values")):
        with pytest.raises(ValueError, match=r"the shape of a covariance: pass a covariance as a numpy array.*" + fix):
            scene.cube.ppa.fit(noise_cov=given, degree=1, n_samples=1000)
    with pytest.raises(ValueError, match=r"noise_cov, the noise sample, has no dimension 'band' .* noise.rename\(wl='band'\)"):
        scene.cube.ppa.fit(noise_cov=scene.cube.rename(band="wl"), degree=1, n_samples=1000)  # was: pass dim='wl' (the cube's)


def test_a_labelled_covariance_in_another_order_is_refused(scene):
    """A pandas DataFrame covariance is read by position: labelled in another order than the features it gave each band
    another band's noise, silently. It is refused, saying how to order it; one in the features' order is taken."""
    import pandas as pd

    bands = scene.cube.band.values
    cov = np.diag(scene.noise_std**2)
    reversed_ = pd.DataFrame(cov[::-1, ::-1], index=bands[::-1], columns=bands[::-1])
    with pytest.raises(ValueError, match=r"noise_cov's rows are labelled .*=N.loc\[labels, labels\]"):
        scene.cube.ppa.fit(noise_cov=reversed_, degree=1, n_samples=1000)
    model = scene.cube.ppa.fit(noise_cov=reversed_.loc[bands, bands], degree=1, n_samples=1000, random_state=0)
    np.testing.assert_array_equal(model.noise_cov_, cov)
    names = [f"b{b}" for b in bands]  # scikit-learn names features by string columns only
    X = pd.DataFrame(_pixels(scene.cube), columns=names)
    with pytest.raises(ValueError, match="noise_cov's rows are labelled"):
        PPA(noise_cov=pd.DataFrame(cov[::-1, ::-1], index=names[::-1], columns=names[::-1]), degree=1).fit(X)
    with pytest.raises(ValueError, match="noise_cov's rows are labelled"):  # columns that scikit-learn does not name (ints)
        PPA(noise_cov=reversed_, degree=1).fit(pd.DataFrame(_pixels(scene.cube), columns=bands))
    PPA(noise_cov=pd.DataFrame(cov), degree=1).fit(X)  # no labels (0..d-1): by position, as a numpy array


def test_a_band_without_noise_is_named(scene):
    """A constant band has no shift noise (nor a dark frame's, nor a given matrix's diagonal): the fit's message spoke of
    eigenvalues and a small diagonal to add, not of the band."""
    cube = scene.cube.copy()
    band = cube.band.values[3]
    cube.loc[{"band": band}] = 7.0
    pattern = rf"the noise covariance is 0 \(or below\) on 1 of the 40 features along 'band': \[{band}\].*cube.drop_sel\(band=\[{band}\]\)"
    with pytest.raises(ValueError, match=pattern):
        cube.ppa.fit(noise_cov="shift", degree=1, n_samples=1000)
    cov = np.diag(scene.noise_std**2)
    cov[3, 3] = 0.0
    with pytest.raises(ValueError, match=pattern):
        scene.cube.ppa.fit(noise_cov=cov, degree=1, n_samples=1000)
    cube.drop_sel(band=[band]).ppa.fit(noise_cov="shift", degree=1, n_samples=1000)


def test_a_cube_without_neighbours_says_how_to_give_the_noise(scene):
    one = scene.cube.isel(x=[0], y=[0])
    with pytest.raises(ValueError, match=r"this cube has y: 1, x: 1 .*give a noise covariance instead .* in fit_pooled, leave this cube out"):
        ppa_xr.fit_pooled([scene.cube, one], noise_cov="shift", degree=1, n_samples=1000)


@pytest.mark.parametrize("when", ["time", "acquired"])
def test_shift_differences_are_spatial_in_a_cube_with_time_last(when):
    """A (band, rows, cols, time) cube, its spatial dims not named y/x: the shift differences were taken along its last
    two pixel dims, cols and time, so a scene's noise held the change between dates (210x the noise, silently). A dim
    named time or labelled by dates is no spatial one."""
    scenes = [make_noisy_scene(24, 24, n_bands=5, random_state=seed).cube for seed in range(3)]
    series = xr.concat(scenes, dim=when).rename(y="rows", x="cols").drop_vars(["rows", "cols"], errors="ignore")
    series = series.assign_coords({when: np.array(["2020-01-01", "2020-02-01", "2020-03-01"], dtype="datetime64[ns]")})
    if when != "time":
        series = series.assign_coords({when: series[when].values})
    first = shift_difference_covariance(feature_array(series.transpose(when, "band", "rows", "cols"), "band"))
    last = shift_difference_covariance(feature_array(series.transpose("band", "rows", "cols", when), "band"))
    np.testing.assert_allclose(last, first, rtol=1e-10, atol=1e-12 * np.abs(first).max())
    model = series.transpose("band", "rows", "cols", when).ppa.fit(noise_cov="shift", degree=1, n_samples=1000, random_state=0)
    np.testing.assert_allclose(model.noise_cov_, first, rtol=1e-10, atol=1e-12 * np.abs(first).max())
    with pytest.warns(UserWarning, match=r"other pixel dims \['rows'\].*name the spatial ones y and x"):
        shift_difference_covariance(feature_array(series.transpose("band", "rows", "cols", when).rename({when: "member"}).drop_vars("member"), "band"))
