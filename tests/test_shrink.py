"""The validated fit's last curve shrunk toward the straight step (ppa_xr.core.shrink): the factor chosen on halvings of
the fitted groups is below 1 where a curve does not transfer between regions and 1 where it does, the shrunk map is an
exact shear with its later steps the PCA of the shrunk residual, and the default fit records and applies it."""

from functools import partial

import numpy as np
import pytest

from ppa_xr import PPA, load_model
from ppa_xr.core import checks, kernels, shrink, steps
from ppa_xr.core.degrees import Choice
from ppa_xr.core.errors import compare_errors
from ppa_xr.core.fill import with_marginals
from ppa_xr.core.ppa import Fit, fit
from ppa_xr.core.spec import Spec
from ppa_xr.datasets.synthetic import make_curved_mixture


def regions(seed: int, transfer: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A curve ``x2 = q(t)`` shared by 20 regions of 200 rows, and a third band: with ``transfer``, noise, every region
    spanning ``t``; without, each region on its own stretch of ``t`` with its own offset in that band, which a curve
    fitted on some regions follows and other regions do not (regional change). The even regions are fitted (their
    rows, their groups), the odd ones unseen."""
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(20), 200)
    t = rng.uniform(-1, 1, len(g)) if transfer else -1 + (g + rng.uniform(0, 1, len(g))) / 10
    x2 = 0.6 * (t**2 - 1 / 3) + 0.6 * t**4 + 0.2 * rng.standard_normal(len(t))
    x3 = 0.05 * rng.standard_normal(len(t)) + (0 if transfer else 0.15 * rng.standard_normal(20)[g])
    X, fitted = np.column_stack([2 * t, x2, x3]), g % 2 == 0
    return X[fitted], g[fitted], X[~fitted]


def worst_kept(params, X: np.ndarray) -> float:
    """The highest ratio to PCA on ``X`` over the k users keep (PCA's error at least 0.1% of the energy)."""
    comparison = compare_errors(params, X)
    return float(comparison.relative[comparison.pca >= 1e-3 * np.mean(np.sum((X - X.mean(0)) ** 2, 1))].max())


def one_curve(X: np.ndarray, groups: np.ndarray) -> Fit:
    return fit(X, Spec(configuration="fixed", max_curved=1), groups=groups, rng=np.random.default_rng(0))


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_a_curve_that_does_not_transfer_between_regions_is_shrunk(seed):
    """Measured over seeds 0-7: the factor 0.2-0.6, the unseen regions' worst kept k 97.0-100.0 shrunk, 97.2-110.0 as
    fitted (above 102 at seeds 0, 2, 3, 6: 110.0, 107.5, 106.6, 105.5). With 10 fitted regions the halvings' evidence
    depends on their draw: other draws kept the curve (factor 1) at 5 of 16 seed-draw pairs."""
    X, groups, unseen = regions(seed, transfer=False)
    fitted = one_curve(X, groups)
    lam = shrink.choose(fitted.params, X, groups, np.random.default_rng(1))
    shrunk = shrink.shrunk(X, fitted, lam)
    assert lam < 1
    assert worst_kept(shrunk.params, unseen) <= 100.5 < 102 < worst_kept(fitted.params, unseen)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_curve_that_transfers_is_kept_as_fitted(seed):
    """Measured: the factor 1 at seeds 0-7 and three draws of the halvings each."""
    X, groups, _ = regions(seed, transfer=True)
    fitted = one_curve(X, groups)
    assert fitted.params.curved_steps()
    assert shrink.choose(fitted.params, X, groups, np.random.default_rng(1)) == 1.0
    assert shrink.shrunk(X, fitted, 1.0) is fitted


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.8])
def test_the_shrunk_map_is_an_exact_shear_refitted_below_pca_in_sample(lam):
    """Two curved steps, the last one scaled: the inverse undoes the forward map, the recorded variances and training
    error curve are the map's own on its fitting rows, and Property 2 holds in sample."""
    X = make_curved_mixture(3000, n_bands=8, n_materials=3, random_state=0).data
    fitted = fit(X, Spec(configuration="fixed", max_curved=2), rng=np.random.default_rng(0))
    assert len(fitted.params.curved_steps()) == 2
    shrunk = shrink.shrunk(X, fitted, lam)
    params = shrunk.params
    r = kernels.forward(X, params)
    np.testing.assert_allclose(kernels.inverse(r, params), X, atol=1e-12)
    np.testing.assert_allclose(r.var(axis=0), params.explained_variance, rtol=1e-9, atol=1e-15)
    comparison = compare_errors(params, X)
    np.testing.assert_allclose(shrunk.error_ratio, comparison.relative, rtol=1e-9)
    assert comparison.relative.max() <= 100 + 1e-9
    # the shrunk step's polynomial is the fitted one times lam; the earlier step's inverse is untouched
    first, last = fitted.params.curved_steps()
    np.testing.assert_allclose(params.inverse[last], lam * fitted.params.inverse[last], rtol=1e-15)
    np.testing.assert_array_equal(params.inverse[first], fitted.params.inverse[first])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_shrunk_map_is_exact_after_curves_that_kept_their_shares_of_signal(seed):
    """A curve that kept its axes' shares of signal (``shrink_outputs``) leaves a residual that is not orthogonal to its
    basis; the shrunk map's later outputs are still the principal axes of the shrunk residual, their variances the
    recorded ones (measured 1e-13 of the leading variance), with and without weights, as after least squares."""
    X = make_curved_mixture(3000, n_bands=8, n_materials=3, random_state=seed).data
    for weights in (None, np.random.default_rng(seed).uniform(0.1, 3.0, len(X))):
        for signal in (False, True):
            fitted = fit(X, Spec(configuration="fixed", max_curved=2), rng=np.random.default_rng(0), weights=weights, shrink_outputs=signal)
            p = fitted.params.curved_steps()[-1]
            for lam in (0.0, 0.6):
                params = shrink.shrunk(X, fitted, lam, weights).params
                later = kernels.forward(X, params)[:, p + 1:]
                w = np.ones(len(X)) if weights is None else weights / weights.mean()
                centred = later - np.average(later, axis=0, weights=w)
                scatter = (centred * w[:, None]).T @ centred / len(X)
                variances = params.explained_variance[p + 1:]
                np.testing.assert_allclose(scatter, np.diag(variances), atol=1e-9 * variances[0])


