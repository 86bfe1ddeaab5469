"""Gap filling: PPA.fill, cube.ppa.fill, fit(missing="fill") and the fill command."""

import warnings
from dataclasses import replace

import numpy as np
import pytest

from ppa_xr import PPA, ShiftWarning
from ppa_xr.core.fill import TOLERANCE, fill, fill_mask
from ppa_xr.cube.sampling import fitted_shares

from .conftest import curved_sample


def hidden(X: np.ndarray, share: float, seed: int) -> np.ndarray:
    """Which entries stay observed: each hidden with probability ``share``, at least one kept per row."""
    rng = np.random.default_rng(seed)
    observed = rng.random(X.shape) >= share
    observed[np.arange(len(X)), rng.integers(0, X.shape[1], len(X))] = True
    return observed


def conditional_mean(train: np.ndarray, X: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """The Gaussian conditional mean of each row's missing entries under the train rows' mean and covariance."""
    mu, S = train.mean(0), np.cov(train, rowvar=False)
    out = np.array(X, dtype=np.float64)
    for i in range(len(out)):
        o, m = observed[i], ~observed[i]
        if m.any():
            out[i, m] = mu[m] + S[np.ix_(m, o)] @ np.linalg.solve(S[np.ix_(o, o)], out[i, o] - mu[o])
    return out


def mse(filled: np.ndarray, truth: np.ndarray, observed: np.ndarray) -> float:
    return float(np.mean((filled - truth)[~observed] ** 2))


@pytest.fixture(scope="module")
def split():
    X = curved_sample(4000, d=5, seed=3)
    return X[:2000], X[2000:]


@pytest.mark.parametrize("standardize", [False, True])
def test_pca_fill_is_the_conditional_mean(split, standardize):
    """Also with features in units 1e4 apart, standardized: the solve's ridge scales with each feature."""
    units = np.array([1, 100, 0.01, 5, 1]) if standardize else np.ones(5)
    train, test = split[0] * units, split[1] * units
    observed = hidden(test, 0.3, 0)
    model = PPA(degree=1, standardize=standardize, random_state=0).fit(train)
    filled = model.fill(np.where(observed, test, np.nan))
    expected = conditional_mean(train, test, observed)
    np.testing.assert_allclose(filled / units, expected / units, rtol=0, atol=1e-10 * np.abs(expected / units).max())


def test_pca_manifold_fill_is_ppca_conditional_mean(split):
    """With k components the fill of a PCA model is probabilistic PCA's: s = (U_o^T U_o / s2 + L^-1)^-1 U_o^T (x_o - mu_o) / s2."""
    train, test = split
    observed = hidden(test[:300], 0.3, 1)
    model = PPA(degree=1, random_state=0).fit(train)
    k = 2
    params = model.params_
    U, L = params.pca_rotation[:k].T, params.pca_variance
    s2 = L[k:].sum() / 5
    expected = test[:300].copy()
    for i, o in enumerate(observed):
        Uo = U[o]
        s = np.linalg.solve(Uo.T @ Uo / s2 + np.diag(1 / L[:k]), Uo.T @ (test[i, o] - params.mean[o]) / s2)
        expected[i, ~o] = params.mean[~o] + U[~o] @ s
    filled = model.fill(np.where(observed, test[:300], np.nan), n_components=k)
    np.testing.assert_allclose(filled, expected, rtol=0, atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_observed_values_unchanged_bit_for_bit(split, dtype):
    train, test = split
    model = PPA(random_state=0).fit(train)
    observed = hidden(test, 0.3, 2)
    X = np.where(observed, test, np.nan).astype(dtype)
    X[:5] = np.nan  # nothing observed: stays NaN
    X[5:10] = test[5:10]  # nothing missing: unchanged
    X[10, 0] = np.inf  # inf is missing too
    filled = model.fill(X)
    assert filled.dtype == dtype
    finite = np.isfinite(X)
    np.testing.assert_array_equal(filled[finite], X[finite])
    assert np.isnan(filled[:5]).all() and np.isfinite(filled[5:]).all()
    np.testing.assert_array_equal(fill_mask(X), ~finite & finite.any(axis=1, keepdims=True))
    for k in (1, 3):
        np.testing.assert_array_equal(model.fill(X, n_components=k)[finite], X[finite])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curved_fill_beats_the_best_linear_fill(seed):
    """Held out, a quarter of the values hidden: the curve's fill beats the conditional mean of the same training rows
    (measured 0.66-0.86 of its MSE over seeds 0-2 at every component, 0.46-0.80 with k = 2 .. 4)."""
    X = curved_sample(4000, d=5, seed=seed)
    train, test = X[:2000], X[2000:]
    observed = hidden(test, 0.3, seed)
    model = PPA(random_state=0).fit(train)
    gappy = np.where(observed, test, np.nan)
    linear = mse(conditional_mean(train, test, observed), test, observed)
    assert mse(model.fill(gappy), test, observed) < 0.95 * linear
    assert mse(model.fill(gappy, n_components=3), test, observed) < 0.95 * linear


@pytest.mark.parametrize("tails", ["clamp", "linear", "polynomial"])
def test_fill_is_the_most_probable_completion(tails):
    """With every output Gaussian (no marginal recorded), the compiled Gauss-Newton (each row on its own gaps, every
    term from sums at the start) lands on the minimum of ``q = r^T Lambda^-1 r`` over the gaps that a general
    optimizer finds from the forward map itself, wherever the fill is curved (the guard keeps the linear fill elsewhere)."""
    from scipy.optimize import minimize

    from ppa_xr.core.kernels import forward

    X = curved_sample(3000, d=6, seed=5)
    # every step curved (least squares: the default keeps none of the last two curves, whose axes are noise alone),
    # so the steps' terms act on each other too
    model = PPA(degree=3, random_state=0, tails=tails, configuration="fixed").fit(X[:2000])
    params = replace(model.params_, marginal=None, marginal_range=None)
    assert len(params.curved_steps()) == 5
    test = X[2000:2060]
    observed = hidden(test, 0.4, 6)
    gappy = np.where(observed, test, np.nan)
    filled, linear = fill(gappy, params), model.pca_.fill(gappy)
    precision = 1 / params.explained_variance
    spread = test.std(axis=0)
    compared = found = 0
    for row, seen in zip(range(len(test)), observed):
        if seen.all() or np.array_equal(filled[row], linear[row]):
            continue

        def q(values: np.ndarray) -> float:
            x = filled[row].copy()
            x[~seen] = values
            with np.errstate(over="ignore", invalid="ignore"):  # the optimizer's trial points may lie far out
                r = forward(x[None], params)[0]
                value = float(r @ (precision * r))
            return value if np.isfinite(value) else np.inf

        with np.errstate(invalid="ignore"):  # its finite differences at trial points where q is infinite
            best = minimize(q, linear[row, ~seen], method="BFGS", options={"gtol": 1e-10}).x
        assert q(filled[row, ~seen]) <= q(linear[row, ~seen])  # every step it takes lowers q
        # it stops once q falls by less than TOLERANCE of itself (or after MAX_ITERATIONS, with its last iterate)
        found += q(filled[row, ~seen]) <= q(best) * (1 + 2 * TOLERANCE) and np.allclose(filled[row, ~seen], best, rtol=0,
                                                                                         atol=1e-3 * spread[~seen].max())
        compared += 1
    # polynomial tails, where q reaches 1e14 far out, leave more rows unsettled after MAX_ITERATIONS: 45-52 of 55 there
    assert compared > 40 and found >= (0.75 if tails == "polynomial" else 0.9) * compared


def bimodal_sample(n: int, seed: int) -> np.ndarray:
    """Noisy points along a curve whose parameter has two modes (as land and water): its leading output is far from
    Gaussian, and two of three noisy copies of it leave its mode in doubt."""
    rng = np.random.default_rng(seed)
    t = rng.choice([-1.5, 1.5], n) + 0.3 * rng.normal(size=n)
    return np.column_stack([t, t, t, 0.5 * t**2, 0.3 * t**3]) + 0.6 * rng.normal(size=(n, 5))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fill_is_the_posterior_mean_where_outputs_are_not_gaussian(seed):
    """Where an output's marginal on the fitting sample is not Gaussian (two modes here), the fit records it and the
    fill is the posterior mean under it, not the Gaussian model's mode: closer to the posterior mean integrated on a
    fine grid than the mode is, and a smaller squared error (MSE / its PCA's 0.81-0.83 over seeds 0-5, the mode's
    0.88-0.90; MSE / the mode's 0.92)."""
    from ppa_xr.core.kernels import forward

    X = bimodal_sample(4000, seed)
    train, test = X[:2000], X[2000:]
    observed = np.ones(test.shape, bool)
    np.put_along_axis(observed, np.argsort(np.random.default_rng(seed + 10).random(test.shape), axis=1)[:, :2], False, axis=1)
    gappy = np.where(observed, test, np.nan)
    model = PPA(random_state=0).fit(train)
    params, gaussian = model.params_, replace(model.params_, marginal=None, marginal_range=None)
    assert params.marginal is not None and params.marginal[0].any()  # the leading output's two modes are recorded
    filled, mode = model.fill(gappy), fill(gappy, gaussian)

    def mse(values: np.ndarray) -> float:
        return float(np.mean((values - test)[~observed] ** 2))

    assert mse(filled) < 0.85 * mse(model.pca_.fill(gappy)) and mse(filled) < 0.96 * mse(mode)
    points = np.linspace(*params.marginal_range.T, params.marginal.shape[1], axis=1)
    moved = np.flatnonzero((filled != mode).any(axis=1))[:20]
    assert len(moved) == 20
    closer = 0
    for row in moved:  # the posterior mean of the row's two gaps on a 121 x 121 grid over +-5 of the gaps' spread
        gaps = np.flatnonzero(~observed[row])
        axes = [np.linspace(-5, 5, 121) * train[:, j].std() + mode[row, j] for j in gaps]
        grid = np.repeat(mode[row][None], 121 * 121, axis=0)
        grid[:, gaps] = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 2)
        r = forward(grid, params)
        log_p = -0.5 * (r**2 / params.explained_variance).sum(axis=1)
        log_p += sum(np.interp(r[:, p], points[p], params.marginal[p]) for p in range(params.n_features) if params.marginal[p].any())
        weight = np.exp(log_p - log_p.max())
        mean = weight @ grid[:, gaps] / weight.sum()
        closer += np.linalg.norm(filled[row, gaps] - mean) < np.linalg.norm(mode[row, gaps] - mean)
    assert closer >= 16


@pytest.mark.parametrize("seed", [0, 1])
def test_fill_in_parts_of_rows_equals_one_part(seed, monkeypatch):
    """The MAP fill runs in parts of ``CACHED_ROWS`` rows on buffers made once per fill (the rows that move to the
    posterior mean flagged in one of them, cleared row by row): the parts' fill is the one-part fill bit for bit."""
    import ppa_xr.core.fill as fill_module

    X = bimodal_sample(3000, seed)
    gappy = np.where(hidden(X[1500:], 0.4, seed), X[1500:], np.nan)
    params = PPA(random_state=0).fit(X[:1500]).params_
    assert params.marginal is not None
    whole = fill(gappy, params)
    monkeypatch.setattr(fill_module, "CACHED_ROWS", 37)
    np.testing.assert_array_equal(fill(gappy, params), whole)
    assert (whole != fill(gappy, replace(params, marginal=None, marginal_range=None))).any(axis=1).sum() > 20  # rows moved


def test_marginals_of_a_noise_free_sample_with_a_flat_output():
    """A noise-free curve with a constant feature: the fit (which raises on any floating-point failure) records the
    curve's marginals and none of the flat output's, whose Gaussian log density has no finite floor."""
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 3 * np.pi, 2000)
    X = np.column_stack([0.5 * np.cos(t), 0.5 * np.sin(t), 0.3 * t, np.zeros(2000)]) @ np.linalg.qr(rng.normal(size=(4, 4)))[0].T
    model = PPA(degree=tuple(range(1, 8)), random_state=0).fit(X)
    flat = model.params_.explained_variance < 1e-14 * model.params_.explained_variance.max()
    assert flat.any() and model.params_.marginal is not None and not model.params_.marginal[flat].any()
    assert np.isfinite(model.params_.marginal).all()


