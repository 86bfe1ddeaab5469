"""The numpy core: exact inverse, unit Jacobian, tails, PCA limit, subset invariance."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ppa_xr import PPA
from ppa_xr.core import basis, forward, inverse, jacobian, kernels

from .conftest import curved_sample


def pca_reconstruction(X, k):
    Xc = X - X.mean(0)
    vt = np.linalg.svd(Xc, full_matrices=False)[2]
    return X.mean(0) + Xc @ vt[:k].T @ vt[:k]


def mse(a, b):
    return float(np.mean(np.sum((a - b) ** 2, axis=1)))


@pytest.mark.parametrize("tails", basis.TAILS)
def test_round_trip_and_unit_determinant(curved, tails):
    model = PPA(tails=tails, random_state=0).fit(curved)
    far = curved * 3 + 5  # far outside the fitted range: exercises the tails
    # raw polynomials compose to astronomically large values far away (exactly
    # invertible, but float64 cannot hold the round trip): only the safe tails go there
    for X in (curved, far) if tails != "polynomial" else (curved,):
        R = model.transform(X)
        back = model.inverse_transform(R)
        assert np.max(np.abs(back - X)) <= 1e-10 * np.max(np.abs(X))
        det = np.linalg.det(model.jacobian(X[:200]))
        np.testing.assert_allclose(np.abs(det), 1.0, atol=1e-10)


def test_jacobian_matches_finite_differences(curved):
    model = PPA(degree=4, tails="linear", random_state=0).fit(curved)
    x = curved[:5]
    J = model.jacobian(x)
    h = 1e-6
    for j in range(x.shape[1]):
        step = np.zeros(x.shape[1])
        step[j] = h
        numeric = (model.transform(x + step) - model.transform(x - step)) / (2 * h)
        np.testing.assert_allclose(J[:, :, j], numeric, atol=1e-6)


def test_float32_stays_float32(curved):
    model = PPA(random_state=0).fit(curved)
    X32 = curved.astype(np.float32)
    R = model.transform(X32)
    assert R.dtype == np.float32
    assert model.inverse_transform(R).dtype == np.float32
    np.testing.assert_allclose(R, model.transform(curved), rtol=0, atol=5e-6 * np.abs(R).max())  # measured 5.2e-7: float32 rounding


@pytest.mark.parametrize("name", ["Segmentation", "Pageblocks"])
def test_degree_one_is_pca(name):
    from ppa_xr.datasets import load_table

    X = load_table(name).normalised()
    model = PPA(degree=1).fit(X)
    R = model.transform(X)
    for k in range(1, X.shape[1] + 1):
        ours = model.inverse_transform(R[:, :k])
        np.testing.assert_allclose(ours, pca_reconstruction(X, k), atol=1e-10)


@pytest.mark.parametrize("name", ["Segmentation", "Sat"])
def test_training_error_never_above_pca(name):
    """Paper's Property 2 on real data, at every number of retained components."""
    from ppa_xr.datasets import load_table

    X = load_table(name).normalised()
    model = PPA(random_state=0).fit(X)
    R = model.transform(X)
    gains = []
    for k in range(1, X.shape[1]):
        ppa, pca = mse(model.inverse_transform(R[:, :k]), X), mse(pca_reconstruction(X, k), X)
        assert ppa <= pca * (1 + 1e-9) + 1e-14
        gains.append(pca - ppa)
    assert max(gains) > 0  # the curvature of real data is actually used


def test_curved_data_beats_pca_strongly(curved):
    model = PPA(random_state=0).fit(curved)
    R = model.transform(curved)
    assert mse(model.inverse_transform(R[:, :1]), curved) < 0.2 * mse(pca_reconstruction(curved, 1), curved)


