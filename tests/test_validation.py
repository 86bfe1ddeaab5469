"""The default fit's whole-fit validation (``configuration="validated"``, ppa_xr.core.candidates): the truncations
it measures are the capped refits, the guard refuses only on evidence, the choice is refitted exactly and
recorded, and the options that fix the configuration skip it."""

import numpy as np
import pytest

from ppa_xr import PPA, load_model
from ppa_xr.core import kernels
from ppa_xr.core.candidates import judge, truncation_errors
from ppa_xr.core.errors import compare_errors
from ppa_xr.core.ppa import fit_params
from ppa_xr.datasets.synthetic import make_curved_mixture


@pytest.fixture(scope="module")
def heavy_tailed():
    """40 bands with Student-t(2) noise: the fixed fit takes 8 curved steps, the validation keeps 4."""
    return make_curved_mixture(3000, n_bands=40, noise="student", random_state=1).data


@pytest.fixture(scope="module")
def anomalous():
    """30 bands with 1% anomalous pixels: the validation turns to the robust family."""
    return make_curved_mixture(4000, n_bands=30, anomalies=0.01, random_state=0).data


def test_truncation_errors_are_the_capped_refits_errors(heavy_tailed):
    train, held = heavy_tailed[:1500], heavy_tailed[1500:]
    spec = PPA(configuration="fixed").get_spec()
    full = fit_params(train, spec, rng=np.random.default_rng(5))
    curved = len(full.curved_steps())
    assert curved >= 3
    bounds = np.array([0, 400, 700, 1100, 1500])
    measured = truncation_errors(full, train, held, bounds)
    assert measured.shape == (curved + 1, 4, 39)
    for c in range(curved + 1):
        capped = fit_params(train, spec.replace(max_curved=c), rng=np.random.default_rng(5))
        assert len(capped.curved_steps()) == c
        expected = np.add.reduceat(kernels.error_curve(held, capped)[:, :-1], bounds[:-1], axis=0)
        # the held-out projections are float32: 1e-7 of a row's norm each
        np.testing.assert_allclose(measured[c], expected, rtol=1e-5, atol=1e-6 * expected[:, 0].max())


def test_truncation_errors_weigh_the_rows(heavy_tailed):
    train, held = heavy_tailed[:1500], heavy_tailed[1500:1700]
    params = fit_params(train, PPA(configuration="fixed").get_spec(), rng=np.random.default_rng(0))
    bounds = np.array([0, 100, 200])
    weights = np.random.default_rng(1).integers(1, 4, len(held)).astype(float)
    weighted = truncation_errors(params, train, held, bounds, (np.ones(len(train)), weights))
    repeated = truncation_errors(params, train, np.repeat(held, weights.astype(int), axis=0),
                                 np.concatenate([[0], np.cumsum([weights[:100].sum(), weights[100:].sum()])]).astype(int))
    # the sums run in another order (weighted rows against their copies): 3.4e-8 apart at most, measured
    np.testing.assert_allclose(weighted, repeated, rtol=1e-6)


@pytest.mark.parametrize("seed", [0, 3])
def test_truncation_errors_from_moments_are_the_rows_errors(heavy_tailed, seed):
    """The held-out groups' moments, downdated step by step, give the errors of the corrected rows themselves
    (weighted or not), on data far from the origin too: the two ways differ by the rows' float32 projections."""
    offset = heavy_tailed + 1e6 * np.abs(heavy_tailed).max()  # a constant far above the spread
    train, held = offset[:1500], offset[1500:]
    params = fit_params(train, PPA(configuration="fixed").get_spec(), rng=np.random.default_rng(seed))
    assert len(params.curved_steps()) >= 3
    bounds = np.array([0, 300, 700, 1100, 1500])
    for weights in (None, (np.random.default_rng(seed).uniform(0.5, 2, 1500), np.random.default_rng(seed + 1).uniform(0.5, 2, 1500))):
        by_moments = truncation_errors(params, train, held, bounds, weights, moments=True)
        by_rows = truncation_errors(params, train, held, bounds, weights, moments=False)
        np.testing.assert_allclose(by_moments, by_rows, rtol=1e-5, atol=1e-6 * by_rows[:, :, 0].max())


