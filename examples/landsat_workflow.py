"""A Landsat scene from open to components, error maps and the report
=====================================================================

The bundled Landsat 8 sample (10 bands, 320 x 320 px, uint16) as a user
would take it through ppa_xr: open it lazily, fit PPA on sampled pixels,
map the first three components, compare the per-pixel reconstruction error
with that of the PCA of the same sample, and compute the information report.
Then a short time series (the same scene on three dates, the second with
another illumination and a missing strip): one model pooled over the dates
against one model per date, each judged on the other dates.

From a checkout::

    python examples/landsat_workflow.py                        # figure in ./landsat_workflow/
    python examples/landsat_workflow.py --output-dir docs/img
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
import xarray as xr  # noqa: E402

import ppa_xr  # noqa: E402
from ppa_xr.datasets import open_landsat8_sample  # noqa: E402
from ppa_xr.information import summary_table  # noqa: E402


def dates(cube: xr.DataArray) -> list[xr.DataArray]:
    """Three dates of the scene: as measured, brighter with a missing strip, and darker."""
    second = (cube.astype("float32") * 1.05 + 100).where(cube.x > cube.x[40])
    return [cube.astype("float32"), second, cube.astype("float32") * 0.95]


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="landsat_workflow")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)

    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    print(f"cube: {dict(cube.sizes)} {cube.dtype}, {cube.rio.crs}, chunks {cube.data.chunksize}")
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    print(model)
    scores = cube.ppa.transform(model, n_components=3)  # lazy
    errors = {name: cube.ppa.reconstruction_error(m, 2) for name, m in (("PPA", model), ("PCA", model.pca_))}

    fig, axes = plt.subplots(1, 5, figsize=(20, 4), layout="constrained")
    for j in range(3):
        scores.isel(component=j).plot(ax=axes[j], cmap="gray", add_colorbar=False)
        axes[j].set_title(f"component {j + 1}")
    errors["PPA"].plot(ax=axes[3], robust=True, cbar_kwargs={"label": "squared error (k = 2)"})
    axes[3].set_title("PPA squared error, k = 2")
    (errors["PPA"] - errors["PCA"]).plot(ax=axes[4], robust=True, cmap="RdBu_r", center=0, cbar_kwargs={"label": "PPA - PCA"})
    axes[4].set_title("PPA minus PCA (blue: PPA better)")
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(3))
        ax.set_aspect("equal")
        ax.ticklabel_format(useOffset=False, style="plain")
        ax.tick_params(labelsize=7)
    path = out / "landsat_workflow.png"
    fig.savefig(path, dpi=60)
    print(f"mean squared error, k = 2: PPA {float(errors['PPA'].mean()):.4g}, PCA {float(errors['PCA'].mean()):.4g}")

    report = cube.ppa.information_report(model, n_components=2, n_samples=20_000).compute()
    print(summary_table(report))

    scenes = dates(cube)
    pooled = ppa_xr.fit_pooled(scenes, n_samples=30_000, random_state=0)
    print("\nerror relative to each model's own PCA on every date (100 = PCA, mean over k; held-out pixels):")
    print("model           " + "".join(f"date {t}  " for t in range(3)))
    for name, m in [("pooled", pooled)] + [(f"date {t} only", scenes[t].ppa.fit(n_samples=10_000, random_state=0)) for t in range(3)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a date a model was not fitted on may raise a ShiftWarning; the table shows it
            row = [float(scene.ppa.evaluate(m, n_samples=5000).relative_error.mean()) for scene in scenes]
        print(f"{name:<16}" + "".join(f"{v:7.1f}  " for v in row))
    print(f"\nwrote {path}")
    return path


if __name__ == "__main__":
    main()
