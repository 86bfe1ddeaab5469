"""Geometry: analytic derivatives of the curvilinear features, Frenet-Serret frames, curvatures of a helix,
the PPA metric and k-NN with it."""

import runpy
import sys
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from ppa_xr import PPA
from ppa_xr.geometry import curvatures, derivatives, frenet_frame, metric

from .conftest import curved_sample

A, B = 2.0, 0.8  # helix radius and pitch / 2 pi


def helix(n, noise, seed, turns=1.5):
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 2 * np.pi * turns, n)
    return np.column_stack([A * np.cos(t), A * np.sin(t), B * t]) + noise * rng.normal(size=(n, 3))


@pytest.mark.parametrize("tails", ["clamp", "linear", "polynomial"])
def test_derivatives_match_finite_differences_of_the_inverse(tails):
    X = curved_sample(2000, d=4)
    model = PPA(degree=4, tails=tails, random_state=0).fit(X)
    R = model.transform(X[:20])
    for q in (1, 2):
        D = derivatives(model, X[:20], component=q, order=3)
        h = 1e-3
        step = np.zeros(4)
        step[q - 1] = h
        f = lambda s: model.inverse_transform(R + s * step)  # noqa: E731
        np.testing.assert_allclose(D[:, 0], (f(1) - f(-1)) / (2 * h), atol=1e-5)
        np.testing.assert_allclose(D[:, 1], (f(1) - 2 * f(0) + f(-1)) / h**2, atol=2e-3)
        np.testing.assert_allclose(D[:, 2], (f(2) - 2 * f(1) + 2 * f(-1) - f(-2)) / (2 * h**3), atol=5e-2 * (1 + np.abs(D[:, 2]).max()))


def test_tangent_is_a_column_of_the_inverse_jacobian():
    X = curved_sample(2000, d=4)
    model = PPA(degree=3, random_state=0).fit(X)
    J_inv = np.linalg.inv(model.jacobian(X[:10]))
    for q in (1, 2, 4):
        np.testing.assert_allclose(derivatives(model, X[:10], q, order=1)[:, 0], J_inv[:, :, q - 1], atol=1e-10)


def test_noiseless_helix_curvature_and_torsion_within_2_percent():
    X = helix(2000, 0.0, 0)
    model = PPA(degree=tuple(range(1, 21)), random_state=0).fit(X[:1000])
    points = X[1000:]
    inner = np.abs(model.transform(points)[:, 0] - model.params_.center[0]) < 0.9 * model.params_.scale[0]
    chi = curvatures(model, points[inner])
    assert chi.mean(axis=0)[0] == pytest.approx(A / (A**2 + B**2), rel=0.02)
    assert chi.mean(axis=0)[1] == pytest.approx(B / (A**2 + B**2), rel=0.02)
    frame = frenet_frame(model, points[:50])
    np.testing.assert_allclose(frame @ np.transpose(frame, (0, 2, 1)), np.broadcast_to(np.eye(3), (50, 3, 3)), atol=1e-10)
    np.testing.assert_allclose(np.linalg.det(frame), 1.0, atol=1e-10)
    tangent = derivatives(model, points[:50], 1, order=1)[:, 0]
    np.testing.assert_allclose(frame[:, 0], tangent / np.linalg.norm(tangent, axis=1, keepdims=True), atol=1e-12)


def test_straight_features_have_no_curvature():
    X = curved_sample(2000, d=4)
    model = PPA(degree=1).fit(X)
    np.testing.assert_allclose(curvatures(model, X[:20], component=2), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="component must be an integer in \\[1, 4\\]"):
        curvatures(model, X[:2], component=0)


def test_metric_is_the_whitened_jacobian():
    X = curved_sample(3000, d=3)
    model = PPA(degree=3, random_state=0).fit(X)
    M = metric(model, X[:10])
    np.testing.assert_allclose(M, np.transpose(M, (0, 2, 1)), atol=1e-12)
    assert (np.linalg.eigvalsh(M) > 0).all()
    whitened = PPA(degree=3, random_state=0, whiten=True).fit(X)
    x, dx = X[:10], 1e-5 * np.random.default_rng(0).normal(size=(10, 3))
    step = whitened.transform(x + dx) - whitened.transform(x)
    np.testing.assert_allclose(np.sum(step**2, axis=1), np.einsum("ni,nij,nj->n", dx, M, dx), rtol=1e-3)
    np.testing.assert_allclose(whitened.inverse_transform(whitened.transform(X[:50])), X[:50], atol=1e-10)


