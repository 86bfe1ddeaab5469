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

    python examples/landsat_workflow.py                        # figures in ./landsat_workflow/
    python examples/landsat_workflow.py --output-dir docs/img
"""

# %%
# Open the scene
# --------------
# Lazily, in chunks of 160 x 160 pixels: nothing is read until a result is
# computed. The bands keep their names (``B1`` ... ``B11``) and the cube its
# coordinate reference system.
import warnings

import matplotlib.pyplot as plt
import xarray as xr

import ppa_xr
from ppa_xr.datasets import open_landsat8_sample
from ppa_xr.information import summary_table

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--output-dir", default="landsat_workflow", help="where the figures go")
out = Path(parser.parse_args().output_dir)
out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore
cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
print(f"{dict(cube.sizes)} {cube.dtype}, {cube.rio.crs}, chunks {cube.data.chunksize}")
print("bands:", cube.band.values.tolist())

# %%
# Fit PPA on sampled pixels
# -------------------------
# 20,000 valid pixels drawn at random in one pass over the chunks. The
# model's summary lists the degree chosen for each step (1 is a straight,
# PCA step) and its error against the PCA of the same sample, per number of
# components kept.
model = cube.ppa.fit(n_samples=20_000, random_state=0)
print(model)

# %%
# The first three components
# --------------------------
# ``transform`` is lazy: the components are computed chunk by chunk when
# plotted. They keep the cube's coordinates and CRS.
scores = cube.ppa.transform(model, n_components=3)
fig, axes = plt.subplots(1, 3, figsize=(9.5, 3.4), layout="constrained", sharey=True)
for j, ax in enumerate(axes):
    scores.isel(component=j).plot.imshow(ax=ax, cmap="gray", robust=True, add_colorbar=False,
                                         add_labels=False)
    ax.set(title=f"component {j + 1}", aspect="equal", xticks=[], yticks=[])
fig.savefig(out / "landsat_components.png", dpi=100)

# %%
# Where PPA reconstructs better than PCA
# --------------------------------------
# The squared reconstruction error of every pixel with 2 components, for PPA
# and for the PCA of the same sample (``model.pca_``), and their difference:
# blue where PPA's error is smaller.
errors = {"PPA": cube.ppa.reconstruction_error(model, 2),
          "PCA": cube.ppa.reconstruction_error(model.pca_, 2)}
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8), layout="constrained", sharey=True)
errors["PPA"].plot.imshow(ax=axes[0], robust=True, add_labels=False,
                          cbar_kwargs={"label": "squared error, k = 2"})
(errors["PPA"] - errors["PCA"]).plot.imshow(ax=axes[1], robust=True, cmap="RdBu_r", center=0,
                                             add_labels=False,
                                             cbar_kwargs={"label": "PPA minus PCA"})
axes[0].set_title("PPA's squared error")
axes[1].set_title("PPA minus PCA (blue: PPA better)")
for ax in axes:
    ax.set(aspect="equal", xticks=[], yticks=[])
fig.savefig(out / "landsat_errors.png", dpi=100)
means = ", ".join(f"{name} {float(error.mean()):.4g}" for name, error in errors.items())
print(f"mean squared error, k = 2: {means}")

# %%
# The information report
# ----------------------
# Redundancy removed and reconstruction error, PPA beside PCA, estimated on
# pixels the fit never saw.
report = cube.ppa.information_report(model, n_components=2, n_samples=20_000).compute()
print(report.attrs["estimated_on"])
print(summary_table(report))


# %%
# One model for several dates
# ---------------------------
# Three dates of the scene: as measured, brighter with a missing strip, and
# darker. ``ppa_xr.fit_pooled`` fits one model on a sample of all of them;
# each per-date model sees one date only. Every model is judged on held-out
# pixels of every date, by its error relative to its own PCA (100 = PCA).
def dates(cube: xr.DataArray) -> list[xr.DataArray]:
    """Three dates of the scene: as measured, brighter with a missing strip, and darker."""
    second = (cube.astype("float32") * 1.05 + 100).where(cube.x > cube.x[40])
    return [cube.astype("float32"), second, cube.astype("float32") * 0.95]


scenes = dates(cube)
models = {"pooled": ppa_xr.fit_pooled(scenes, n_samples=30_000, random_state=0)}
models |= {f"date {t} only": scenes[t].ppa.fit(n_samples=10_000, random_state=0) for t in range(3)}
print("100 x e_PPA / e_PCA, mean over k, on held-out pixels of each date")
print("model           " + "".join(f"date {t}  " for t in range(3)))
for name, m in models.items():
    with warnings.catch_warnings():
        # a ShiftWarning on a date the model did not see: the table shows it
        warnings.simplefilter("ignore")
        row = [float(s.ppa.evaluate(m, n_samples=5000).relative_error.mean()) for s in scenes]
    print(f"{name:<16}" + "".join(f"{v:7.1f}  " for v in row))