def test_subset_invariance(curved):
    """Transform of a subset is the subset of the transform: chunk-wise application is exact."""
    model = PPA(random_state=0).fit(curved)
    full = model.transform(curved)
    idx = np.random.default_rng(1).choice(len(curved), 257, replace=False)
    np.testing.assert_allclose(model.transform(curved[idx]), full[idx], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(forward(curved[idx].reshape(257, 1, -1), model.params_)[:, 0], full[idx], rtol=0, atol=1e-13)


def test_kernels_accept_any_leading_shape(curved):
    model = PPA(random_state=0).fit(curved)
    cube = curved[:600].reshape(20, 30, -1)
    R = forward(cube, model.params_)
    assert R.shape == (20, 30, 4)
    np.testing.assert_allclose(inverse(R, model.params_), cube, atol=1e-10)
    assert jacobian(cube[:2], model.params_).shape == (2, 30, 4, 4)


def test_truncated_forward_equals_leading_columns(curved):
    model = PPA(random_state=0).fit(curved)
    np.testing.assert_allclose(forward(curved, model.params_, 2), model.transform(curved)[:, :2], atol=1e-13)


def test_tails_agree_inside_and_differ_outside():
    X = curved_sample(2000, d=3, noise=0.02)
    models = {t: PPA(degree=5, tails=t, random_state=0).fit(X) for t in basis.TAILS}
    inside = X[:100]
    ref = models["clamp"].transform(inside)
    for m in models.values():
        np.testing.assert_allclose(m.transform(inside), ref, atol=1e-12)
    lead = models["clamp"].components_[0]
    far = X.mean(0) + np.outer([30.0, 60.0, 90.0], lead)  # far along the first curve
    clamp = models["clamp"].transform(far)
    np.testing.assert_allclose(clamp[0, 1:], clamp[1, 1:], atol=1e-9)  # conditional mean held constant
    linear = models["linear"].transform(far)
    np.testing.assert_allclose(linear[2] - linear[1], linear[1] - linear[0], atol=1e-9)  # straight tangent
    assert not np.allclose(linear[1, 1:], clamp[1, 1:])
    poly = models["polynomial"].transform(far)
    assert np.abs(poly[1, 1:]).max() > 100 * np.abs(clamp[1, 1:]).max()


def test_degree_15_large_sample_is_accurate():
    X = curved_sample(100_000, d=3, noise=0.01, seed=3)
    errors = {}
    for degree in (10, 15):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model = PPA(degree=degree).fit(X)
        R = model.transform(X)
        assert np.max(np.abs(model.inverse_transform(R) - X)) <= 1e-10 * np.abs(X).max()
        errors[degree] = mse(model.inverse_transform(R[:, :1]), X)
    assert errors[15] <= errors[10] * (1 + 1e-9)  # nested bases: a higher degree never fits worse


@settings(max_examples=40, deadline=None)
@given(
    X=arrays(np.float64, st.tuples(st.integers(20, 60), st.integers(2, 6)), elements=st.floats(-1e3, 1e3)),
    degree=st.integers(1, 4),
    tails=st.sampled_from(basis.TAILS),
)
@pytest.mark.filterwarnings("ignore:the features' standard deviations differ")  # drawn columns of any scale
def test_hypothesis_round_trip_and_volume(X, degree, tails):
    model = PPA(degree=degree, tails=tails).fit(X)
    R = model.transform(X)
    scale = max(np.abs(X).max(), 1.0)
    assert np.max(np.abs(model.inverse_transform(R) - X)) <= 1e-8 * scale
    np.testing.assert_allclose(np.abs(np.linalg.det(model.jacobian(X[:5]))), 1.0, atol=1e-8)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 16383, 16385, 50_001])
def test_blocking_and_threads_do_not_change_results(threads, n):
    """Rows spanning several blocks, partial last blocks and any thread count give the same map."""
    from ppa_xr.core import kernels

    X = curved_sample(n, d=6, seed=5)
    model = PPA(random_state=0).fit(X[:4000] if n > 4000 else curved_sample(4000, d=6, seed=5))
    ref = np.vstack([kernels.forward(X[i : i + 1000], model.params_, threads=1) for i in range(0, n, 1000)])
    R = kernels.forward(X, model.params_, threads=threads)
    np.testing.assert_allclose(R, ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernels.inverse(R, model.params_, threads=threads), X, atol=1e-9)
    R32 = kernels.forward(X.astype(np.float32), model.params_, threads=threads)
    np.testing.assert_allclose(R32, ref, atol=2e-4 * np.abs(ref).max())


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", ["pixel-major", "band-first"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_straight_map_written_straight_into_the_output(threads, layout, dtype):
    """A model without polynomials (or the outputs before its first one) is one GEMM written into the
    output: the same values as ``A D^-1 (x - mean)``, invalid pixels NaN in every component."""
    from ppa_xr.core import kernels

    X = curved_sample(40_000, d=5, seed=3)
    for model in (PPA(degree=1).fit(X), PPA(degree=1, standardize=True).fit(X * [1, 10, 100, 1, 1])):
        data = (X * model.scale_ if model.standardize else X).astype(dtype)
        data[7, 2], data[11, 0], data[13] = np.nan, np.inf, -np.inf
        cube = np.ascontiguousarray(data.T).reshape(5, 200, 200) if layout == "band-first" else data.reshape(200, 200, 5)
        view = np.moveaxis(cube, 0, -1) if layout == "band-first" else cube
        for k in (5, 2):
            R = kernels.forward(view, model.params_, n_components=k, threads=threads).reshape(-1, k)
            assert R.dtype == dtype
            bad = ~np.isfinite(data).all(axis=1)
            expected = ((np.where(bad[:, None], 0, data).astype(np.float64) - model.mean_) / model.scale_) @ model.components_[:k].T
            assert np.isnan(R[bad]).all() and np.isfinite(R[~bad]).all()
            np.testing.assert_allclose(R[~bad], expected[~bad], rtol=0, atol=(1e-10 if dtype == np.float64 else 2e-4) * np.abs(expected[~bad]).max())


