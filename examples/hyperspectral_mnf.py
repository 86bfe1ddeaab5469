"""PCA, MNF and noise-adjusted PPA on a hyperspectral scene
==========================================================

The bundled abu-beach-4 scene (ROSIS, 102 bands, 100 x 100 pixels): the noise
covariance from shift differences, then PCA, MNF (``degree=1`` with the noise
whitened) and noise-adjusted PPA side by side:

* the first three components of each, as images;
* each component's signal-to-noise ratio (MNF and noise-adjusted PPA);
* the noisiest band, and that band reconstructed (denoised) from the first
  ``k`` components of each method.

From a checkout::

    python examples/hyperspectral_mnf.py                   # hyperspectral_mnf.png in ./hyperspectral/
    python examples/hyperspectral_mnf.py --output-dir docs/img
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import ppa_xr  # noqa: E402, F401  (registers .ppa)
from ppa_xr.datasets import open_abu_beach  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="hyperspectral")
    parser.add_argument("--k", type=int, default=10, help="components kept for the denoised band")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    cube = open_abu_beach().reflectance
    models = {
        "PCA": cube.ppa.fit(degree=1, random_state=0),
        "MNF": cube.ppa.fit(degree=1, noise_cov="shift", random_state=0),
        "noise-adjusted PPA": cube.ppa.fit(noise_cov="shift", robust=True, random_state=0),
    }
    noisy = int(np.argmax(np.diag(models["MNF"].noise_cov_) / cube.var(dim=("y", "x")).values))
    fig, axes = plt.subplots(3, 5, figsize=(17, 10), layout="constrained")
    for row, (name, model) in enumerate(models.items()):
        scores = cube.ppa.transform(model, n_components=3, check=False)
        for j in range(3):
            ax = axes[row, j]
            ax.imshow(scores.isel(component=j).values, cmap="gray")
            ax.set_title(f"{name}: component {j + 1}", fontsize=10)
            ax.set_axis_off()
        denoised = cube.ppa.reconstruct(model, args.k).isel(band=noisy).values
        axes[row, 3].imshow(denoised, cmap="viridis")
        axes[row, 3].set_title(f"band {cube.band.values[noisy]} from {args.k} {name} components", fontsize=10)
        axes[row, 3].set_axis_off()
    for name in ("MNF", "noise-adjusted PPA"):
        snr = models[name].snr_
        axes[0, 4].semilogy(np.arange(1, 31), np.maximum(snr[:30], 1e-3), marker=".", label=name)
    axes[0, 4].set(xlabel="component", ylabel="signal-to-noise ratio", title="SNR per component")
    axes[0, 4].legend()
    axes[1, 4].imshow(cube.isel(band=noisy).values, cmap="viridis")
    axes[1, 4].set_title(f"band {cube.band.values[noisy]} as measured (noisiest)", fontsize=10)
    axes[1, 4].set_axis_off()
    ks = np.arange(1, 21)
    X = cube.transpose("y", "x", "band").values.reshape(-1, cube.sizes["band"]).astype(np.float64)
    for name, model in models.items():
        axes[2, 4].semilogy(ks, model.reconstruction_mse(X)[:20] if name == "PCA" else
                            [np.mean(np.sum((model.reconstruct(X, k) - X) ** 2, axis=1)) for k in ks], label=name)
    axes[2, 4].set(xlabel="components kept k", ylabel="squared error per pixel", title="reconstruction error (input units)")
    axes[2, 4].legend()
    path = out / "hyperspectral_mnf.png"
    fig.savefig(path, dpi=80)
    for name in ("MNF", "noise-adjusted PPA"):
        print(f"{name}: SNR of components 1-5 {np.round(models[name].snr_[:5], 1).tolist()}; "
              f"curved steps {int((models[name].degrees_ > 1).sum())}")
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
