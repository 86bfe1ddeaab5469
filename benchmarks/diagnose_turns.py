"""At a failing UCI split's worst k, is the k-th PPA axis turned out of PCA's k-subspace, and would the tie test see it?

For each split (``bench_scenes.py``'s random halves, the default ``PPA(random_state=0)``): the worst k (as
``diagnose_edge_rows.py``), the sine of PPA's k-th axis to PCA's first k, the fitted variances of outputs k and k + 1
(of the leading one) for PPA and PCA, and the tie statistic of the fitted outputs k, k + 1 that ``core.ties`` reads:
``(lambda_k - lambda_{k+1}) / (sd(z_k^2 - z_{k+1}^2) / sqrt(n - 1))`` (a tie: <= ``ties.TIE_SE``). Then fixed refits
(``configuration="fixed"``) with the chosen count of curves, plain and robust, read at the same k on the unseen half.
Numbers only. Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_turns.py Segmentation 12,21``.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diagnose_edge_rows as edge  # noqa: E402  (scenes.py's path, the split and its worst k)

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core.errors import compare_errors  # noqa: E402


def split(table: str, seed: int) -> dict:
    tr, te, model, k, kept = edge.worst(table, seed)
    params = model.params_
    base = compare_errors(params, te)
    z = model.transform(tr)
    z = z - z.mean(0)
    lead = float(params.explained_variance[0])
    sq = z[:, k - 1] ** 2 - z[:, k] ** 2
    se = float(np.std(sq) / np.sqrt(len(z) - 1))
    lam = params.explained_variance
    sines = np.sqrt(np.clip(1 - np.sum((params.rotation[:k] @ params.pca_rotation[:k].T) ** 2, 1), 0, 1))
    out = {"table": table, "seed": seed, "k": k, "k_kept": bool(kept[k - 1]), "ratio": round(float(base.relative[k - 1]), 2),
           "curved": params.curved_steps(), "configuration": dict(model.configuration_),
           "axis_k_sine": round(float(sines[-1]), 3),
           "ppa_var_k_k1": [float(f"{lam[k - 1] / lead:.3g}"), float(f"{lam[k] / lead:.3g}")],
           "pca_var_k_k1": [float(f"{params.pca_variance[k - 1] / params.pca_variance[0]:.3g}"), float(f"{params.pca_variance[k] / params.pca_variance[0]:.3g}")],
           "tie_stat_k_k1": round(float((lam[k - 1] - lam[k]) / se), 2),
           "fitting_pca_share_k": float(f"{params.pca_variance[k:].sum() / params.pca_variance.sum():.3g}"),
           "fixed": {}}
    c = int(model.configuration_["max_curved"])
    for robust in (False, True):
        for m in sorted({c, max(c - 1, 0), 2}):
            f = PPA(random_state=0, configuration="fixed", max_curved=m, robust=robust).fit(tr)
            r = compare_errors(f.params_, te).relative
            s = np.sqrt(np.clip(1 - np.sum((f.params_.rotation[:k] @ f.params_.pca_rotation[:k].T) ** 2, 1), 0, 1))
            out["fixed"][f"{'robust' if robust else 'plain'}{m}"] = {"ratio_k": round(float(r[k - 1]), 2),
                                                                     "axis_k_sine": round(float(s[-1]), 3),
                                                                     "curved": f.params_.curved_steps()}
    return out


if __name__ == "__main__":
    edge.main(split)