def test_params_pickle_without_their_caches(curved):
    import pickle

    model = PPA(random_state=0).fit(curved)
    before = len(pickle.dumps(model.params_))
    model.transform(curved.astype(np.float32))  # fills the float32 and kernel-plan caches
    model.inverse_transform(model.transform(curved)[:, :2])
    assert model.params_._cache
    restored = pickle.loads(pickle.dumps(model.params_))
    assert len(pickle.dumps(model.params_)) == before and restored._cache == {}
    np.testing.assert_array_equal(forward(curved, restored), model.transform(curved))


def test_truncated_reconstruction_is_the_documented_sum():
    """``x^ = mean + sum_{p<k} [a_p alpha_p + inverse_bias_p + T_p(alpha_p) inverse_p]`` (the params'
    documented form, which the geometry differentiates), written out by hand, is the kernel's
    reconstruction at every k."""
    X = curved_sample(4000, d=5)
    model = PPA(degree=4, random_state=0).fit(X)
    p = model.params_
    assert len(p.curved_steps()) >= 2
    R = model.transform(X[:50])
    for k in range(1, 6):
        x = p.mean + R[:, :k] @ p.rotation[:k] + p.inverse_bias[:k].sum(axis=0)
        for q in (q for q in p.curved_steps() if q < k):
            g = int(p.degrees[q])
            T = basis.powers((R[:, q] - p.center[q]) / p.scale[q], g, p.tails, np.empty((g, len(R))))
            x += T.T @ p.inverse[q, :g]
        np.testing.assert_allclose(model.inverse_transform(R[:, :k]), x, rtol=0, atol=1e-12 * np.abs(X).max())


