"""Variants of the curves' shares of signal tried before the one kept (``ppa_xr.core.steps.signal_shares``), monkeypatched.

Each curve's least-squares coefficients ``W`` ((g+1) x m) are scaled after ``steps._polynomial`` fits them
(``steps._explained`` then takes the general formula, exact for any ``W``), on the library with
``candidates.SHARES = False``:

* ``plain``: each axis ``j`` by ``max(0, 1 - g s_j^2 / Q_j)`` (``Q_j`` its explained sum of squares, ``s_j^2`` its
  residual variance on ``n - g - 1`` degrees of freedom): the rule kept, here in every fit (``JSWHERE=final``: in
  the final fit only, the validation's candidates by least squares, as kept);
* ``hc`` / ``hc0``: the noise term from the rows, ``sum_i h_i e_ij^2 / (1 - h_i)`` (``h_i`` the leverage; ``hc0``
  without the division), the sparse tail's heteroscedastic noise counted where it sits;
* ``mat`` / ``em``: the correction scaled along the generalised eigenvectors of its explained scatter against the
  residual one (Property 2 holds by construction), ``1 - c / rho_i`` with ``c = g`` (``mat``) or ``m - g - 1``
  (``em``, Efron and Morris's matrix rule).

These variants shrink linear trends of searched (PPA-GD) steps too, and have no Property-2 fallback.
Run by hand: ``PPA_SCENES=../shared/bench PYTHONPATH=.:benchmarks JS=plain [JSWHERE=final] python
benchmarks/shares_variants.py SCENE [SCENE ...]`` (one JSON line per split, as ``bench_scenes.py``).
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import scipy.linalg

from ppa_xr.core import candidates, steps

POLYNOMIAL, EXPLAINED = steps._polynomial, steps._explained
MODE = os.environ.get("JS", "off")


def _noise(mode: str, design, gram, fitted, res, g: int) -> np.ndarray:
    values = design.T @ fitted
    residual = res.sample(1) - values
    if mode == "plain":
        return g * np.einsum("ij,ij->j", residual, residual) / max(res.n - g - 1, 1)
    h = np.einsum("ki,ki->i", design, np.linalg.solve(gram, design))
    return ((h if mode == "hc0" else h / np.maximum(1 - h, 1e-3))[:, None] * residual**2).sum(0)


def _polynomial(res, design, gram, choice, fit_linear):
    fitted, cross = POLYNOMIAL(res, design, gram, choice, fit_linear)
    if MODE == "off":
        return fitted, cross
    g = choice.degree
    if MODE in ("mat", "em"):
        if choice.axes is not None:
            return fitted, cross
        explained = fitted.T @ gram @ fitted / res.n
        left = res.cov[1:, 1:] - explained
        left = (left + left.T) / 2 + 1e-12 * max(np.trace(left), 1e-300) / len(left) * np.eye(len(left))
        values, vectors = scipy.linalg.eigh((explained + explained.T) / 2, left)
        rho = values * max(res.n - g - 1, 1)
        c = g if MODE == "mat" else max(len(left) - g - 1, g)
        kappa = np.where(rho > c, 1 - c / np.where(rho > c, rho, 1), 0.0)
        return fitted @ ((vectors * kappa) @ vectors.T @ left), cross
    values = design.T @ fitted
    explained = np.einsum("ij,ij->j", values, values)
    share = np.clip(1 - _noise(MODE, design, gram, fitted, res, g) / np.where(explained > 0, explained, 1), 0, 1)
    return fitted * np.where(explained > 0, share, 1.0), cross


def _explained(w, cross, gram, exact):
    return EXPLAINED(w, cross, gram, False)


def _fit_params(*args, **kwargs):  # JSWHERE=final: the validation's candidates (the fits that carry their covariances) by least squares
    global MODE
    if not kwargs.get("carry"):
        return FIT(*args, **kwargs)
    saved, MODE = MODE, "off"
    try:
        return FIT(*args, **kwargs)
    finally:
        MODE = saved


candidates.SHARES = False
steps._polynomial, steps._explained = _polynomial, _explained
FIT = candidates.fit
if os.environ.get("JSWHERE") == "final":
    candidates.fit = _fit_params


if __name__ == "__main__":
    import bench_scenes

    warnings.simplefilter("ignore")
    for name in sys.argv[1:]:
        for split, seed, (worst_kept, worst_any, mean_kept, kept) in bench_scenes.rows(name, {}):
            print(json.dumps({"scene": name, "variant": MODE + os.environ.get("JSWHERE", ""), "split": split, "seed": seed,
                              "worst_kept": round(worst_kept, 2), "worst_any": round(worst_any, 2), "mean_kept": round(mean_kept, 2),
                              "kept": kept}), flush=True)