def noisy_tail(rng: np.random.Generator, n: int, d: int = 30) -> np.ndarray:
    """A curve ``x1 = t^2`` along ``x0 = 2 t`` and 28 bands of noise alone, whose spread grows toward the ends of
    ``t`` (brighter pixels, noisier), as the last bands of a hyperspectral scene."""
    t = rng.uniform(-1, 1, n)
    X = np.empty((n, d))
    X[:, 0], X[:, 1] = 2 * t, t**2 + 0.05 * rng.standard_normal(n)
    X[:, 2:] = 0.02 * (1 + 2 * np.abs(t) ** 3)[:, None] * rng.standard_normal((n, d - 2))
    return X


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_default_keeps_of_each_curve_only_its_share_of_signal(seed):
    """Least squares fits a curve's ``g`` terms to every later band, noise included, and unseen rows pay it back: on
    bands of noise alone (600 rows, 28 such bands) the fit as configured reads 113-117 of PCA on unseen rows over
    ``k >= 2``; the default keeps of each band's correction its share of signal (``1 - 1 / F``), 101.9-103.4 there,
    and is never above PCA in sample. Measured at seeds 0-9."""
    rng = np.random.default_rng(seed)
    X, unseen = noisy_tail(rng, 600), noisy_tail(rng, 5000)
    model, fixed = PPA(degree=5, random_state=0).fit(X), PPA(degree=5, random_state=0, configuration="fixed").fit(X)
    default, as_configured = (compare_errors(m.params_, unseen).relative[1:].mean() for m in (model, fixed))
    assert default < 105 < 110 < as_configured
    assert np.all(model.fit_error_ratio_ <= 100 + 1e-9)
    assert compare_errors(model.params_, unseen).relative[0] < 30  # the curve itself is kept