@pytest.mark.parametrize("seed", [0, 1])
def test_per_axis_held_out_errors_are_each_groups_own(seed):
    """robust=True's axis-by-axis errors, one product per fold, are ``w^T G_i w - 2 w^T c_i`` with each group's own
    fold's fit ``w``, axis by axis and candidate by candidate."""
    from ppa_xr.core.degrees import CrossValidation, Folds

    rng = np.random.default_rng(seed)
    groups, K, m = 12, 4, 7
    rows = rng.standard_normal((groups, 30, K))
    gram = rows.transpose(0, 2, 1) @ rows
    cross = rows.transpose(0, 2, 1) @ rng.standard_normal((groups, 30, m))
    folds = Folds(np.arange(0, 30 * groups + 1, 30), rng.permutation(groups) % 3)
    cv = CrossValidation(gram, cross, folds)
    degrees = [1, 2, 3]
    measured = cv.held_out(degrees, per_axis=True)
    for c, g in enumerate(degrees):
        for i in range(groups):
            train = folds.fold != folds.fold[i]
            w = np.linalg.solve(gram[train, : g + 1, : g + 1].sum(axis=0), cross[train, : g + 1].sum(axis=0))
            expected = np.einsum("kj,kl,lj->j", w, gram[i, : g + 1, : g + 1], w) - 2 * np.einsum("kj,kj->j", w, cross[i, : g + 1])
            np.testing.assert_allclose(measured[c, i], expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def _verdict(factors, pca=None):
    pca = np.ones((10, 5)) if pca is None else pca
    candidate = pca.copy()
    candidate[:, 0] *= factors
    return judge(candidate, pca, total=100.0)


def test_the_guard_refuses_only_on_evidence_beyond_the_allowance():
    same = _verdict(1.0)
    assert same.admitted and same.mean == 100 and np.all(same.se == 0)
    assert not _verdict(1.05).admitted  # 5% worse in every group at k = 1
    assert _verdict(1.005).admitted  # within the 1% allowance
    noisy = np.tile([0.2, 1.9], 5)  # 5% worse on average, but the groups disagree
    verdict = _verdict(noisy)
    assert verdict.admitted and verdict.relative[0] == pytest.approx(105) and verdict.se[0] > 10
    # errors below EQUAL of the energy are rounding: such k compare equal whatever their ratio
    tiny = np.ones((10, 5))
    tiny[:, 4] = 1e-12
    assert _verdict(1.0, tiny).relative[4] == 100
    candidate = tiny.copy()
    candidate[:, 4] = 1e-10
    assert judge(candidate, tiny, total=100.0).admitted


def test_a_truncation_must_beat_the_uncapped_fit_by_a_standard_error():
    rng = np.random.default_rng(0)
    pca = 1 + rng.uniform(size=(20, 5))
    uncapped = judge(pca * 0.9, pca, 100.0)
    clearly = judge(pca * 0.8, pca, 100.0)
    noise = judge(pca * (0.9 + rng.normal(0, 0.05, size=(20, 1))), pca, 100.0)
    assert clearly.beats(uncapped) and not uncapped.beats(clearly)
    assert abs(noise.mean - uncapped.mean) < 3 and not noise.beats(uncapped)


def test_the_validated_choice_is_refitted_exactly_and_recorded(heavy_tailed, tmp_path):
    model = PPA(random_state=0).fit(heavy_tailed)
    choice = model.configuration_
    assert choice == {"robust": False, "max_curved": 4, "validated": True}
    fixed = PPA(configuration="fixed", random_state=0).fit(heavy_tailed)
    assert (fixed.degrees_ > 1).sum() > 4 and fixed.configuration_["validated"] is False
    as_chosen = PPA(configuration="fixed", robust=choice["robust"], max_curved=choice["max_curved"], random_state=0).fit(heavy_tailed)
    np.testing.assert_array_equal(model.transform(heavy_tailed), as_chosen.transform(heavy_tailed))
    assert "robust=False, max_curved=4 (validated on held-out groups)" in repr(model)
    attrs = model.to_xarray().attrs
    assert (attrs["configuration_max_curved"], attrs["configuration_validated"]) == ("4", "True")
    for suffix in (".nc", ".zarr"):
        model.save(tmp_path / f"m{suffix}")
        assert load_model(tmp_path / f"m{suffix}").configuration_ == choice
    # Property 2 in sample: never above its PCA at any k
    assert compare_errors(model.params_, heavy_tailed).relative.max() <= 100 + 1e-9
    assert model.fit_error_ratio_.max() <= 100 + 1e-9


def test_the_robust_family_joins_where_the_plain_fit_harms(anomalous):
    model = PPA(random_state=0).fit(anomalous)
    assert model.configuration_ == {"robust": True, "max_curved": 1, "validated": True}
    as_chosen = PPA(configuration="fixed", robust=True, max_curved=1, random_state=0).fit(anomalous)
    np.testing.assert_array_equal(model.transform(anomalous), as_chosen.transform(anomalous))
    assert compare_errors(model.params_, anomalous).relative.max() <= 100 + 1e-9


def test_unit_weights_choose_as_no_weights(heavy_tailed):
    plain = PPA(random_state=0).fit(heavy_tailed)
    weighted = PPA(random_state=0).fit(heavy_tailed, sample_weight=np.ones(len(heavy_tailed)))
    assert weighted.configuration_ == plain.configuration_
    np.testing.assert_allclose(weighted.transform(heavy_tailed), plain.transform(heavy_tailed), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("options", [{"configuration": "fixed"}, {"robust": True}, {"max_curved": 2}, {"degree": 1}, {"degree": 3}])
def test_options_that_fix_the_configuration_skip_the_validation(heavy_tailed, options):
    model = PPA(random_state=0, **options).fit(heavy_tailed[:1500])
    expected = {"robust": options.get("robust", False), "max_curved": options.get("max_curved"), "validated": False}
    assert model.configuration_ == expected
    assert "(as given)" in repr(model)
    same = PPA(random_state=0, **options | {"configuration": "fixed"}).fit(heavy_tailed[:1500])
    np.testing.assert_array_equal(model.transform(heavy_tailed), same.transform(heavy_tailed))


def test_too_small_a_sample_is_fitted_as_given():
    X = make_curved_mixture(40, n_bands=5, random_state=0).data
    model = PPA(random_state=0).fit(X)
    assert model.configuration_ == {"robust": False, "max_curved": None, "validated": False}


def test_the_searched_leading_vectors_are_capped_by_the_same_validation(heavy_tailed):
    gd = PPA(leading="gd", random_state=0).fit(heavy_tailed[:1500])
    assert gd.configuration_["validated"] and not gd.configuration_["robust"]
    cap = gd.configuration_["max_curved"]
    assert cap is None or (gd.degrees_ > 1).sum() <= cap
    assert compare_errors(gd.params_, heavy_tailed[:1500]).relative.max() <= 100 + 1e-9


def test_without_curvature_the_plain_fit_stands_unjudged():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 20)) @ rng.standard_normal((20, 20))
    model = PPA(random_state=0).fit(X)
    assert model.configuration_ == {"robust": False, "max_curved": None, "validated": True}
    fixed = PPA(configuration="fixed", random_state=0).fit(X)
    np.testing.assert_array_equal(model.transform(X), fixed.transform(X))


