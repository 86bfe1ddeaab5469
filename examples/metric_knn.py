"""k-NN with the PPA metric
========================

k-NN with the PPA metric on two classes of noisy parabolas (the paper's section 5.1).

Two classes lie along parallel parabolas ``y = kappa x^2`` and
``y = kappa x^2 + 0.5`` (x uniform in [-1, 1], noise 0.1). A 1-NN classifier
is trained on a few labelled points and tested on 2000, with three distances:

* Euclidean;
* Mahalanobis: PCA with ``whiten=True`` fitted on 1000 unlabelled points;
* PPA: ``PPA(degree=2, whiten=True)`` fitted on the same unlabelled points,
  whose whitened features give the PPA metric ``J^T Lambda^-1 J`` to first
  order (``ppa_xr.geometry.metric``).

From a checkout::

    python examples/metric_knn.py            # 20 repetitions, plot in ./metric_knn/
    python examples/metric_knn.py --fast     # 4 repetitions (as the docs build runs it)
"""

# %%
# Two classes along parabolas
# ---------------------------
# The distances are learnt without labels: PCA with ``whiten=True`` gives the
# Mahalanobis distance, ``PPA(degree=2, whiten=True)`` the PPA metric to first
# order. Either is a scikit-learn transformer, so 1-NN runs on its features.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA
from sklearn.neighbors import KNeighborsClassifier

from ppa_xr import PPA

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--fast", action="store_true", help="4 repetitions")
parser.add_argument("--output-dir", default="metric_knn", help="where the plot goes")
args = parser.parse_args()
out = Path(args.output_dir)
out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore
SIZES = (4, 10, 30, 100, 300, 1000)
CURVATURES = {"low curvature (kappa = 0.5)": 0.5, "high curvature (kappa = 1)": 1.0}


def parabolas(n: int, kappa: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    x, label = rng.uniform(-1, 1, n), rng.integers(0, 2, n)
    return np.column_stack([x, kappa * x**2 + 0.5 * label + 0.1 * rng.normal(size=n)]), label


def accuracies(kappa: float, repetitions: int) -> dict[str, np.ndarray]:
    """Mean test accuracy of 1-NN per distance and training size."""
    names = ("Euclidean", "Mahalanobis", "PPA")
    scores = {name: np.zeros((repetitions, len(SIZES))) for name in names}
    for rep in range(repetitions):
        rng = np.random.default_rng(rep)
        unlabelled, _ = parabolas(1000, kappa, rng)
        test, test_label = parabolas(2000, kappa, rng)
        maps = {"Euclidean": None, "Mahalanobis": PCA(whiten=True).fit(unlabelled),
                "PPA": PPA(degree=2, whiten=True).fit(unlabelled)}
        for j, size in enumerate(SIZES):
            train, label = parabolas(size, kappa, rng)
            for name, features in maps.items():
                embed = (lambda a: a) if features is None else features.transform
                knn = KNeighborsClassifier(n_neighbors=1).fit(embed(train), label)
                scores[name][rep, j] = knn.score(embed(test), test_label)
    return {name: values.mean(axis=0) for name, values in scores.items()}


# %%
# Accuracy against the number of labelled points
# ----------------------------------------------
# The PPA metric wins most with few labelled points and high curvature.
repetitions = 4 if args.fast else 20
results = {label: accuracies(kappa, repetitions) for label, kappa in CURVATURES.items()}
for label, scores in results.items():
    print(f"{label}: 1-NN test accuracy by training size ({repetitions} repetitions)")
    print("| distance | " + " | ".join(str(s) for s in SIZES) + " |")
    print("|---|" + "---|" * len(SIZES))
    for name, values in scores.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    print()

# %%
# The same, as curves: the three distances meet with many labelled points.
fig, axes = plt.subplots(1, len(results), figsize=(9, 3.6), sharey=True, layout="constrained")
for ax, (label, scores) in zip(axes, results.items()):
    for name, values in scores.items():
        ax.plot(SIZES, values, marker="o", label=name)
    ax.set(xscale="log", title=label, xlabel="labelled training samples")
axes[0].set_ylabel("1-NN test accuracy")
axes[0].legend()
fig.savefig(out / "metric_knn.png", dpi=100)
