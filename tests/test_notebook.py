"""What a notebook shows: the report's table and figure, and a fitted model, as a cell's value.

The repr methods are checked directly (they need nothing beyond the test extra), and, where ipykernel and
nbclient are installed, in a fresh Jupyter kernel as a reader runs them: each figure comes back as one PNG,
the table as markdown and HTML, not as ``<Figure size ...>`` or a quoted string.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppa_xr import PPA
from ppa_xr.information import information_report, plot_report, summary_table
from tests.conftest import curved_sample


@pytest.fixture(scope="module")
def report():
    X = curved_sample(3000, d=4)
    model = PPA(degree=(1, 2), random_state=0).fit(X[:1500])
    return information_report(X[1500:], model, n_components=2).compute()


def test_table_is_a_string_that_renders_as_a_table(report):
    table = summary_table(report)
    assert isinstance(table, str) and str(table).startswith("| measure | PCA | PPA |")
    assert table._repr_markdown_() == str(table)
    page = table._repr_html_()
    assert page.startswith("<table><thead><tr><th>measure</th><th>PCA</th><th>PPA</th></tr></thead>")
    assert page.count("<tr>") == 1 + str(table).count("\n| ") and "|" not in page and "Reconstruction errors" in page


def test_figure_renders_as_png_without_pyplot(report):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    fig = plot_report(report)
    assert plt.get_fignums() == before  # not in pyplot's registry: nothing else draws it in a notebook
    png = fig._repr_png_()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_a_fresh_kernel_shows_the_table_the_figure_and_the_model(tmp_path):
    """The README's report cells in a fresh kernel, as a newcomer runs them: one PNG for the figure (not its
    text), the table as markdown and HTML, the model's summary as HTML, the principal curves once (pyplot's inline backend
    drew them a second time)."""
    pytest.importorskip("ipykernel")
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    cells = [
        f"import sys; sys.path.insert(0, {str(root)!r})\n"
        "import ppa_xr\nfrom tests.conftest import curved_sample\n"
        "X = curved_sample(3000, d=4)\nmodel = ppa_xr.PPA(degree=(1, 2), random_state=0).fit(X[:1500])\n"
        "report = ppa_xr.information.information_report(X[1500:], model, n_components=2).compute()",
        "ppa_xr.information.summary_table(report)",
        "ppa_xr.information.plot_report(report)",
        "model",
        "ppa_xr.geometry.plot_principal_curves(model, X[:500])",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [[output for output in cell.outputs if output.output_type in ("execute_result", "display_data")] for cell in notebook.cells]
    assert not any(output.output_type == "error" for cell in notebook.cells for output in cell.outputs)
    table, figure, model, curves = shown[1], shown[2], shown[3], shown[4]
    assert len(table) == 1 and {"text/markdown", "text/html"} <= set(table[0].data)
    assert "<table>" in table[0].data["text/html"]
    for cell in (figure, curves):  # once each: not its text, and not again by pyplot's inline backend
        images = [output for output in cell if "image/png" in output.data]
        assert len(images) == 1, [output.data.get("text/plain") for output in cell]
    assert len(model) == 1 and "features: 4" in model[0].data["text/html"] and np.any(["PPA" in model[0].data["text/plain"]])


def test_a_noise_adjusted_model_describes_its_noise_and_units(landsat):
    """The summary of a noise-adjusted model names its noise covariance in a line (it printed the d x d matrix),
    and its errors carry their unit (they had none)."""
    model = landsat.ppa.fit(n_samples=3000, noise_cov="shift", degree=1)
    text = repr(model)
    assert "array(" not in text and text.count("\n") < 15 and len(text) < 1500
    assert "noise_cov=<noise covariance 10 x 10, trace " in text and "noise covariance: 10 x 10, trace " in text
    assert "units: noise units (variances and errors in squared noise units)" in text
    curves = landsat.ppa.evaluate(model, n_samples=2000)
    assert curves.mse_ppa.attrs["units"] == curves.mse_pca.attrs["units"] == "squared noise units"
    plain = landsat.ppa.fit(n_samples=3000, degree=1)
    assert "units: input units (variances and errors in squared input units)" in repr(plain)
    assert landsat.ppa.evaluate(plain, n_samples=2000).mse_ppa.attrs["units"] == "squared feature units"  # no unit attribute
