"""One convention per rule, the same in every public face: seeds, and how many components a report keeps."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ppa_xr
from ppa_xr import PPA, cli
from ppa_xr.core import spec
from ppa_xr.cube import accessor, fitting, report, sampling, shift
from tests.conftest import curved_sample

SEEDED = [PPA.__init__, fitting.fit, fitting.fit_pooled, sampling.sample_valid_pixels, shift.evaluate, report.information_report,
          *(getattr(accessor._PPAAccessor, name) for name in ("fit", "sample", "evaluate", "information_report"))]


def test_every_random_state_defaults_to_the_one_seed():
    """fit, the cube sample, evaluate, the report and the CLI draw alike unless told otherwise (fit drew fresh randomness)."""
    assert spec.RANDOM_STATE == 0 and PPA().random_state == spec.RANDOM_STATE
    for func in SEEDED:
        assert inspect.signature(func).parameters["random_state"].default == spec.RANDOM_STATE, func.__qualname__
    parser = cli.build_parser()
    for command in ("fit", "demo"):
        assert parser.parse_args([command, *(["a.tif", "m.nc"] if command == "fit" else [])]).seed == spec.RANDOM_STATE


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_default_fits_of_the_same_data_are_the_same_model(seed):
    X = curved_sample(1500, d=5, seed=seed)
    first, again = PPA(degree=(1, 2, 3)).fit(X), PPA(degree=(1, 2, 3)).fit(X)
    np.testing.assert_array_equal(first.degrees_, again.degrees_)
    np.testing.assert_array_equal(first.components_, again.components_)


def test_a_cube_fit_twice_is_the_same_model(landsat):
    first, again = (landsat.ppa.fit(n_samples=3000, degree=(1, 2), max_curved=1) for _ in range(2))
    assert first.sample_.cubes == again.sample_.cubes
    np.testing.assert_array_equal(first.components_, again.components_)


def test_the_report_keeps_three_components_by_default_or_all_but_one():
    """The accessor, ppa_xr.information and the CLI share one default (the report kept 1, the CLI 3)."""
    assert ppa_xr.information.REPORT_COMPONENTS == 3
    for func in (report.information_report, accessor._PPAAccessor.information_report):
        assert inspect.signature(func).parameters["n_components"].default is None
    X = curved_sample(3000, d=3)
    model = PPA(degree=(1, 2)).fit(X[:1500])
    assert ppa_xr.information.information_report(X[1500:], model).attrs["n_components"] == 2  # d - 1
    wide = curved_sample(3000, d=6)
    assert ppa_xr.information.information_report(wide[1500:], PPA(degree=1).fit(wide[:1500])).attrs["n_components"] == 3
    assert cli.build_parser().parse_args(["report", "a.tif", "m.nc", "out"]).n_components is None


@pytest.mark.parametrize("n_components, kept", [(5, 5), (2, 2), (0.5, None), (6, 5)])
def test_the_report_keeps_the_components_the_model_was_fitted_to_keep(n_components, kept):
    """A model fitted with ``n_components`` has its report's error maps at that many components, as transform keeps (at
    most d - 1): they were at 3 whatever the model kept, silently."""
    wide = curved_sample(3000, d=6)
    model = PPA(degree=1, n_components=n_components).fit(wide[:1500])
    found = ppa_xr.information.information_report(wide[1500:], model).attrs["n_components"]
    assert found == (model.n_components_ if kept is None else kept) and found == min(model.n_components_, 5)


def test_the_inverse_kernel_counts_components_with_the_one_check():
    """kernels.inverse refuses a wrong component count as every other entry point does (core.checks.check_components)."""
    from ppa_xr.core import kernels

    params = PPA(degree=1).fit(curved_sample(500)).params_
    for width in (0, 5):
        with pytest.raises(ValueError, match=r"the number of components along the last axis must be an integer in \[1, 4\], got"):
            kernels.inverse(np.zeros((3, width)), params)


def test_the_helpers_of_the_layers_are_private():
    """fitted, from_params, get_spec and check_input are the layers' plumbing, not the estimator's API."""
    for name in ("fitted", "from_params", "get_spec", "check_input"):
        assert not hasattr(PPA, name) and hasattr(PPA, f"_{name}")


def test_the_mean_error_curve_has_one_name(landsat):
    """evaluate's curves are named as the report's (mse_ppa, mse_pca: squared error summed over bands, mean over pixels);
    its former names stay as deprecated copies, so code that read them still runs."""
    model = landsat.ppa.fit(n_samples=3000, degree=(1, 2), max_curved=1)
    curves = landsat.ppa.evaluate(model, n_samples=2000)
    report = landsat.ppa.information_report(model, n_samples=2000)
    for method in ("ppa", "pca"):
        assert f"mse_{method}" in curves and f"mse_{method}" in report
        np.testing.assert_array_equal(curves[f"error_{method}"], curves[f"mse_{method}"])
        assert "former name of mse_" in curves[f"error_{method}"].attrs["deprecated"] and "deprecated" not in curves[f"mse_{method}"].attrs
