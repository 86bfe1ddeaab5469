"""Tied straight axes turned toward PCA's subspace (curves14; a try measured in benchmarks/results/scenes/curves12.txt,
section curves14, not kept in the library).

After its last curved step ``p`` a fit's outputs ``r[p+1:]`` are straight steps along the principal axes of the curved
residual. Where two of their variances are nearly tied, which of the two is the ``k``-th axis is nearly free in the
sample, and a late curve can leave it turned out of PCA's ``k``-subspace (Segmentation: a sine of 0.14-0.29; unseen
rows unlike every fitted row then pay for the turn). This turns each run of axes whose variances the fitting rows
cannot order toward PCA's subspace: any orthonormal choice within a run keeps the map exact and volume-preserving.

* A run: adjacent axes ``[a, b)`` each pair of which is tied, ``lambda_i - lambda_j <= TIE_SE`` standard errors of the
  mean of ``z_i^2 - z_j^2`` over the ``n`` fitting rows (``z`` the rows' outputs; no assumption on their distribution,
  so heavy tails widen the runs). ``GAUSS``: the Gaussian standard error ``sqrt(2 (lambda_i^2 + lambda_j^2) / n)`` instead.
* Within a run, the ``i``-th axis maximises ``||U_k^T v||`` (``U_k`` PCA's first ``k`` axes, ``k`` its component
  number) among the run's axes orthogonal to those before it (greedy, one small eigenproblem per axis).
* Property 2: a run is turned only where the training error at each of its ``k`` stays at or below PCA's.

Applied to the final map (after the step-7 shrinkage, where its outputs after the last curve are again principal
axes), through ``shrink.with_marginals``; the validation's candidate fits are untouched.
"""
from __future__ import annotations

import numpy as np

from ppa_xr.core import kernels, shrink
from ppa_xr.core.linalg import orientation
from ppa_xr.core.params import PPAParams

TIE_SE = 2.0  # fixed before measuring: the usual two standard errors of a difference
GAUSS = False
LOG: list[dict] = []  # per turned map: the runs, which were turned, and which the Property 2 guard refused


def tied_runs(outputs: np.ndarray, variances: np.ndarray) -> list[tuple[int, int]]:
    """Runs ``[a, b)`` of adjacent axes each pair of which the rows cannot order (module docstring), from the first on."""
    n, m = outputs.shape
    squares = outputs * outputs
    runs, a = [], 0
    for b in range(1, m + 1):
        if b < m:
            if GAUSS:
                spread = np.sqrt(2 * (variances[a:b] ** 2 + variances[b] ** 2) / n)
            else:
                spread = np.std(squares[:, a:b] - squares[:, b:b + 1], axis=0) / np.sqrt(max(n - 1, 1))
            if np.all(variances[a:b] - variances[b] <= TIE_SE * spread):
                continue
        if b - a > 1:
            runs.append((a, b))
        a = b
    return runs


def toward(axes: np.ndarray, pca: np.ndarray, first: int) -> np.ndarray:
    """``Q`` (c x c, orthogonal): the run's ``axes`` (rows) turned so that the ``i``-th maximises ``||U_k^T v||``, ``k = first + i + 1``."""
    c = len(axes)
    Q = np.eye(c)
    for i in range(c - 1):
        along = (axes.T @ Q[:, i:]).T @ pca[: first + i + 1].T
        w = np.linalg.eigh(along @ along.T)[1][:, -1]
        Q[:, i:] = Q[:, i:] @ np.linalg.qr(np.column_stack([w, np.eye(len(w))]))[0]
    return Q


def turned(params: PPAParams, X: np.ndarray) -> PPAParams:
    """``params`` with its tied straight runs after the last curve turned toward PCA's subspace (module docstring)."""
    curved = params.curved_steps()
    if not curved or params.whitened or params.reduced:
        return params
    p = curved[-1]
    outputs = kernels.forward(X, params)[:, p + 1:]
    values = params.explained_variance[p + 1:].copy()
    pca_error = np.append(np.cumsum(params.pca_variance[::-1])[::-1], 0.0)  # PCA's training error keeping j components
    slack = 1e-9 * float(np.sum(params.pca_variance))
    V, log = np.eye(len(values)), {"p": p, "runs": [], "refused": []}
    for a, b in tied_runs(outputs - outputs.mean(axis=0), values):
        Q = toward(params.rotation[p + 1 + a: p + 1 + b], params.pca_rotation, p + 1 + a)
        run = np.einsum("ij,i,ij->j", Q, values[a:b], Q)
        after = values[a:].sum() - np.cumsum(run)
        if np.all(after <= pca_error[p + 2 + a: p + 2 + b] + slack):
            V[a:b, a:b], values[a:b] = Q * orientation(params.rotation[p + 1 + a: p + 1 + b].T @ Q), run
            log["runs"].append((p + 2 + a, p + 1 + b))  # the run's components k (first, last)
        else:
            log["refused"].append((p + 2 + a, p + 1 + b))
    LOG.append(log)
    return params if not log["runs"] else shrink._shear(params, 1.0, (values, V))
