"""Curvature and torsion of helices
================================

Curvature and torsion of helices from PPA's analytic geometry (the paper's section 5.2).

1. A helix of radius a = 2 and pitch 2 pi b, b = 0.8, 1.5 turns, with Gaussian
   noise 0, 0.1, 0.3 and 0.6 on 1000 fitting and 1000 other points; the degree
   of each step is chosen in 1..20 by cross-validation. Printed: the mean and
   spread of the estimated curvature and torsion of the first curvilinear
   feature (points in the inner 90% of its range) against the theory,
   ``chi_1 = a / (a^2 + b^2)``, ``chi_2 = b / (a^2 + b^2)``.
2. Helices with random radius and pitch in [0.2, 1] (radius at most 3.5 times the
   pitch, so their axis carries the most variance within 1.5 turns) embedded
   in 4-d by a random rotation, where ``chi_3 = 0``: estimated against
   theoretical values, plotted as in the paper.

From a checkout::

    python examples/helix_curvatures.py            # 20 random helices, plot in ./helix_curvatures/
    python examples/helix_curvatures.py --fast     # 3 random helices (as the docs build runs it)
"""

# %%
# Curvatures from a fitted model
# ------------------------------
# PPA is fitted on 1000 points of a helix (degrees chosen in 1..20), and
# ``ppa_xr.geometry.curvatures`` gives the generalised curvatures of its first
# curvilinear feature, analytically, at 1000 other points: chi_1 is the
# curvature, chi_2 the torsion. Points near the ends of the fitted range are
# left out, where the clamped tails flatten the curve.
import matplotlib.pyplot as plt
import numpy as np

from ppa_xr import PPA
from ppa_xr.geometry import curvatures

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--fast", action="store_true", help="two noise levels and 3 random helices")
parser.add_argument("--output-dir", default="helix_curvatures", help="where the figure goes")
args = parser.parse_args()
out = Path(args.output_dir)
out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore
DEGREES = tuple(range(1, 21))


def helix(a: float, b: float, n: int, noise: float, rng: np.random.Generator, turns: float = 1.5):
    t = rng.uniform(0, 2 * np.pi * turns, n)
    return np.column_stack([a * np.cos(t), a * np.sin(t), b * t]) + noise * rng.normal(size=(n, 3))


def estimate(X: np.ndarray, n_fit: int = 1000) -> np.ndarray:
    """Curvatures of the first feature at the other points, in the inner 90% of its range."""
    model = PPA(degree=DEGREES, random_state=0).fit(X[:n_fit])
    points = X[n_fit:]
    first = model.transform(points)[:, 0]
    inner = np.abs(first - model.params_.center[0]) < 0.9 * model.params_.scale[0]
    return curvatures(model, points[inner])


# %%
# Noise against theory
# --------------------
# The helix of radius 2 and pitch 2 pi 0.8 has curvature 0.431 and torsion
# 0.172. The torsion is a ratio of derivatives and heavy-tailed: its median
# is the better summary.
def noise_table(noises=(0.0, 0.1, 0.3, 0.6), a: float = 2.0, b: float = 0.8) -> list[tuple]:
    """Per noise level: mean, standard deviation and median of the estimated curvatures."""
    rows = []
    for noise in noises:
        chi = estimate(helix(a, b, 2000, noise, np.random.default_rng(1)))
        rows.append((noise, chi.mean(axis=0), chi.std(axis=0), np.median(chi, axis=0)))
    return rows


print("theory: curvature 0.431, torsion 0.172")
print("| noise | curvature mean (std) | curvature median | torsion mean (std) | torsion median |")
print("|---|---|---|---|---|")
for noise, mean, std, median in noise_table((0.0, 0.1) if args.fast else (0.0, 0.1, 0.3, 0.6)):
    print(f"| {noise} | {mean[0]:.3f} ({std[0]:.3f}) | {median[0]:.3f} "
          f"| {mean[1]:.3f} ({std[1]:.3f}) | {median[1]:.3f} |")


# %%
# Random helices in 4-d
# ---------------------
# Noiseless helices of random radius and pitch, embedded in 4-d by a random
# rotation, where chi_3 = 0: estimated against theoretical curvatures, as in
# the paper's figure.
def random_helices(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Theoretical and estimated (mean) chi_1, chi_2, chi_3 of random helices in 4-d."""
    rng = np.random.default_rng(seed)
    theory, estimated = [], []
    while len(theory) < count:
        a, b = rng.uniform(0.2, 1, 2)
        if a > 3.5 * b:
            continue
        rotation = np.linalg.qr(rng.normal(size=(4, 4)))[0]
        X = np.column_stack([helix(a, b, 2000, 0.0, rng), np.zeros(2000)]) @ rotation.T
        theory.append([a / (a**2 + b**2), b / (a**2 + b**2), 0.0])
        estimated.append(np.abs(estimate(X)).mean(axis=0))
    return np.array(theory), np.array(estimated)


theory, estimated = random_helices(3 if args.fast else 20)
error = np.abs(estimated - theory)
medians = ", ".join(f"chi_{i + 1} {np.median(error[:, i]):.3f}" for i in range(3))
print(f"random helices in 4-d, median |error|: {medians} (theory chi_3 = 0)")
fig, axes = plt.subplots(1, 3, figsize=(10, 3.5), layout="constrained")
for i, ax in enumerate(axes):
    ax.scatter(theory[:, i], estimated[:, i])
    top = max(theory[:, i].max(), estimated[:, i].max()) * 1.1 + 1e-3
    ax.plot([0, top], [0, top], color="0.5", lw=1)
    ax.set(xlabel=f"theoretical chi_{i + 1}", ylabel=f"estimated chi_{i + 1} (mean |chi|)")
fig.savefig(out / "helix_curvatures.png", dpi=100)