def test_marginals_are_read_from_at_most_marginal_rows_spread_over_the_sample():
    """The marginals of a large sample are those of every ``ceil(n / MARGINAL_ROWS)``-th row (their pass on every
    row doubled a fixed fit of 200,000 x 198), and a sample within the bound uses every row."""
    from ppa_xr.core.fill import MARGINAL_ROWS, with_marginals

    X = curved_sample(2 * MARGINAL_ROWS + 1, d=4, seed=3)
    params = PPA(degree=3, configuration="fixed", random_state=0).fit(X[:5000]).params_
    spread = with_marginals(params, X[::3])
    assert spread.marginal is not None and spread.marginal.any()
    np.testing.assert_array_equal(with_marginals(params, X).marginal, spread.marginal)
    assert not np.array_equal(with_marginals(params, X[::2]).marginal, spread.marginal)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fill_stopped_on_the_predicted_decrease_is_within_tolerance_of_a_settled_one(monkeypatch, seed):
    """A row stops once its next Gauss-Newton step would lower q by at most TOLERANCE of q (predicted with the last
    step's matrix), without taking that step: its q is within the tolerance of the q of a fill run to 1e-13
    (a step that only checks the settle would change no row's q beyond it)."""
    from ppa_xr.core import fill as fill_module
    from ppa_xr.core.kernels import forward

    X = curved_sample(3000, d=6, seed=5 + seed)
    model = PPA(degree=3, random_state=0, tails="clamp").fit(X[:2000])  # every step curved
    params = replace(model.params_, marginal=None, marginal_range=None)  # the Gaussian model: the fill is its MAP
    gappy = np.where(hidden(X[2000:], 0.4, seed), X[2000:], np.nan)
    filled, linear = fill(gappy, params), model.pca_.fill(gappy)
    monkeypatch.setattr(fill_module, "TOLERANCE", 1e-13)
    monkeypatch.setattr(fill_module, "MAX_ITERATIONS", 100)
    settled = fill(gappy, params)

    def q(x: np.ndarray) -> np.ndarray:
        r = forward(x, params)
        return np.einsum("nd,nd,d->n", r, r, 1 / params.explained_variance)

    curved = ~np.all(filled == linear, axis=1) & ~np.all(settled == linear, axis=1)
    assert curved.sum() > 500
    # rows still moving after MAX_ITERATIONS (1.5-2% here, as many as when each settle was checked with a step) excepted
    assert np.mean(q(filled)[curved] <= q(settled)[curved] * (1 + 2 * TOLERANCE)) >= 0.97


