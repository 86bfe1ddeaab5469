"""Where PPA-GD's worst held-out k comes from on a UCI table (``bench_defaults.py``'s random halves).

``rows``: one JSON line per seed, with the curves' shares of signal on and off (``candidates.SHARES``): the worst k
of ``bench_defaults.held_out_curve``, the worst over the kept k, whether PCA's error there is at least 0.1% of the unseen variance (a kept k),
the share of the excess over PCA at that k carried by the 1, 3 and 10 unseen rows of most excess, the top row's
PCA error over the mean PCA error (an anomalous row: hundreds), and the ratio at that k without the 3 rows.

``pca``: as ``rows``, for the PCA-led default (``PPA()``), shares on and off.

``objective``: the default PPA-GD with the search's objective replaced by the energy the shrunk correction removes
in sample, ``sum_j (Q_j - a_j^2 / Q_j)`` over the axes with ``Q_j > a_j = g RSS_j / (n - g - 1)`` (0 elsewhere;
``(2 f_j - f_j^2) Q_j`` with ``f_j = 1 - a_j / Q_j``, :func:`ppa_xr.core.steps.signal_shares`): a search that reads
the residual the final map leaves. Measured, not kept (benchmarks/results/scenes/README.md).

``lead``: the default PPA-GD with the searched leading vector kept over the PCA one only where its held-out cost is
lower by a paired standard error over the groups (``candidates.SWITCH``'s rule), not merely lower. Not kept.

``halves``: the default PPA-GD with the count's (step 8) halvings at 16 instead of ``shrink.HALVES``. Not kept.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_gd_rows.py rows|pca|objective|lead|halves Segmentation 0,1,2,3,4,5,6,7``.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from bench_defaults import held_out_curve, random_halves

from ppa_xr import PPA
from ppa_xr.core import candidates, leading, shrink
from ppa_xr.core import ppa as core_ppa
from ppa_xr.core.degrees import CrossValidation, group_grams
from ppa_xr.core.errors import compare_errors, compare_errors_and_forward
from ppa_xr.core.steps import leading_vector
from ppa_xr.datasets import load_table


def rows(model: PPA, unseen: np.ndarray) -> dict:
    curve = held_out_curve(model, unseen)
    k = int(np.argmax(curve)) + 1
    _, _, _, ppa, pca = compare_errors_and_forward(model.params_, unseen, kept=k)
    excess = ppa - pca
    order = np.argsort(-excess)
    variance = float(np.mean(np.sum((unseen - unseen.mean(0)) ** 2, axis=1)))
    kept = compare_errors(model.params_, unseen).pca >= 1e-3 * variance
    return {"worst": round(float(curve.max()), 1), "worst_kept": round(float(curve[kept].max()), 1) if kept.any() else None, "k": k, "kept": bool(pca.mean() >= 1e-3 * variance),
            "share_of_top": [round(float(excess[order[:m]].sum() / excess.sum()), 2) for m in (1, 3, 10)],
            "top_pca_error_over_mean": round(float(pca[order[0]] / pca.mean()), 1),
            "at_k_without_top3": round(float(held_out_curve(model, np.delete(unseen, order[:3], 0))[k - 1]), 1),
            "mean": round(float(curve.mean()), 2), "curved": model.params_.curved_steps(),
            "max_curved": model.configuration_["max_curved"]}


def shrunk_energy(e: np.ndarray, X: np.ndarray, degree: int) -> tuple[float, np.ndarray]:
    """:func:`ppa_xr.core.leading.explained` for the shrunk correction: ``sum_j (Q_j - a_j^2 / Q_j)^+ / n`` and its
    gradient (``a_j`` held fixed: each axis's ``grad Q_j`` weighted by ``1 + (a_j / Q_j)^2``)."""
    alpha = X @ e
    lo, hi = alpha.min(), alpha.max()
    center, scale = (hi + lo) / 2, max((hi - lo) / 2, np.finfo(float).tiny)
    B, dB = leading._legendre_and_slopes((alpha - center) / scale, degree)
    C = B.T @ X
    W = np.linalg.lstsq(B.T @ B, C, rcond=None)[0]
    residual = X - B @ W
    n = len(X)
    Q = np.einsum("kj,kj->j", C, W)
    a = degree * np.einsum("ij,ij->j", residual, residual) / max(n - degree - 1, 1)
    on = Q > a
    safe = np.where(on, Q, 1.0)
    weight = np.where(on, 1 + (a / safe) ** 2, 0.0)
    v = np.einsum("ik,ik->i", dB, (residual * weight) @ W.T)
    return float(np.sum(np.where(on, Q - a ** 2 / safe, 0.0))) / n, (2 / (scale * n)) * (X.T @ v)


def paired_lead(res, strategy, degree, folds, designs_of):
    """``ppa._validated_lead`` with the searched vector kept only where its groups' held-out costs sum below the PCA
    vector's by one paired standard error."""
    resid = res.sample() if folds is None else res.scores
    searched = leading_vector(strategy, res.cov, resid)
    if folds is None:
        return searched
    pca = leading.pca_leading_vector(res.cov)
    costs = []
    for e in (searched, pca):
        designs, _, scales = designs_of((resid @ e)[None], degree)
        if scales[0] == 0:
            costs.append(np.full(len(folds.fold), np.inf))
            continue
        gram, cross = group_grams(designs, resid, folds.bounds)
        costs.append(CrossValidation(gram[:, 0], cross[:, 0], folds).held_out([degree])[0])
    diff = costs[0] - costs[1]
    if not np.all(np.isfinite(diff)):
        return searched if np.sum(costs[0]) < np.sum(costs[1]) else pca
    se = np.sqrt(len(diff) / max(len(diff) - 1, 1) * np.sum((diff - diff.mean()) ** 2))
    return searched if np.sum(diff) < -candidates.SWITCH * se else pca


def main() -> None:
    mode, name, seeds = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
    table = load_table(name).normalised()
    if mode == "objective":
        leading.explained = shrunk_energy
    if mode == "lead":
        core_ppa._validated_lead = paired_lead
    if mode == "halves":
        shrink.HALVES = 16
    for shares in (True, False) if mode in ("rows", "pca") else (True,):
        candidates.SHARES = shares
        for seed, fit, unseen in random_halves(table, max(seeds) + 1):
            if seed in seeds:
                model = PPA(leading="pca" if mode == "pca" else "gd", random_state=seed).fit(fit)
                print(json.dumps({"table": name, "seed": seed, "mode": mode, "shares": shares} | rows(model, unseen)), flush=True)


if __name__ == "__main__":
    main()
