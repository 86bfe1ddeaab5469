"""Principal curves and surfaces
=============================

Principal curves and surfaces of PPA over data (the paper's figure on
MagicGamma), on a table and on a scene: the first curvilinear feature (red)
and the grid of the first two (blue), drawn over pairs of input features.

From a checkout::

    python examples/principal_curves.py                  # figures in ./principal_curves/
    python examples/principal_curves.py --output-dir docs/img
"""

# %%
# MagicGamma
# ----------
# The table normalised to [0, 1] per feature, PPA with degrees selected in
# 1..5, and the principal curve and surface over three pairs of its
# features, as in the paper's figure.
from ppa_xr import PPA
from ppa_xr.datasets import load_table, open_landsat8_sample
from ppa_xr.geometry import plot_principal_curves

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--output-dir", default="principal_curves", help="where the figures go")
out = Path(parser.parse_args().output_dir)
out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore
table = load_table("MagicGamma")
X = table.normalised()
model = PPA(random_state=0).fit(X)
fig = plot_principal_curves(model, X, pairs=((0, 1), (0, 2), (1, 2)), labels=table.feature_names,
                            figsize=(10, 3.6))
fig.savefig(out / "principal_curves_magic.png", dpi=100)

# %%
# The bundled Landsat 8 scene
# ---------------------------
# 20,000 pixels sampled from the scene (``cube.ppa.sample``), PPA fitted on
# them, and its curve and surface over the red/NIR and SWIR1/SWIR2 band
# pairs.
cube = open_landsat8_sample()
pixels = cube.ppa.sample(n_samples=20_000, random_state=0)
scene_model = PPA(random_state=0).fit(pixels)
bands = [str(b) for b in cube.band.values]
pairs = ((bands.index("B4"), bands.index("B5")), (bands.index("B6"), bands.index("B7")))
fig = plot_principal_curves(scene_model, pixels, pairs=pairs, labels=bands, figsize=(8, 3.8))
fig.savefig(out / "principal_curves_landsat.png", dpi=100)