def test_a_row_that_has_not_settled_keeps_its_last_iterate(monkeypatch):
    """Each accepted step lowers q, so a row still moving after MAX_ITERATIONS is more probable than its linear start:
    it keeps its iterate (on Landsat 5, rows given the linear fill instead cost over a third of the curve's gain)."""
    from ppa_xr.core import fill as fill_module
    from ppa_xr.core.kernels import forward

    X = curved_sample(4000, d=5, seed=1)
    model = PPA(random_state=0).fit(X[:2000])
    observed = hidden(X[2000:], 0.3, 1)
    gappy = np.where(observed, X[2000:], np.nan)
    linear = model.pca_.fill(gappy)
    params = replace(model.params_, marginal=None, marginal_range=None)  # the Gaussian model: the fill is its MAP
    monkeypatch.setattr(fill_module, "MAX_ITERATIONS", 1)  # one step: hardly a row has settled
    one = fill(gappy, params)

    def q(x: np.ndarray) -> np.ndarray:
        r = forward(x, params)
        return np.einsum("nd,nd,d->n", r, r, 1 / params.explained_variance)

    moved = (one != linear).any(axis=1)
    assert moved.mean() > 0.6 and (q(one)[moved] < q(linear)[moved]).all()  # 0.75 of the rows have a gap


