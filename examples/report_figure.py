"""The information report of a scene, as a figure
=================================================

``plot_report`` for the bundled Landsat 8 sample (10 bands, uint16) and for
rasterio's RGB.byte.tif (3 bands, uint8, dequantized for the densities): the
redundancy removed per pixel and the squared error with k = 2 components,
each for PPA and as PPA minus PCA, and the per-component curves; the summary
table beneath each figure.

From a checkout::

    python examples/report_figure.py                        # figures in ./report_figure/
    python examples/report_figure.py --output-dir docs/img
"""

# %%
# The Landsat 8 sample
# --------------------
# A model fitted on 20,000 sampled pixels; the report is estimated on other
# pixels of the scene (held out) and its maps are computed in one pass.
# ``plot_report`` returns a matplotlib Figure drawn for a wide screen; its
# text is enlarged here so that it stays legible on a page (click the figure
# for the full size).
from matplotlib.text import Text

import ppa_xr  # noqa: F401  (registers .ppa)
from ppa_xr.datasets import open_landsat8_sample, open_rgb_byte
from ppa_xr.information import plot_report, summary_table

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--output-dir", default="report_figure", help="where the figures go")
out = Path(parser.parse_args().output_dir)
out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore


def legible(fig, scale=1.3):
    """The figure with every text enlarged by ``scale``."""
    for text in fig.findobj(Text):
        text.set_fontsize(text.get_fontsize() * scale)
    return fig


cube = open_landsat8_sample()
model = cube.ppa.fit(n_samples=20_000, random_state=0)
report = cube.ppa.information_report(model, n_components=2).compute()
legible(plot_report(report, figsize=(17, 11))).savefig(out / "landsat_report.png", dpi=80)
print(summary_table(report))

# %%
# RGB.byte.tif
# ------------
# Three 8-bit bands: the densities are those of the dequantized values
# (``report.attrs["dequantized"]`` flags the bands), and the nodata border is
# left out of the fit and the maps.
cube = open_rgb_byte(masked=True)
model = cube.ppa.fit(n_samples=20_000, random_state=0)
report = cube.ppa.information_report(model, n_components=2).compute()
legible(plot_report(report, figsize=(17, 11))).savefig(out / "rgb_byte_report.png", dpi=80)
print(summary_table(report))