def test_a_strided_band_first_view_gets_a_band_first_output():
    """A slice of a (band, y, x) raster, as dask hands to a task, is band-major though not contiguous: its output
    must be band-major (contiguous per component), or every consumer pays for a transpose."""
    X = curved_sample(3000, d=4)
    model = PPA(degree=2, random_state=0).fit(X)
    raster = np.moveaxis(curved_sample(64 * 64, d=4).reshape(64, 64, 4), -1, 0).copy()  # (band, y, x), contiguous
    view = np.moveaxis(raster[:, 8:40, 16:48], 0, -1)  # (y, x, band): a strided band-first slice
    out = kernels.forward(view, model.params_)
    assert np.moveaxis(out, -1, 0).flags.c_contiguous
    np.testing.assert_allclose(out.reshape(-1, 4), kernels.forward(view.reshape(-1, 4), model.params_), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copy_into_every_layout(dtype):
    from ppa_xr.core import blas

    rng = np.random.default_rng(0)
    src = rng.normal(size=(7, 300)).astype(dtype)
    pixel_major = np.zeros((400, 9), dtype)  # a column-major view of rows 50..349, columns 1..7: the transposing copy
    blas.copy_into(src, pixel_major[50:350, 1:8].T)
    np.testing.assert_array_equal(pixel_major[50:350, 1:8], src.T)
    assert not pixel_major[:50].any() and not pixel_major[350:].any() and not pixel_major[:, [0, 8]].any()
    for dst in (np.zeros((7, 300), dtype), np.zeros((7, 300), dtype, order="F"), np.zeros((7, 600), dtype)[:, ::2]):
        blas.copy_into(src, dst)  # same layout, and a layout BLAS cannot address: numpy copies
        np.testing.assert_array_equal(dst, src)
    blas.copy_into(src[:, ::3], pixel_major[:100, :7].T)  # a strided source
    np.testing.assert_array_equal(pixel_major[:100, :7], src[:, ::3].T)
    with pytest.raises(ValueError, match="one shape"):
        blas.copy_into(src, np.zeros((300, 7), dtype))


def test_degree_one_is_scikit_learns_pca_at_300_features():
    """``degree=1`` is PCA: one eigendecomposition, the components scikit-learn's up to sign, the variances up to
    its ``n / (n - 1)``, and no per-step work (d = 300 in well under a second)."""
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(0)
    n, d = 2000, 300
    X = rng.normal(size=(n, d)) * 0.98 ** np.arange(d) @ np.linalg.qr(rng.normal(size=(d, d)))[0] + 5.0
    ours, theirs = PPA(degree=1).fit(X), PCA().fit(X)
    signs = np.sign(np.sum(ours.components_ * theirs.components_, axis=1))
    np.testing.assert_array_equal(np.abs(signs), 1)
    np.testing.assert_allclose(ours.components_ * signs[:, None], theirs.components_, atol=1e-9)
    np.testing.assert_allclose(ours.explained_variance_ * n / (n - 1), theirs.explained_variance_, rtol=1e-10)
    np.testing.assert_allclose(ours.transform(X) * signs, theirs.transform(X), atol=1e-9 * np.abs(theirs.transform(X)).max())
    np.testing.assert_allclose(ours.components_, ours.params_.pca_rotation, atol=1e-9)  # every row oriented, as the baseline's


def test_fit_error_ratio_is_the_error_curve_on_the_fitting_sample(curved):
    """The stored curve comes from the fit's residual energies ``tr(S_k)``; the kernels measure the same on the rows."""
    for options in ({}, {"robust": True}, {"standardize": True}, {"leading": "gd"}):
        model = PPA(random_state=0, **options).fit(curved)
        np.testing.assert_allclose(model.fit_error_ratio_, model.evaluate(curved).relative, rtol=1e-9)


def test_least_squares_falls_back_to_a_pivoted_qr_in_place():
    """An ill-conditioned design (cond(B^T B) > 1e6) is solved by LAPACK's gelsy on ``y()`` in place: scipy's
    ``lstsq`` (gelsy) result, without a copy of ``y``."""
    import scipy.linalg

    from ppa_xr.core.linalg import least_squares

    rng = np.random.default_rng(0)
    t = np.exp(rng.normal(size=5000) * 2)
    design = np.column_stack([t**k for k in range(5)])
    Y = rng.normal(size=(5000, 40))
    gram = design.T @ design
    assert np.linalg.cond(gram) > 1e6
    target = np.asfortranarray(Y)
    W = least_squares(design, lambda: target, gram, design.T @ Y)
    np.testing.assert_array_equal(W, scipy.linalg.lstsq(design, Y, cond=1e-10, lapack_driver="gelsy")[0])
    assert np.shares_memory(W, target)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_fit_centres_as_numpy_does_bit_for_bit_on_any_thread_count(seed, dtype):
    """The centring's two compiled passes (the columns' sums and extremes, then the scaled copy, a block per thread)
    give numpy's ``X.mean(axis=0)``, ``X - mean`` and its power-of-two scale to the last bit (signed zeros too),
    features at any scale (1e-150 .. 1e150 in float64)."""
    from ppa_xr.core.linalg import power_of_two
    from ppa_xr.core.ppa import _centred

    rng = np.random.default_rng(seed)
    span = 150 if dtype == np.float64 else 15
    X = (rng.standard_normal((3001, 37)) * 10.0 ** rng.uniform(-span, span, 37)).astype(dtype)
    X[:, 0], X[:5, 1] = -0.0, -0.0
    mean = X.mean(axis=0, dtype=np.float64)
    factor = power_of_two(np.abs(X - mean).max())
    expected = (X - mean) * (1 / factor)
    for threads in (1, 2, 3):
        Z, m, f = _centred(X, None, threads=threads)
        assert f == factor and m.tobytes() == mean.tobytes() and Z.tobytes() == expected.tobytes()


def test_the_centrings_moments_read_whole_rows_on_any_thread_count():
    """The columns' sums and extremes are one pass over whole rows, whatever the threads: a share of the columns per
    thread is another array type for the compiled pass (a second version, loaded at its first call) whose loop
    reads 2.5x slower, and every thread streams every row all the same."""
    from ppa_xr.core import compiled
    from ppa_xr.core.ppa import THREADED_WORK, _centred

    X = np.random.default_rng(0).standard_normal((20_000, 60))
    assert len(X) * X.shape[1] ** 2 >= THREADED_WORK  # large enough to take the threads
    for threads in (1, 2, 3):
        _centred(X, None, threads=threads)
    assert {arg.layout for sig in compiled.column_moments.signatures for arg in sig[:1]} == {"C"}


@pytest.mark.parametrize("options", [{"degree": 1}, {"configuration": "fixed"}])
def test_a_fits_map_records_the_steps_it_wrote_polynomials_for(options):
    """The composition records the steps whose polynomial rows it wrote (none at ``degree=1``, a superset of the
    curved steps otherwise): the rows of the others are 0, and scaling the map or finding its curves reads none of
    them. The scaled map keeps the record and is the map scaled without it, bit for bit."""
    from ppa_xr.core.params import PPAParams
    from ppa_xr.core.ppa import fit_params

    params = fit_params(curved_sample(3000, d=8, seed=1), PPA(**options)._get_spec(), rng=np.random.default_rng(0))
    written = params.written_steps()
    assert written is not None and set(params.curved_steps()) <= set(written.tolist())
    assert (len(written) == 0) == (options == {"degree": 1}) and params.written_steps(np.arange(3)) is written
    others = np.setdiff1d(np.arange(params.n_features - 1), written)
    for name in ("forward_bias", "forward", "inverse_bias", "inverse"):
        assert not getattr(params, name)[others].any()
    scaled, plain = params.scaled(2.0**-7), PPAParams(**params.arrays(), tails=params.tails).scaled(2.0**-7)
    assert plain.written_steps() is None and scaled.written_steps() is written
    assert scaled.curved_steps() == plain.curved_steps() == params.curved_steps()
    for name, value in plain.arrays().items():
        assert getattr(scaled, name).tobytes() == value.tobytes(), name


@pytest.mark.parametrize("project", [True, False])
def test_the_covariances_recompute_is_the_same_on_any_thread_count(project):
    """The recompute's panels on 1, 2 or 3 threads, added in panel order: the same covariance (and projected rows),
    bit for bit."""
    from ppa_xr.core.linalg import PANEL
    from ppa_xr.core.steps import Residual

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((5 * PANEL + 17, 40))
    frame = np.linalg.qr(rng.standard_normal((40, 9)))[0]
    renewed = []
    for threads in (1, 2, 3):
        res = Residual(Z.copy(), 100, frame, np.eye(9))
        res.renew(project, threads=threads)
        renewed.append((res.cov.tobytes(), res.Z.tobytes()))
    assert renewed[1] == renewed[0] and renewed[2] == renewed[0]


@pytest.mark.parametrize("pixel_major", [False, True])
def test_a_points_product_gives_each_point_the_same_bits_whatever_the_count(pixel_major):
    """``matmul_into(..., points=1)``: a pixel's result does not depend on how many pixels share the call (BLAS
    rounds a count's remainder with other kernels), so every chunking gives the same bits; with ``beta`` too."""
    rng = np.random.default_rng(4)
    a, x, c0 = rng.normal(size=(7, 15)), rng.normal(size=(15, 1000)) * 1e3, rng.normal(size=(7, 1000))
    from ppa_xr.core import blas

    if pixel_major:  # (rows, pixels) views of pixel-major arrays, as the kernels see row-major pixels
        x, c0 = np.ascontiguousarray(x.T).T, np.ascontiguousarray(c0.T).T

    def product(width: int) -> np.ndarray:
        out = c0.copy(order="K")
        with blas.single_thread:
            for start in range(0, 1000, width):
                blas.matmul_into(a, x[:, start : start + width], out[:, start : start + width], -1.0, 1.0, points=1)
        return out

    whole = product(1000)
    np.testing.assert_allclose(whole, c0 - a @ x, rtol=1e-12, atol=1e-9)
    for width in (1, 3, 53, 333, 640):
        np.testing.assert_array_equal(product(width), whole)