def test_fill_without_a_curve_is_the_linear_fill(split):
    train, test = split
    model = PPA(degree=1, random_state=0).fit(train)
    observed = hidden(test, 0.5, 4)
    np.testing.assert_array_equal(fill(np.where(observed, test, np.nan), model.params_),
                                  model.fill(np.where(observed, test, np.nan)))


def test_the_fill_loops_count_no_references():
    """The per-row loops of the MAP fill and of the linear fill are compiled without numba's reference counts and
    allocate nothing (their buffers come from Python): the MAP loop's time 0.65x, the linear fill's 0.48-0.71x at 7-36
    bands (benchmarks/results/fill.txt); the values bit for bit the same (the tests above)."""
    from ppa_xr.core import compiled

    assert [loop.targetoptions["_nrt"] for loop in (compiled._map_rows, compiled._posterior_rows, compiled._linear_rows)] == [False] * 3


def test_fit_with_missing_fill_on_rows_that_all_have_gaps():
    """No complete row: missing="fill" fits, and its fill is close to that of a model fitted on the complete rows on
    average over seeds. One seed's ratio moves a lot with the degrees selected on 3,000 filled rows and with the
    complete model's shrinkage (measured 0.51-2.07 over seeds 0-15, mean 1.00, sd 0.37; 1.03 with the variances and
    marginals read from the fill itself), so the bound is on the mean
    of 16 seeds (se ~0.09) with a 2.5-se margin, and a broken loop (ratios of several) fails the bound on the worst."""
    ratios = []
    for seed in range(16):
        X = curved_sample(6000, d=5, seed=seed)
        train, test = X[:3000], X[3000:]
        gappy_train = np.where(hidden(train, 0.25, seed + 10) & ~np.eye(5, dtype=bool)[np.arange(3000) % 5], train, np.nan)
        assert not np.isfinite(gappy_train).all(axis=1).any()
        if seed == 0:
            with pytest.raises(ValueError, match="missing='fill'"):
                PPA(random_state=0).fit(gappy_train)
        filled_model = PPA(random_state=0).fit(gappy_train, missing="fill")
        complete_model = PPA(random_state=0).fit(train)
        observed = hidden(test, 0.25, seed + 20)
        gappy = np.where(observed, test, np.nan)
        ratios.append(mse(filled_model.fill(gappy), test, observed) / mse(complete_model.fill(gappy), test, observed))
    assert np.mean(ratios) <= 1.25 and max(ratios) < 3.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_with_gaps_reads_variances_and_marginals_from_the_data_not_the_fill(seed):
    """No complete row: the missing="fill" model's output variances and recorded marginals are those of the data on
    its own map. A posterior-mean fill is pulled to the bulk (each filled output towards 0): read from it, the trailing
    outputs' variances were 0.49-0.69 of the data's and a spike at 0 was recorded as a marginal of every output (seeds
    0-9); read from the fill plus a posterior draw, the variances are 0.91-1.16 of the data's, the marginals those of
    the complete model (the leading output's two modes), and the fill's squared error 1.01-1.06 of the complete
    model's (was 1.05-1.08)."""
    from ppa_xr.core.kernels import forward

    X = bimodal_sample(6000, seed)
    train, test = X[:3000], X[3000:]
    gappy_train = np.where(hidden(train, 0.25, seed + 10) & ~np.eye(5, dtype=bool)[np.arange(3000) % 5], train, np.nan)
    params = PPA(random_state=0).fit(gappy_train, missing="fill").params_
    complete = PPA(random_state=0).fit(train).params_
    share = params.explained_variance / forward(train, params).var(axis=0)
    assert share.min() > 0.8 and share.max() < 1.3
    recorded = set(np.flatnonzero(params.marginal.any(axis=1))) if params.marginal is not None else set()
    assert 0 in recorded and recorded <= set(np.flatnonzero(complete.marginal.any(axis=1)))
    observed = hidden(test, 0.25, seed + 20)
    gappy = np.where(observed, test, np.nan)
    assert mse(fill(gappy, params), test, observed) < 1.08 * mse(fill(gappy, complete), test, observed)


def test_missing_fill_refusals():
    X = curved_sample(200, d=4)
    with pytest.raises(ValueError, match="missing must be 'drop'"):
        PPA().fit(X, missing="impute")
    with pytest.raises(ValueError, match="never observed"):
        PPA().fit(np.where(np.arange(4) == 2, np.nan, X), missing="fill")
    with pytest.raises(ValueError, match="at least 2 rows"):
        PPA().fit(np.full((10, 4), np.nan), missing="fill")
    with pytest.raises(ValueError, match="n_components"):
        PPA(random_state=0).fit(X).fill(X, n_components=5)
    with pytest.raises(ValueError, match="4 features"):
        PPA(random_state=0).fit(X).fill(X[:, :3])


