"""Principal curves and surfaces
=============================

Principal curves and surfaces of PPA over data (the paper's figure on MagicGamma), on a table and on a scene.

* MagicGamma (normalised): the first curvilinear feature (red) and the grid
  of the first two (blue) over three pairs of its features;
* the bundled Landsat 8 scene: the same through 20,000 sampled pixels, over
  two band pairs (red/NIR and SWIR1/SWIR2).

From a checkout::

    python examples/principal_curves.py                  # figures in ./principal_curves/
    python examples/principal_curves.py --output-dir docs/img
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from ppa_xr import PPA  # noqa: E402
from ppa_xr.datasets import load_table, open_landsat8_sample  # noqa: E402
from ppa_xr.geometry import plot_principal_curves  # noqa: E402


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="principal_curves")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    table = load_table("MagicGamma")
    X = table.normalised()
    model = PPA(random_state=0).fit(X)
    fig = plot_principal_curves(model, X, pairs=((0, 1), (0, 2), (1, 2)), labels=table.feature_names)
    paths = [out / "principal_curves_magic.png"]
    fig.savefig(paths[-1], dpi=100)
    cube = open_landsat8_sample()
    pixels = cube.ppa.sample(n_samples=20_000, random_state=0)
    scene_model = PPA(random_state=0).fit(pixels)
    bands = [str(b) for b in cube.band.values]
    pairs = ((bands.index("B4"), bands.index("B5")), (bands.index("B6"), bands.index("B7")))
    fig = plot_principal_curves(scene_model, pixels, pairs=pairs, labels=bands)
    paths.append(out / "principal_curves_landsat.png")
    fig.savefig(paths[-1], dpi=100)
    print("wrote " + ", ".join(map(str, paths)))
    return paths


if __name__ == "__main__":
    main()
