"""Where the failing table splits' excess comes from, for the per-axis correction rule of curves18 (numbers only).

Per random-halves split (``scenes.random_halves``, fit random state 0, the default ``PPA()``):

* ``basis``: at the worst k, PPA's unseen error against PCA's split into the unseen rows' uncorrected states in PPA's
  rotation beyond k (``basis_only``, no curve applied) and what the curves' corrections add (``corrections``, negative
  where they lower it), with the largest sine between PCA's and PPA's first k axes.
* ``axes``: per curved step and straight output after the last curve, the held-out evidence that ``axisrows`` reads
  (``bench_scenes._axis_masks``: halvings of the fitting rows, z of the mean of ``(e - w v)^2 - e^2``) against the same
  statistic of the final map on the unseen half.
* ``oracle``: ``axisrows0`` with its rows chosen on the unseen half itself (the final map read there, not refitted): the
  most any per-axis choice of correction rows can give.

Run: ``PPA_SCENES=../../shared/bench PYTHONPATH=..:. python diagnose_axis_rows.py basis|axes|oracle TABLE 5,12,20``.
"""
import json
import sys
import warnings

import numpy as np

import bench_scenes as b
import scenes
from ppa_xr import PPA
from ppa_xr.core import candidates
from ppa_xr.datasets import load_table


def basis(tr, te):
    m = PPA(random_state=0).fit(tr)
    P = m.params_
    e, ep = np.asarray(m.reconstruction_mse(te))[:-1], np.asarray(m.pca_.reconstruction_mse(te))[:-1]
    k = int(np.argmax(e / ep)) + 1
    s = P.to_fit_space(te) @ P.rotation.T
    only = float(np.mean(np.sum(s[:, k:] ** 2, 1)))
    sv = np.linalg.svd(m.pca_.params_.rotation[:k] @ P.rotation[:k].T, compute_uv=False)
    return {"k": k, "ppa": round(100 * e[k - 1] / ep[k - 1], 2), "basis_only": round(100 * only / ep[k - 1], 2),
            "corrections": round(100 * (e[k - 1] - only) / ep[k - 1], 2),
            "largest_sine_span_k": round(float(np.sqrt(max(0.0, 1 - sv.min() ** 2))), 3), "config": m.configuration_}


def axes(tr, te):
    m = PPA(random_state=0).fit(tr)
    P = m.params_
    curved = P.curved_steps()
    rng = np.random.default_rng(7)
    X, labels, _ = b.shrink._drawn(tr, None, rng, None)
    labels = np.unique(labels, return_inverse=True)[1]
    halves = []
    for _ in range(b.shrink.HALVES):
        side = (rng.permutation(labels.max() + 1) % 2 == 0)[labels]
        f = b._refitted_shares(P, X[side])
        halves.append((f, f.to_fit_space(X[~side]) @ f.rotation.T))
    st = P.to_fit_space(te) @ P.rotation.T
    out = []
    for p in curved:
        ms, ss = [], []
        for f, s in halves:
            pred = candidates._basis(f, p, s[:, p]) @ candidates._coefficients(f, p)
            d = (s[:, p + 1:] - pred) ** 2 - s[:, p + 1:] ** 2
            ms.append(d.mean(0))
            ss.append(d.std(0, ddof=1) / np.sqrt(len(d)))
            s[:, p + 1:] -= pred
        with np.errstate(all="ignore"):
            est = np.mean(ms, 0) / (np.sqrt(np.sum(np.square(ss), 0)) / len(halves))
        pred = candidates._basis(P, p, st[:, p]) @ candidates._coefficients(P, p)
        d = (st[:, p + 1:] - pred) ** 2 - st[:, p + 1:] ** 2
        with np.errstate(all="ignore"):
            unseen = d.mean(0) / (d.std(0, ddof=1) / np.sqrt(len(d)))
        st[:, p + 1:] -= pred
        sel = np.arange(p + 1, P.n_features) > curved[-1]
        out.append({"p": p, "est_z": np.round(est[sel], 1).tolist(), "unseen_z": np.round(unseen[sel], 1).tolist()})
    ez, uz = (np.nan_to_num(np.concatenate([o[key] for o in out])) for key in ("est_z", "unseen_z"))
    return {"curved": curved, "rows": len(ez), "est_over_2": int((ez > 2).sum()), "unseen_over_2": int((uz > 2).sum()),
            "both_over_2": int(((ez > 2) & (uz > 2)).sum()), "steps": out}


def oracle(tr, te):
    out = {}
    for v in ("base", "axisrows0"):
        b._AXIS["oracle"] = te if v != "base" else None
        with b.variant(v):
            m = PPA(random_state=0).fit(tr)
        out[v] = [round(x, 2) for x in scenes.user_k_metrics(m, te)[:3]]
        if v != "base":
            out["dropped"] = b._AXIS["log"][-1]["dropped"]
        b._AXIS["log"].clear()
    b._AXIS["oracle"] = None
    return out


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    what, table, seeds = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
    X = load_table(table).normalised()
    for seed in seeds:
        tr, te = scenes.random_halves(X, seed)
        print(json.dumps({"table": table, "seed": seed, "what": what} | {"basis": basis, "axes": axes, "oracle": oracle}[what](tr, te)), flush=True)