def test_integer_input_fills_nothing_and_gives_floats(split):
    train, _ = split
    model = PPA(random_state=0).fit(train)
    X = np.arange(50).reshape(10, 5)
    out = model.fill(X)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, X)


# ---- cubes -------------------------------------------------------------------------------------------------------------

import dask  # noqa: E402
import xarray as xr  # noqa: E402


def _no_compute(*args, **kwargs):
    raise AssertionError("something was computed")


@pytest.fixture(scope="module")
def gappy_cube():
    """A (band, y, x) float32 cube of a curved set with 20% of its values missing and a corner with nothing observed."""
    truth = curved_sample(60 * 40, d=5, seed=9).reshape(60, 40, 5).transpose(2, 0, 1).astype(np.float32)
    data = np.where(np.random.default_rng(0).random(truth.shape) < 0.2, np.float32(np.nan), truth)
    data[:, :3, :3] = np.nan
    cube = xr.DataArray(data, dims=("band", "y", "x"), coords={"band": list("abcde")}, attrs={"units": "1"})
    model = PPA(random_state=0).fit(curved_sample(3000, d=5))
    return cube, truth, model


def test_cube_fill_is_lazy_chunk_invariant_and_equals_the_estimator(gappy_cube):
    cube, truth, model = gappy_cube
    expected = model.fill(cube.transpose("y", "x", "band").values.reshape(-1, 5)).reshape(60, 40, 5).transpose(2, 0, 1)
    chunked = cube.chunk({"y": 16, "x": 16})
    with dask.config.set(scheduler=_no_compute):
        filled, mask = chunked.ppa.fill(model, return_mask=True)
    assert filled.dims == cube.dims and filled.chunks == chunked.chunks and filled.dtype == np.float32
    assert list(filled.band.values) == list("abcde") and filled.attrs["ppa_xr_output"] == "fill"
    np.testing.assert_array_equal(filled.values, expected)
    for chunks in ({"y": 7, "x": 40}, {"y": 60, "x": 5}):
        np.testing.assert_array_equal(cube.chunk(chunks).ppa.fill(model).values, expected)
    np.testing.assert_array_equal(cube.ppa.fill(model).values, expected)  # eager
    gaps = np.isnan(cube.values)
    np.testing.assert_array_equal(mask.values, gaps & ~gaps.all(axis=0))
    empty = gaps.all(axis=0)
    assert empty[:3, :3].all() and np.isnan(filled.values[:, empty]).all() and np.isfinite(filled.values[:, ~empty]).all()


@pytest.mark.parametrize("n_components", [3, None])
@pytest.mark.parametrize("scheduler", ["threads", "processes", "synchronous"])
def test_cube_fill_bit_identical_across_schedulers(gappy_cube, scheduler, n_components):
    """The manifold's fill (k = 3) and the whole map's MAP fill (each part's buffers its own, ``compiled.fill_scratch``):
    chunks filled side by side on threads give the bits of one at a time, one row of a chunk too."""
    cube, _, model = gappy_cube
    with dask.config.set(scheduler="synchronous"):
        reference = cube.chunk({"y": 20, "x": 20}).ppa.fill(model, n_components=n_components).values
    with dask.config.set(scheduler=scheduler, num_workers=4):
        np.testing.assert_array_equal(cube.chunk({"y": 20, "x": 20}).ppa.fill(model, n_components=n_components).values, reference)
        np.testing.assert_array_equal(cube.chunk({"y": 1, "x": 40}).ppa.fill(model, n_components=n_components).values, reference)


def test_cube_fit_with_missing_fill_on_a_stack_with_no_complete_pixel(gappy_cube):
    cube, truth, model = gappy_cube
    band = np.random.default_rng(1).integers(0, 5, (60, 40))
    stack = cube.where(xr.DataArray(np.arange(5), dims="band") != xr.DataArray(band, dims=("y", "x"))).chunk({"y": 32, "x": 32})
    with pytest.raises(ValueError, match="missing='fill'"):
        stack.ppa.fit(random_state=0)
    fitted = stack.ppa.fit(random_state=0, missing="fill")
    assert fitted.n_features_in_ == 5 and fitted.sample_.size > 1000
    assert fitted_shares(stack, "band", fitted.sample_)  # its witness pixel, with a gap, tells the fitting cube: held out of evaluate
    filled = stack.ppa.fill(fitted).values
    gaps = np.isnan(stack.values) & ~np.isnan(stack.values).all(axis=0)
    error = np.sqrt(np.mean((filled - truth)[gaps] ** 2))
    assert error < 0.5 * np.std(truth)


def test_cube_refusals(gappy_cube, tmp_path):
    cube, _, model = gappy_cube
    empty = xr.full_like(cube, np.nan)
    with pytest.raises(ValueError, match="no pixel has any observed feature"):
        empty.ppa.fit(missing="fill")
    with pytest.raises(ValueError, match="missing must be"):
        cube.ppa.fit(missing="yes")
    assert np.isnan(empty.ppa.fill(model).values).all()
    with pytest.raises(ValueError, match="n_components"):
        cube.ppa.fill(model, n_components=6)
    weights = xr.DataArray(np.where(np.arange(60)[:, None] < 30, np.nan, 1.0) * np.ones((60, 40)), dims=("y", "x"))
    with pytest.raises(ValueError, match="finite"):
        cube.ppa.fit(random_state=0, missing="fill", weights=weights)
    ints = xr.DataArray(np.arange(2 * 6 * 5).reshape(5, 2, 6).astype(np.int16), dims=("band", "y", "x"), coords={"band": list("abcde")})
    ints = ints.where(ints != 7, -1).astype(np.int16).rio.write_nodata(-1)
    with pytest.warns(ShiftWarning, match="other units"):  # counts 0..59 on a model of values near 0
        out = ints.ppa.fill(model).values
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_array_equal(out[ints.values != -1], ints.values[ints.values != -1])


