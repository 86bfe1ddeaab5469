"""The information report of a scene, as a figure
=================================================

``plot_report`` for the bundled Landsat 8 sample (10 bands, uint16) and for
rasterio's RGB.byte.tif (3 bands, uint8, dequantized for the densities): the
redundancy removed per pixel and the squared error with k = 2 components,
each for PPA and as PPA minus PCA, and the per-component curves; the summary
table beneath.

From a checkout::

    python examples/report_figure.py                        # figures in ./report_figure/
    python examples/report_figure.py --output-dir docs/img
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import ppa_xr  # noqa: E402, F401  (registers .ppa)
from ppa_xr.datasets import open_landsat8_sample, open_rgb_byte  # noqa: E402
from ppa_xr.information import plot_report, summary_table  # noqa: E402


def main(argv: list[str] | None = None) -> list[Path]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="report_figure")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cube in (("landsat_report", open_landsat8_sample()), ("rgb_byte_report", open_rgb_byte(masked=True))):
        model = cube.ppa.fit(n_samples=20_000, random_state=0)
        report = cube.ppa.information_report(model, n_components=2).compute()
        paths.append(out / f"{name}.png")
        plot_report(report).savefig(paths[-1], dpi=60)
        print(f"{name}:\n{summary_table(report)}\n")
    return paths


if __name__ == "__main__":
    main()
