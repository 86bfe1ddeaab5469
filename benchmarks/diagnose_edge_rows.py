"""Which step makes a few unseen rows of a UCI table read above PCA (the default ``PPA()``, ``bench_scenes.py``'s random
halves, fit random state 0): extrapolating tails, or the PPA basis after a curve differing from PCA's.

For one split, at the worst kept k (or the worst k where no kept k is above 100), the 3 unseen rows of most excess over
PCA, each with: its PCA error over the mean one; its error under the fitted map (``ppa``), the same map with every
curve zeroed (``straight``: the PPA basis alone, its rotation with no polynomial), with the tails of every curve
``"linear"`` or ``"polynomial"`` instead of the default ``"clamp"``, and with one curved step made straight at a time
(``drop<p>``: its forward and inverse coefficients zeroed, the later steps as fitted); and where each row's projection
falls on each curved step, as ``t = (alpha_p - center_p) / scale_p`` (beyond the fitted range: ``|t| > 1``). The same
variants' ratio over every unseen row at that k and without the 3 rows. Numbers only; nothing in the library changes.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_edge_rows.py Segmentation 3,5,8``.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.environ.get("PPA_SCENES", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench")))
import scenes  # noqa: E402

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core.errors import compare_errors, compare_errors_and_forward  # noqa: E402
from ppa_xr.core.params import PPAParams  # noqa: E402
from ppa_xr.datasets import load_table  # noqa: E402

COEFFICIENTS = ("forward_bias", "forward", "inverse_bias", "inverse")


def variant(params: PPAParams, tails: str | None = None, straight: list[int] | None = None) -> PPAParams:
    """The fitted map with other tails, or with the given steps' polynomials zeroed."""
    arrays = {k: np.array(v) for k, v in params.arrays().items()}
    for p in straight or []:
        for name in COEFFICIENTS:
            arrays[name][p] = 0
    return PPAParams(**arrays, tails=tails or params.tails)


def ratio(params: PPAParams, X: np.ndarray, k: int) -> float:
    c = compare_errors(params, X)
    return round(float(c.relative[k - 1]), 2)


def worst(table: str, seed: int) -> tuple[np.ndarray, np.ndarray, PPA, int, np.ndarray]:
    """The split's fitting and unseen halves, the default fit, its worst kept k (or worst k where no kept k is above
    100) and which k are kept on the unseen half."""
    X = load_table(table).normalised()
    tr, te = scenes.random_halves(X, seed)
    model = PPA(random_state=0).fit(tr)
    base = compare_errors(model.params_, te)
    total = float(np.mean(np.sum((te - te.mean(0)) ** 2, 1)))
    kept = base.pca >= 1e-3 * total
    rel = np.where(kept, base.relative, -np.inf)
    return tr, te, model, int(np.argmax(rel if rel.max() > 100 else base.relative)) + 1, kept


def split(table: str, seed: int) -> dict:
    tr, te, model, k, kept = worst(table, seed)
    params = model.params_
    _, _, _, ppa_rows, pca_rows = compare_errors_and_forward(params, te, kept=k)
    order = np.argsort(-(ppa_rows - pca_rows))[:3]
    curved = params.curved_steps()
    variants = {"ppa": params, "straight": variant(params, straight=curved), "linear": variant(params, "linear"),
                "polynomial": variant(params, "polynomial")} | {f"drop{p}": variant(params, straight=[p]) for p in curved}
    r_tr = model.transform(tr)
    r_te = model.transform(te[order])
    out = {"table": table, "seed": seed, "k": k, "k_kept": bool(kept[k - 1]), "curved": curved,
           "degrees": [int(params.degrees[p]) for p in curved], "configuration": {a: b for a, b in model.configuration_.items()},
           "excess_share_top3": round(float((ppa_rows - pca_rows)[order].sum() / (ppa_rows - pca_rows).sum()), 2),
           "ratio": {}, "ratio_without_top3": {}, "rows": [],
           # sines of the principal angles between the PPA basis's first k axes and PCA's (largest first), and each of
           # PPA's first k axes' sine to PCA's k-subspace
           "subspace_sines": np.round(np.sqrt(np.clip(1 - np.linalg.svd(params.rotation[:k] @ params.pca_rotation[:k].T, compute_uv=False) ** 2, 0, 1))[::-1], 3).tolist(),
           "axis_sines": np.round(np.sqrt(np.clip(1 - np.sum((params.rotation[:k] @ params.pca_rotation[:k].T) ** 2, 1), 0, 1)), 3).tolist()}
    rest = np.delete(te, order, 0)
    for name, pv in variants.items():
        out["ratio"][name] = ratio(pv, te, k)
        out["ratio_without_top3"][name] = ratio(pv, rest, k)
    per_variant = {name: compare_errors_and_forward(pv, te[order], kept=k)[3] for name, pv in variants.items()}
    for i, row in enumerate(order):
        t = {}
        for p in curved:
            a_tr = r_tr[:, p]
            q1, q3 = np.quantile(a_tr, (0.25, 0.75))
            a = r_te[i, p]
            t[str(p)] = {"t": round(float((a - params.center[p]) / params.scale[p]), 2),
                         "iqr_beyond": round(float(max(a - q3, q1 - a, 0) / (q3 - q1)), 1)}
        z = te[row] - params.mean
        out["rows"].append({"pca_over_mean": round(float(pca_rows[row] / pca_rows.mean()), 1),
                            # the row's energy on PCA's axes k+1.. of the fitting half, in units of their variance
                            "pca_scores_beyond_k_in_sd": np.round(np.abs(params.pca_rotation[k:] @ z) / np.sqrt(np.maximum(params.pca_variance[k:], 1e-300)), 1).tolist(),
                            "pca": float(f"{pca_rows[row]:.4g}"),
                            **{name: float(f"{e[i]:.4g}") for name, e in per_variant.items()}, "t": t})
    return out


def main(of=split) -> None:
    """Print ``of(table, seed)`` as a JSON line for the table and comma-separated seeds of the command line."""
    warnings.simplefilter("ignore")
    table, seeds = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
    for seed in seeds:
        print(json.dumps(of(table, seed)), flush=True)


if __name__ == "__main__":
    main()