def test_fill_command(tmp_path, gappy_cube, capsys):
    rioxarray = pytest.importorskip("rioxarray")
    from ppa_xr.cli import main

    cube, _, model = gappy_cube
    scene, model_path, out = tmp_path / "scene.tif", tmp_path / "m.nc", tmp_path / "filled.tif"
    cube.drop_vars("band").rio.to_raster(scene)
    model.save(model_path)
    assert main(["fill", str(scene), str(model_path), str(out), "--match-bands", "position", "--n-components", "3"]) == 0
    written = rioxarray.open_rasterio(out, masked=True).values
    expected = cube.ppa.fill(model, n_components=3).values
    np.testing.assert_allclose(written, expected, rtol=0, atol=0)
    assert main(["fill", str(scene), str(model_path), str(out), "--match-bands", "position"]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["fill", str(scene), str(model_path), str(scene), "--match-bands", "position", "--overwrite"]) == 2
    assert np.array_equal(rioxarray.open_rasterio(scene, masked=True).values, cube.values, equal_nan=True)
    assert main(["fit", str(scene), str(tmp_path / "f.nc"), "--missing", "fill", "--n-samples", "2000"]) == 0


def test_model_file_round_trip_fills_alike(gappy_cube, tmp_path):
    cube, _, model = gappy_cube
    model.save(tmp_path / "m.nc")
    from ppa_xr import load_model

    X = cube.transpose("y", "x", "band").values.reshape(-1, 5)
    np.testing.assert_array_equal(load_model(tmp_path / "m.nc").fill(X), model.fill(X))


def test_fit_with_gaps_checks_the_curve_on_held_out_values():
    """A curved model imposed on data without its curve: the check on held-out values says the curve's fill is worse,
    and the linear phase's rows and model are returned; on curved data the curve's are."""
    from ppa_xr.core.fill import fit_with_gaps

    curved = curved_sample(3000, d=4, seed=5)
    params = PPA(random_state=0).fit(curved).params_
    gauss = np.random.default_rng(6).multivariate_normal(curved.mean(0), np.cov(curved, rowvar=False), 3000)
    gappy = np.where(hidden(gauss, 0.25, 7), gauss, np.nan)
    filled, drawn, kept, check = fit_with_gaps(gappy, lambda rows, linear: params.pca() if linear else params, np.random.default_rng(0))
    assert check.count > 100 and check.worse and check.ratio > 1.1 and kept is params.pca()
    finite = np.isfinite(gappy)
    np.testing.assert_array_equal(filled[finite], gappy[finite])
    np.testing.assert_array_equal(drawn[finite], gappy[finite])  # the draw is added at the gaps only, and there to all
    assert (drawn != filled)[~finite].all()
    _, _, kept, check = fit_with_gaps(np.where(hidden(curved, 0.25, 7), curved, np.nan), lambda rows, linear: params.pca() if linear else params,
                                   np.random.default_rng(0))
    assert not check.worse and check.ratio < 0.9 and kept is params


def test_fewest_gaps_takes_the_least_counts_up_to_a_share_of_the_rows_and_five_thousand():
    """The rows a curved map of a fit with gaps is fitted on: the least gap counts, adding the next count until 15% of
    the rows and 5,000 rows are in, or half the rows where those are fewer; every row where that would leave no more
    rows than features."""
    from ppa_xr.core.fill import fewest_gaps

    def finite(counts):
        return np.arange(4)[None, :] >= np.asarray(counts)[:, None]

    many = np.repeat([1, 2, 3], [8000, 12000, 20000])  # 20% of 40,000 with 1 gap: more than 5,000
    np.testing.assert_array_equal(fewest_gaps(finite(many)), many == 1)
    fewer = np.repeat([1, 2, 3], [4000, 6000, 10000])  # 20% of 20,000 with 1 gap, but fewer than 5,000
    np.testing.assert_array_equal(fewest_gaps(finite(fewer)), fewer <= 2)
    small = np.repeat([1, 2, 3], [200, 400, 400])  # 1,000 rows: half of them
    np.testing.assert_array_equal(fewest_gaps(finite(small)), small <= 2)
    assert fewest_gaps(np.ones((5, 3), bool)).all()
    assert fewest_gaps(finite([1, 2, 3])).all()  # 3 rows of 4 features: every row


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("n", "two_gaps"), [(3000, 0.4), (20000, 0.7)])
def test_fit_with_missing_fill_fits_its_curves_on_the_rows_with_fewest_gaps(seed, n, two_gaps):
    """No complete row, the rest of the rows with one gap and a share ``two_gaps`` with two: the curved map is fitted
    on the one-gap rows, 30% of them or more where they are 5,000 or more (a filled value is the posterior mean of a
    straighter model, and rows of many lie on it: on Landsat 5 with every row filled the fill's squared error was
    0.97-1.32 of the complete-row model's over seeds 0-8, mean 1.110; on the fewer-gap half, mean 1.053 over four
    fit seeds; on the one-gap rows, 18% of 44,000, mean 1.022); a linear map on every row (EM-PCA's fixed point)."""
    X = curved_sample(n, d=5, seed=seed)
    rng = np.random.default_rng(seed + 30)
    gaps = np.zeros(X.shape, bool)
    gaps[np.arange(n), rng.integers(0, 5, n)] = True
    two = rng.random(n) < two_gaps
    gaps[np.flatnonzero(two), (np.argmax(gaps[two], axis=1) + 1 + rng.integers(0, 4, two.sum())) % 5] = True
    gappy = np.where(gaps, np.nan, X)
    curved = PPA(random_state=0).fit(gappy, missing="fill")
    assert curved.degrees_.max() > 1 and curved.n_effective_ == (~two).sum()
    assert PPA(degree=1, random_state=0).fit(gappy, missing="fill").n_effective_ == n


