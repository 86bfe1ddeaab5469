"""PCA, MNF and noise-adjusted PPA on a hyperspectral scene
==========================================================

The bundled abu-beach-4 scene (ROSIS, 102 bands, 100 x 100 pixels): the noise
covariance from shift differences, then PCA, MNF (``degree=1`` with the noise
whitened) and noise-adjusted PPA side by side:

* the first three components of each, as images;
* each component's signal-to-noise ratio (MNF and noise-adjusted PPA);
* the noisiest band, and that band reconstructed (denoised) from the first
  ``k`` components of each method;
* the reconstruction error in input units.

From a checkout::

    python examples/hyperspectral_mnf.py                   # figures in ./hyperspectral/
    python examples/hyperspectral_mnf.py --output-dir docs/img
"""

# %%
# Three models of one scene
# -------------------------
# ``noise_cov="shift"`` estimates the noise covariance from differences of
# neighbouring pixels, in the same pass as the pixel sample, and whitens it:
# with ``degree=1`` that is MNF, with curves a noise-adjusted PPA
# (``robust=True``, as on every cube with hundreds of bands). Their
# components come ordered by signal-to-noise ratio, ``model.snr_``.
import matplotlib.pyplot as plt
import numpy as np

import ppa_xr  # noqa: F401  (registers .ppa)
from ppa_xr.datasets import open_abu_beach

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--output-dir", default="hyperspectral", help="where the figures go")
parser.add_argument("--k", type=int, default=10, help="components kept for the denoised band")
args = parser.parse_args()
out = Path(args.output_dir)
out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore
cube = open_abu_beach()["reflectance"]
models = {
    "PCA": cube.ppa.fit(degree=1, random_state=0),
    "MNF": cube.ppa.fit(degree=1, noise_cov="shift", random_state=0),
    "noise-adjusted PPA": cube.ppa.fit(noise_cov="shift", robust=True, random_state=0),
}
for name in ("MNF", "noise-adjusted PPA"):
    print(f"{name}: SNR of components 1-5 {np.round(models[name].snr_[:5], 1).tolist()}; "
          f"curved steps {int((models[name].degrees_ > 1).sum())}")

# %%
# The first three components
# --------------------------
# PCA's first components follow the bands of largest variance, noise
# included; MNF's and noise-adjusted PPA's follow the signal.
fig, axes = plt.subplots(3, 3, figsize=(9, 9.3), layout="constrained")
for row, (name, model) in zip(axes, models.items()):
    scores = cube.ppa.transform(model, n_components=3, check=False)
    for j, ax in enumerate(row):
        ax.imshow(scores.isel(component=j).values, cmap="gray")
        ax.set_title(f"{name}, component {j + 1}", fontsize=11)
        ax.set_axis_off()
fig.savefig(out / "hyperspectral_components.png", dpi=100)

# %%
# Signal-to-noise ratio per component
# -----------------------------------
# In noise units every direction of the noise has unit variance, so a
# component's variance is 1 + SNR.
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
for name in ("MNF", "noise-adjusted PPA"):
    ax.semilogy(np.arange(1, 31), np.maximum(models[name].snr_[:30], 1e-3), marker=".", label=name)
ax.set(xlabel="component", ylabel="signal-to-noise ratio", title="SNR per component")
ax.legend()
fig.savefig(out / "hyperspectral_snr.png", dpi=100)

# %%
# The noisiest band, denoised
# ---------------------------
# The band whose noise is the largest share of its variance, as measured and
# reconstructed from the first ``k`` components of each method (in input
# units: the inverse undoes the whitening).
noisy = int(np.argmax(np.diag(models["MNF"].noise_cov_) / cube.var(dim=("y", "x")).values))
band = cube.band.values[noisy]
fig, axes = plt.subplots(1, 4, figsize=(10, 3.2), layout="constrained")
axes[0].imshow(cube.isel(band=noisy).values, cmap="viridis")
axes[0].set_title(f"band {band} as measured", fontsize=11)
for ax, (name, model) in zip(axes[1:], models.items()):
    ax.imshow(cube.ppa.reconstruct(model, args.k).isel(band=noisy).values, cmap="viridis")
    ax.set_title(f"{name}, k = {args.k}", fontsize=11)
for ax in axes:
    ax.set_axis_off()
fig.savefig(out / "hyperspectral_denoised.png", dpi=100)

# %%
# Reconstruction error in input units
# -----------------------------------
# PCA has the smallest error in input units, as it must: it minimizes exactly
# that. MNF and noise-adjusted PPA minimize the error in noise units, which
# is what removes noise from the noisy bands.
ks = np.arange(1, 21)
X = cube.transpose("y", "x", "band").values.reshape(-1, cube.sizes["band"]).astype(np.float64)
fig, ax = plt.subplots(figsize=(7, 3.8), layout="constrained")
for name, model in models.items():
    errors = [np.mean(np.sum((model.reconstruct(X, k) - X) ** 2, axis=1)) for k in ks]
    ax.semilogy(ks, errors, label=name)
ax.set(xlabel="components kept k", ylabel="squared error per pixel",
       title="reconstruction error (input units)")
ax.legend()
fig.savefig(out / "hyperspectral_errors.png", dpi=100)