def test_a_curve_keeps_least_squares_where_its_shares_would_break_property_2():
    """Per-axis factors do not keep the residual Loewner-below the straight step's: here (a PCA-led step, its later
    axes' variances 0.62 and 0.591, 1,000 rows, degree 2) the second axis keeps 0.986 of its correction and the
    first none, and the residual's top variance, 0.62067, exceeds the 0.62 that Property 2's interlacing allows.
    The step then keeps its least-squares curve, whose residual interlaces."""
    w, cov, gram = np.array([[0.0, 0.0], [0.01, 0.12], [0.03, 0.24]]), np.diag([0.62, 0.591]), np.eye(3)
    keeps = partial(steps.interlaced, pca_variance=np.array([2.0, 0.62, 0.591]), steps=1)
    shares = steps.signal_shares(w, cov, gram, 1000, 2)
    np.testing.assert_allclose(shares, [0.0, 0.986], atol=1e-3)
    assert not keeps(cov - steps._explained(w * shares, gram @ w, gram, exact=False))
    kept, left = steps._corrected(w, cov, gram @ w, gram, Choice.every_axis(2), 1000, keeps)
    np.testing.assert_array_equal(kept, w)
    np.testing.assert_allclose(left, cov - w.T @ gram @ w)
    assert keeps(left)
    scaled, _ = steps._corrected(w, cov, gram @ w, gram, Choice.every_axis(2), 1000, lambda c: True)
    np.testing.assert_allclose(scaled, w * shares)


@pytest.mark.parametrize("seed", [2, 5])
def test_the_default_fit_records_and_applies_the_factor(seed, tmp_path):
    """The default fit's final map is the chosen configuration's fit shrunk by the recorded factor (its outputs'
    marginal densities, the fill's model, those of the shrunk map), saved and loaded with it; a model without the
    record (older files) reads 1."""
    X, groups, _ = regions(seed, transfer=False)
    model = PPA(random_state=0).fit(X, groups=groups)
    choice = model.configuration_
    fixed = PPA(configuration="fixed", robust=choice["robust"], max_curved=choice["max_curved"], random_state=0)
    core = fit(X, fixed._get_spec(), groups=groups, rng=checks.rng_of(0))
    for name, array in fixed.fit(X, groups=groups).params_.arrays().items():
        if not name.startswith("marginal"):
            np.testing.assert_array_equal(getattr(core.params, name), array, err_msg=name)
    core = fit(X, fixed._get_spec(), groups=groups, rng=checks.rng_of(0), shrink_outputs=True)  # the default's curves
    expected = shrink.shrunk(X, core, choice["shrink"])
    for name, array in with_marginals(expected.params, X).arrays().items():
        np.testing.assert_array_equal(getattr(model.params_, name), array, err_msg=name)
    np.testing.assert_array_equal(model.fit_error_ratio_, expected.error_ratio)
    model.save(tmp_path / "m.nc")
    assert load_model(tmp_path / "m.nc").configuration_ == choice
    assert choice["validated"] and choice["shrink"] < 1  # measured 0.2 and 0.3 at seeds 2 and 5
    assert f"last curve x{choice['shrink']:g}" in repr(model)



def test_curves_fitted_on_filled_gaps_are_not_shrunk_and_missing_fill_on_complete_rows_is_the_drop_fit():
    """The halvings would read the fill's own scatter as curves that do not transfer (a cube's fill error rose from
    0.40 to 0.52 of the bands' spread with the factor 0.4); ``missing="fill"`` has its own check of the curves, on
    observed values held out of the loop. Rows without gaps are fitted as ``missing="drop"`` fits them. Whether the
    drop fit shrinks depends on the halvings' draw (measured: at seeds 2, 4, 5 and 6 of 0-7), so every seed is held to
    the rules and enough of them to a shrunk drop fit whose gap-filled twin is curved for the test to see that twin left
    as fitted."""
    shrunk = 0
    for seed in range(8):
        X, groups, _ = regions(seed, transfer=False)
        dropped = PPA(random_state=0).fit(X, groups=groups)
        complete = PPA(random_state=0).fit(X, groups=groups, missing="fill")
        assert complete.configuration_ == dropped.configuration_
        np.testing.assert_array_equal(complete.params_.inverse, dropped.params_.inverse)
        gappy = X.copy()
        gappy[np.random.default_rng(seed).random(len(X)) < 0.1, 2] = np.nan
        filled = PPA(random_state=0).fit(gappy, groups=groups, missing="fill")
        assert filled.configuration_["shrink"] == 1.0
        shrunk += dropped.configuration_["shrink"] < 1 and filled.degrees_.max() > 1  # curved where the drop fit shrinks
    assert shrunk >= 1  # measured 2 (seeds 5 and 6; the fill's own check keeps the curves at half of the seeds)


