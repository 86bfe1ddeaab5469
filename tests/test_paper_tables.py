"""examples/paper_tables.py in fast mode: PPA beats PCA as in the paper's section 5."""

import runpy
import sys
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest


@pytest.fixture(scope="module")
def paper_tables(tmp_path_factory):
    """The example run as a script in its fast mode (2 realisations, at most 4000 rows), as the docs build runs it."""
    path = Path(__file__).parents[1] / "examples" / "paper_tables.py"
    out = tmp_path_factory.mktemp("paper_tables")
    with mock.patch.object(sys, "argv", [str(path), "--fast", "--output-dir", str(out)]):
        names = runpy.run_path(str(path), run_name="__main__")
    assert (out / "relative_mse.png").stat().st_size > 20_000
    return SimpleNamespace(**names)


@pytest.fixture(scope="module")
def results(paper_tables):
    assert paper_tables.realisations == 2
    return paper_tables.results


def test_ppa_reduces_more_multi_information_on_every_table(results):
    for name, r in results.items():
        assert r["mi_ppa_test_spacing"].mean() > r["mi_pca_test_spacing"].mean(), name  # held out
        assert r["mi_ppa_train_histogram"].mean() > r["mi_pca_train_histogram"].mean(), name  # as in the paper


def test_ppa_test_error_below_pca_on_average(results):
    for name, r in results.items():
        assert r["rel_test"].mean() < 100, name
        assert (r["rel_train"] <= 100 + 1e-6).all(), name  # Property 2 on the training half


def test_tables_and_plot_are_written(paper_tables, results, tmp_path, capsys):
    paper_tables.print_tables(results)
    out = capsys.readouterr().out
    sat = results["Sat"]["mi_ppa_test_spacing"].mean()
    assert "| Sat" in out and f"{sat:.3f}" in out and "on the test half" in out  # the computed value, printed
    assert paper_tables.plot(results, tmp_path).stat().st_size > 20_000
    assert "PPA held out" in out and "histogram estimator" in out
    assert np.isfinite([r["mi_ppa_test_spacing"].mean() for r in results.values()]).all()