def test_ppa_metric_wins_knn_with_few_samples(tmp_path):
    example = _example("metric_knn", "--fast", "--output-dir", str(tmp_path))  # 4 repetitions
    scores = example["results"]["high curvature (kappa = 1)"]
    few = example["SIZES"].index(10)
    assert scores["PPA"][few] > scores["Euclidean"][few] + 0.05 and scores["PPA"][few] > scores["Mahalanobis"][few] + 0.05
    assert scores["PPA"][-1] > 0.97  # and no worse with many


# --------------------------------------------------------------------------- PPA-GD
def test_gd_gradient_matches_finite_differences():
    from ppa_xr.core.leading import explained

    X = curved_sample(800, d=4)
    X = X - X.mean(0)
    e = np.random.default_rng(1).normal(size=4)
    e /= np.linalg.norm(e)
    value, grad = explained(e, X, 4)
    h = 1e-6
    numeric = [(explained(e + h * v, X, 4)[0] - explained(e - h * v, X, 4)[0]) / (2 * h) for v in np.eye(4)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9)


def test_gd_finds_the_curve_pca_cannot():
    """A parabola more curved than wide: its axis leads for PCA, and x is no function of the axis.
    PPA-GD finds x, along which the curve is a function; never worse than the PCA step."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 3000)
    X = np.column_stack([x, 4 * x**2 + 0.05 * rng.normal(size=3000)])
    pca_based = PPA(degree=2, random_state=0).fit(X)
    gd = PPA(degree=2, leading="gd", random_state=0).fit(X)
    assert abs(gd.components_[0, 0]) > 0.99  # the x axis
    assert gd.reconstruction_mse(X)[0] < 0.05 * pca_based.reconstruction_mse(X)[0]
    from ppa_xr.core.leading import explained

    Xc = X - X.mean(0)
    assert explained(gd.components_[0], Xc, 2)[0] >= explained(pca_based.components_[0], Xc, 2)[0]


def test_gd_models_save_and_load(tmp_path):
    import ppa_xr

    X = curved_sample(1500, d=4)
    model = PPA(leading="gd", random_state=0).fit(X)
    loaded = ppa_xr.load_model(model.save(tmp_path / "gd.nc"))
    assert loaded.leading == "gd"
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


# --------------------------------------------------------------------------- principal curves and the examples
def test_principal_curve_follows_a_parabola():
    from ppa_xr.geometry import principal_grid

    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, 3000)
    X = np.column_stack([x, 0.5 * x**2 + 0.02 * rng.normal(size=3000)])
    model = PPA(degree=2, random_state=0).fit(X)
    curve = principal_grid(model, 1, points=50)
    assert curve.shape == (50, 2)
    inside = np.abs(curve[:, 0]) <= 1  # +-2 sd reaches past the data, where the clamp tail holds the curve flat
    assert inside.sum() > 35
    np.testing.assert_allclose(curve[inside, 1], 0.5 * curve[inside, 0] ** 2, atol=0.01)
    assert principal_grid(PPA(degree=2).fit(curved_sample(2000, d=4)), 3, points=5).shape == (5, 5, 5, 4)
    with pytest.raises(ValueError, match=r"n_components \(1, 2 or 3: a curve, a surface or a volume\) must be an integer in \[1, 2\]"):
        principal_grid(model, 4)


def _example(name, *argv):
    """Run ``examples/<name>.py`` as a script with ``argv`` (as a user and the docs build run it) and return
    the names it defined."""
    path = Path(__file__).parents[1] / "examples" / f"{name}.py"
    with mock.patch.object(sys, "argv", [str(path), *argv]):
        return runpy.run_path(str(path), run_name="__main__")


@pytest.fixture(scope="module")
def helices(tmp_path_factory):
    return _example("helix_curvatures", "--fast", "--output-dir", str(tmp_path_factory.mktemp("helix")))


def test_principal_curves_example_draws_table_and_scene(tmp_path):
    _example("principal_curves", "--output-dir", str(tmp_path))
    paths = sorted(tmp_path.glob("*.png"))
    assert [p.name for p in paths] == ["principal_curves_landsat.png", "principal_curves_magic.png"]
    assert all(p.stat().st_size > 30_000 for p in paths)


def test_random_helices_in_4d(helices):
    theory, estimated = helices["theory"], helices["estimated"]  # 3 random helices in fast mode
    assert len(theory) == 3 and (Path(helices["out"]) / "helix_curvatures.png").stat().st_size > 10_000
    np.testing.assert_allclose(estimated[:, :2], theory[:, :2], rtol=0.02)
    np.testing.assert_allclose(estimated[:, 2], 0.0, atol=0.01)  # chi_3 = 0 in 4-d


def test_noisy_helix_within_10_percent(helices):
    """Noise 0.1: the curvature's mean and the torsion's median (a ratio of derivatives, heavy-tailed) within 10%."""
    chi = helices["estimate"](helix(2000, 0.1, 1))
    assert chi[:, 0].mean() == pytest.approx(A / (A**2 + B**2), rel=0.10)
    assert np.median(chi[:, 1]) == pytest.approx(B / (A**2 + B**2), rel=0.10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_geometry_of_a_model_fitted_in_the_span_of_its_samples(seed):
    """A reduced model (S-mode: 12 maps of 30 cells, one cell NaN in every map, as land) has frames and curvatures in
    its 30 inputs: they failed with a shape mismatch, and every derivative was NaN where a cell was left out."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, 12)
    X = np.outer(t, rng.normal(size=30)) + np.outer(t**2, rng.normal(size=30)) + 0.01 * rng.normal(size=(12, 30))
    X[:, 4] = np.nan
    model = PPA(degree=2, configuration="fixed").fit(X)
    assert model.params_.reduced
    points = (X[:5] + X[5:10]) / 2  # inside the fitted range (a fitting sample's extreme sits on the tails' kink)
    D = derivatives(model, points, component=1)
    assert D.shape == (5, model.n_components_, 30) and np.isfinite(D).all() and not D[:, :, 4].any() and not D[:, 2:].any()
    h, R = 1e-4, model.transform(points)
    f = lambda s: model.inverse_transform(R + s * np.eye(R.shape[1])[0])  # noqa: E731
    used = np.arange(30) != 4
    np.testing.assert_allclose(D[:, 0, used], ((f(h) - f(-h)) / (2 * h))[:, used], atol=1e-6)
    frame = frenet_frame(model, points)
    np.testing.assert_allclose(frame @ np.transpose(frame, (0, 2, 1)), np.broadcast_to(np.eye(30), (5, 30, 30)), atol=1e-10)
    np.testing.assert_allclose(frame[:, 0], D[:, 0] / np.linalg.norm(D[:, 0], axis=1, keepdims=True), atol=1e-12)
    chi = curvatures(model, points)
    speed, bend = D[:, 0], D[:, 1]
    kappa = np.sqrt((speed**2).sum(1) * (bend**2).sum(1) - (speed * bend).sum(1) ** 2) / np.linalg.norm(speed, axis=1) ** 3
    assert chi.shape == (5, 29)
    np.testing.assert_allclose(chi[:, 0], kappa, rtol=1e-6)
    np.testing.assert_allclose(chi[:, 1:], 0.0, atol=1e-12)  # a parabola: no torsion


def test_the_principal_grid_of_a_model_fitted_on_a_dataframe_warns_of_nothing():
    """The fitted check of ``principal_grid`` passed an unnamed array to a model fitted on named columns: scikit-learn's
    "X does not have valid feature names" warning, about an array the caller never gave."""
    import pandas as pd

    from ppa_xr.geometry import principal_grid

    X = pd.DataFrame(curved_sample(1000, d=3), columns=["a", "b", "c"])
    model = PPA(degree=2, configuration="fixed").fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert principal_grid(model, 2, points=3).shape == (3, 3, 3)