def test_fit_with_missing_fill_refills_its_fewest_gap_rows_by_its_own_curves():
    """No complete row (each with one gap, 40% with two): the curved map is fitted on the one-gap rows after one
    refill of their gaps by the map they give, not on the loop's fill, which lies on its straighter model. The
    fill of one gap per held-out row, as a share of the squared error of a model fitted on the complete rows, mean
    over three seeds: 1.11 (1.07-1.15 each; 0.96-1.18 over seeds 0-11, any three 1.13 at most) against 1.54 on the
    loop's fill (1.21-2.10; 1.07-2.10 over seeds 0-11, any three 1.21 at least). On Landsat 5 (44,000 rows, one band
    and a quarter of the others missing) over 45 fits: mean 0.996 and worst 1.115 against 1.021 and 1.149."""
    ratios = []
    for seed in range(3):
        X = curved_sample(6000, d=5, seed=seed)
        train, test = X[:3000], X[3000:]
        rng = np.random.default_rng(seed + 30)
        gaps = np.zeros(train.shape, bool)
        gaps[np.arange(3000), rng.integers(0, 5, 3000)] = True
        two = rng.random(3000) < 0.4
        gaps[np.flatnonzero(two), (np.argmax(gaps[two], axis=1) + 1 + rng.integers(0, 4, two.sum())) % 5] = True
        hide = np.zeros(test.shape, bool)
        hide[np.arange(3000), rng.integers(0, 5, 3000)] = True
        gappy = np.where(hide, np.nan, test)
        filled = PPA(random_state=0).fit(np.where(gaps, np.nan, train), missing="fill")
        assert filled.degrees_.max() > 1
        complete = PPA(random_state=0).fit(train)
        ratios.append(mse(filled.fill(gappy), test, ~hide) / mse(complete.fill(gappy), test, ~hide))
    assert np.mean(ratios) < 1.17, ratios


def test_a_date_observed_nowhere_is_named_by_its_label():
    """``missing='fill'`` refuses a feature observed in no sampled pixel: the message gave its position only (features
    [1, 2]), where a cube's user knows the dates; it names them too."""
    rng = np.random.default_rng(0)
    times = np.array(["2020-01-01", "2020-02-01", "2020-03-01", "2020-04-01"], dtype="datetime64[ns]")
    cube = xr.DataArray(rng.normal(size=(4, 30, 30)), dims=("time", "y", "x"), coords={"time": times})
    cube[1] = np.nan
    with pytest.raises(ValueError, match=r"features \[1\] \('time' \[2020-02-01\]\) are never observed"):
        cube.ppa.fit(dim="time", missing="fill", degree=1)


def test_a_cube_whose_every_pixel_has_a_gap_is_said_to_need_filling(tmp_path, capsys):
    """Every pixel with a gap: transform (the command line's too) wrote all-NaN components, silently, and evaluate and
    the report said to fit on fewer pixels. The shift check warns, they refuse, naming the fill; a model fitted on the
    same cube with missing="fill" (its fitting pixels all with gaps) too, and a cube whose complete pixels were all
    fitted keeps the advice to fit on fewer."""
    import warnings

    import rioxarray  # noqa: F401
    import xarray as xr

    from ppa_xr.cli import main

    values = curved_sample(2000, seed=1).T.reshape(4, 40, 50)
    cube = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": ["a", "b", "c", "d"], "y": np.arange(40.0)[::-1], "x": np.arange(50.0)})
    gappy = cube.where(np.arange(4)[:, None, None] != (np.arange(40)[:, None] + np.arange(50)) % 4)
    model = cube.ppa.fit(degree=2, configuration="fixed", random_state=0)
    for fitted in (model, gappy.ppa.fit(degree=2, configuration="fixed", random_state=0, missing="fill")):
        with pytest.warns(UserWarning, match=r"no pixel of this cube in the chunks read is complete.*cube.ppa.fill\(model\)"):
            assert gappy.ppa.transform(fitted, check=True).isnull().all()
        for measure in (gappy.ppa.evaluate, gappy.ppa.information_report):
            with pytest.raises(ValueError, match=r"no pixel of this cube is complete.*ppa-xr fill"):
                measure(fitted)
    small = cube.isel(x=slice(0, 20))
    everything = small.ppa.fit(degree=2, configuration="fixed", random_state=0, n_samples=800)
    with pytest.raises(ValueError, match=r"only 0 valid pixels .*fit on fewer pixels"):
        small.ppa.evaluate(everything)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small.ppa.transform(everything, check=True)
    gappy.rio.write_crs("EPSG:32633").rio.to_raster(tmp_path / "gappy.tif")
    model.save(tmp_path / "m.nc")
    assert main(["transform", str(tmp_path / "gappy.tif"), str(tmp_path / "m.nc"), str(tmp_path / "t.tif"), "--match-bands", "position"]) == 0
    assert "no pixel of this cube in the chunks read is complete" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "gappy.tif"), str(tmp_path / "m.nc"), str(tmp_path / "rep"), "--match-bands", "position"]) == 2
    assert "ppa-xr fill" in capsys.readouterr().err