def test_choosing_the_factor_holds_at_most_two_more_copies_of_the_rows():
    """The halvings' moments come from ``[B_p, B_e, z]`` built in place: beyond the rows, the states ``z`` and that block
    (measured 2.18x the rows at 20,000 x 425 and 2.20-2.22x here at seeds 0-2; 3.58x and 4.1x when the sorted rows,
    ``z`` and a stacked copy coexisted)."""
    import tracemalloc

    X = make_curved_mixture(4000, n_bands=200, n_materials=4, random_state=0).data
    fitted = fit(X, Spec(configuration="fixed", max_curved=3), rng=np.random.default_rng(0))
    labels = np.arange(len(X)) % 40
    tracemalloc.start()
    try:
        shrink.choose(fitted.params, X, labels, np.random.default_rng(1))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 2.6 * X.nbytes


def _pageblocks_halves(seed: int) -> tuple[np.ndarray, np.ndarray]:
    from ppa_xr.datasets import load_table

    X = load_table("Pageblocks").normalised()
    order = np.random.default_rng(seed).permutation(len(X))
    return X[order[: len(X) // 2]], X[order[len(X) // 2:]]


def test_a_searched_fit_keeps_the_curved_steps_halvings_of_its_groups_support(monkeypatch):
    """PPA-GD on random halves of Pageblocks (seeds 0-7): its curves read up to 110-121 on unseen rows at a kept k (a
    handful of edge rows), which the whole-fit validation's held-out half does not show. Where halvings of the fitted
    groups read a truncation of the searched fit within 1% of PCA at its kept k (median over the halvings) and an
    earlier count lowers their mean, the fit keeps that many curved steps: the same fit capped (``max_curved``,
    recorded), bit for bit, never PCA. Fewer curves at 3 of the 8 seeds: seed 1 109.6 -> 103.0 at the worst k on the
    unseen half; seeds 3 and 5 95.2 -> 96.9 and 78.3 -> 91.4 (below PCA). Since the curves keep their axes' shares of
    signal, the average worst k over the 8 seeds is 101.2 with the count and 100.2 without it (103.0 and 101.2 before,
    with least-squares curves: the shares took seed 6 from 118.0 to 99.8 on their own)."""
    worst, uncounted, fewer = [], [], 0
    for seed in range(8):
        X, unseen = _pageblocks_halves(seed)
        model = PPA(leading="gd", random_state=seed).fit(X)
        with monkeypatch.context() as m:
            m.setattr(shrink, "COUNT", False)
            without = PPA(leading="gd", random_state=seed).fit(X)
        curves, before = len(model.params_.curved_steps()), len(without.params_.curved_steps())
        assert curves <= before and (curves >= 1 or before == 0)
        if curves < before:
            fewer += 1
            count = model.configuration_["max_curved"]
            assert count == curves
            capped = PPA(leading="gd", random_state=seed, max_curved=count).fit(X)  # the default's curves, capped
            np.testing.assert_array_equal(kernels.forward(unseen, model.params_), kernels.forward(unseen, capped.params_))
        else:
            np.testing.assert_array_equal(kernels.forward(unseen, model.params_), kernels.forward(unseen, without.params_))
        worst.append(compare_errors(model.params_, unseen).relative.max())
        uncounted.append(compare_errors(without.params_, unseen).relative.max())
    assert fewer >= 3
    assert worst[1] < uncounted[1] - 5