@pytest.mark.parametrize("scale", [1e-300, 1e-200, 1e200, 1e300])
def test_the_weights_scale_does_not_change_the_choice(heavy_tailed, scale):
    X = heavy_tailed[:600, :6]
    weights = np.random.default_rng(6).uniform(0.5, 2, len(X))
    reference = PPA(random_state=0).fit(X, sample_weight=weights)
    scaled = PPA(random_state=0).fit(X, sample_weight=weights * scale)
    assert reference.configuration_["validated"] and scaled.configuration_ == reference.configuration_


@pytest.mark.parametrize("scale", [1e-50, 1e100])
def test_noise_adjusted_fits_choose_alike_at_any_units(scale):
    X = make_curved_mixture(600, n_bands=5, noise_level=0.02, random_state=4).data
    noise = np.eye(5) * 1e-4
    reference = PPA(random_state=0, noise_cov=noise).fit(X)
    assert reference.configuration_["validated"] and (reference.degrees_ > 1).any()
    scaled = PPA(random_state=0, noise_cov=noise * scale * scale).fit(X * scale)
    assert scaled.configuration_ == reference.configuration_


def test_pca_chosen_reads_as_the_plain_fit():
    """The robust family's PCA is the plain family's: a PCA choice never reads robust=True."""
    X = make_curved_mixture(3000, n_bands=80, noise="student", random_state=1).data
    assert PPA(random_state=0).fit(X).configuration_ == {"robust": False, "max_curved": 0, "validated": True}


def test_validation_needs_four_groups(heavy_tailed):
    X = heavy_tailed[:600, :6]
    assert not PPA(random_state=0).fit(X, groups=np.arange(600) % 3).configuration_["validated"]
    assert PPA(random_state=0).fit(X, groups=np.arange(600) % 4).configuration_["validated"]