def _heavy_curve_light_line(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """300 heavy rows (weight 1) on a curve, 1700 light ones (weight 1e-4) along a line three times as long, 10% of the
    values missing: the rows with gaps, the weights, and the heavy rows whole."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, 300)
    heavy = np.column_stack([t, t**2, 0.5 * t**3, 0.3 * t**2 - 0.2 * t]) + rng.normal(0, 0.02, (300, 4))
    u = rng.uniform(-3, 3, 1700)
    light = np.column_stack([u, 0.33 + 0.1 * u, 0.2 * u, 0.1 - 0.2 * u]) + rng.normal(0, 0.05, (1700, 4))
    X = np.vstack([heavy, light])
    return np.where(rng.random(X.shape) < 0.1, np.nan, X), np.r_[np.ones(300), np.full(1700, 1e-4)], heavy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_weighted_fit_with_gaps_checks_its_curves_on_its_weighted_rows(seed):
    """missing='fill' with sample_weight: the held-out check of the curves' fill weighs each value as its row. The
    light rows (0.06% of the weight) far along a line outvoted the heavy rows' curve: the model fell back to the
    linear one, its fill of the heavy rows' gaps 10-26x the squared error of a fit of the heavy rows alone (0.015-0.020
    against 0.0008-0.0022, seeds 0-1); now within 1.5x of it, the curves kept."""
    X, w, heavy = _heavy_curve_light_line(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "the model is the linear one"
        model = PPA(random_state=0).fit(X, sample_weight=w, missing="fill")
    assert model.params_.curved_steps()
    gaps = np.isnan(X[:300])
    alone = PPA(random_state=0).fit(X[:300], missing="fill")
    error = np.mean((model.fill(X[:300])[gaps] - heavy[gaps]) ** 2)
    assert error <= 1.5 * np.mean((alone.fill(X[:300])[gaps] - heavy[gaps]) ** 2)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_linear_fit_with_gaps_has_the_variances_of_the_complete_data(seed):
    """Gaussian data, 10% of the values missing at random: missing="fill" degree 1 gives each output the variance of
    the complete-data fit within sampling error, and a grid search over degree 1 and 3 on the gappy data picks 1.

    The linear map is fitted on the fill plus a posterior draw (E[x x^T | x_o] = x_hat x_hat^T + Sigma_mm|o, EM's
    covariance), and the rows with a value held out of the fill's check are refilled with it back. Before, the map
    was fitted on the conditional means (each output's variance low by 2-10 standard errors sqrt(2 / n)) whose held-out
    values were put back without refilling the rest of their rows (the smallest variance up to 35 standard errors
    high: 1.8-3x on seeds 2-3), and the grid search picked degree 3 on seeds 0 and 2. Now the log ratio to the
    complete fit's variances is within 2.1 standard errors over seeds 0-11 (sd 0.56); the bound is 4."""
    from sklearn.model_selection import GridSearchCV

    rng = np.random.default_rng(seed)
    n, d = 3000, 5
    root = rng.normal(size=(d, d))
    X = rng.multivariate_normal(np.zeros(d), root @ root.T, n)
    gappy = np.where(rng.random(X.shape) < 0.1, np.nan, X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        complete = PPA(degree=1, random_state=0).fit(X)
        filled = PPA(degree=1, random_state=0).fit(gappy, missing="fill")
        search = GridSearchCV(PPA(), {"degree": [1, 3]}, cv=3).fit(gappy, missing="fill")
    z = np.log(filled.explained_variance_ / complete.explained_variance_) / np.sqrt(2 / n)
    assert np.abs(z).max() < 4, z
    # variances and rotation together: the fill model's covariance in the complete fit's whitened frame, whose
    # eigenvalues' logs were within 2.8 standard errors of 0 over seeds 0-11 (before: 6.8-10.6, and 22.6 on seed 2)
    cov = [(m.components_.T * m.explained_variance_) @ m.components_ for m in (complete, filled)]
    white = np.linalg.cholesky(np.linalg.inv(cov[0]))
    assert np.abs(np.log(np.linalg.eigvalsh(white.T @ cov[1] @ white))).max() / np.sqrt(2 / n) < 4.5
    assert search.best_params_ == {"degree": 1}, search.cv_results_["mean_test_score"]
