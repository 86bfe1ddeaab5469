"""Chunk kernels: forward map, inverse map and Jacobian on any ``(..., d)`` block.

With ``A`` the composed rotation and ``P_p`` the basis of step ``p``
(see :mod:`ppa_xr.core.params` for the coefficient matrices):

* forward: ``r = A (x - mean) - b_f``, then for ``p = 0..k-2``
  ``r[p+1:k] -= P_p(r_p) F_p`` (``r_p`` is final once the corrections of the
  earlier steps are in): one GEMM plus ``k-1`` small ones;
* inverse: every ``alpha_p = r_p`` is given, so
  ``x = mean + b_i + [r, P_0(r_0), ..., P_{k-1}(r_{k-1})] [A_k; H_0; ...; H_{k-1}]``
  is one GEMM; missing trailing components are taken as 0 (their mean), and
  their polynomial terms become part of the bias;
* Jacobian: ``dr/dx = L A`` with ``L`` unit lower-triangular (a product of
  shears), built row block by row block, so ``det = 1``.

Pixels are processed in row blocks so that the working set stays in cache;
rows are independent, so a kernel applied to any subset of pixels gives the
same subset of the result.
"""

from __future__ import annotations

import numpy as np

from . import basis
from .params import PPAParams

BLOCK_ROWS = 16384


def _as_rows(x: np.ndarray, width: int, what: str) -> tuple[np.ndarray, np.dtype]:
    x = np.asarray(x)
    if x.ndim < 1 or x.shape[-1] != width:
        raise ValueError(f"{what} must have {width} values along its last axis, got shape {x.shape}")
    dtype = np.dtype(np.float32) if x.dtype == np.float32 else np.dtype(np.float64)
    return x.reshape(-1, width).astype(dtype, copy=False), dtype


def _step_features(params: PPAParams, p: int, alpha: np.ndarray) -> np.ndarray:
    return basis.features(alpha, int(params.degrees[p]), params.center[p], params.scale[p], params.tails)


def forward(x: np.ndarray, params: PPAParams, n_components: int | None = None) -> np.ndarray:
    """PPA coordinates ``r[..., :n_components]`` of ``x`` (``...`` x d); float32 stays float32."""
    d = params.n_features
    k = d if n_components is None else int(n_components)
    rows, dtype = _as_rows(x, d, "x")
    prm = params.cast(dtype)
    lin = np.ascontiguousarray(prm.rotation[:k].T)
    bias = prm.rotation[:k] @ prm.mean + prm.forward_bias[:k]
    coefs = [prm.forward[p, : prm.degrees[p], p + 1 : k] for p in range(min(k, d) - 1)]
    out = np.empty((rows.shape[0], k), dtype)
    for start in range(0, rows.shape[0], BLOCK_ROWS):
        r = out[start : start + BLOCK_ROWS]
        np.matmul(rows[start : start + BLOCK_ROWS], lin, out=r)
        r -= bias
        for p, coef in enumerate(coefs):
            r[:, p + 1 :] -= _step_features(prm, p, r[:, p]) @ coef
    return out.reshape(np.shape(x)[:-1] + (k,))


def _inverse_operator(params: PPAParams, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Stacked ``[A_k; H_0; ...; H_{k-1}]`` and bias for ``k`` given components (cached)."""
    key = ("inverse", k)
    if key not in params._cache:
        d = params.n_features
        stacked = [params.rotation[:k]] + [params.inverse[p, : params.degrees[p]] for p in range(min(k, d - 1))]
        bias = params.mean + params.inverse_bias
        for p in range(k, d - 1):  # alpha_p = 0 for the components left out
            bias = bias + _step_features(params, p, np.zeros(1, params.mean.dtype))[0] @ params.inverse[p, : params.degrees[p]]
        params._cache[key] = (np.ascontiguousarray(np.vstack(stacked)), bias)
    return params._cache[key]


def inverse(r: np.ndarray, params: PPAParams) -> np.ndarray:
    """Input-space point of PPA coordinates ``r`` (``...`` x k, ``k <= d``)."""
    d = params.n_features
    r = np.asarray(r)
    k = r.shape[-1] if r.ndim else 0
    if r.ndim < 1 or not 1 <= k <= d:
        raise ValueError(f"components must have between 1 and {d} values along the last axis, got shape {r.shape}")
    rows, dtype = _as_rows(r, k, "components")
    prm = params.cast(dtype)
    operator, bias = _inverse_operator(prm, k)
    out = np.empty((rows.shape[0], d), dtype)
    for start in range(0, rows.shape[0], BLOCK_ROWS):
        block = rows[start : start + BLOCK_ROWS]
        feats = [block] + [_step_features(prm, p, block[:, p]) for p in range(min(k, d - 1))]
        np.matmul(np.hstack(feats), operator, out=out[start : start + BLOCK_ROWS])
        out[start : start + BLOCK_ROWS] += bias
    return out.reshape(r.shape[:-1] + (d,))


def jacobian(x: np.ndarray, params: PPAParams) -> np.ndarray:
    """Analytic ``dr/dx`` at every point of ``x`` (``...`` x d) -> (``...`` x d x d)."""
    d = params.n_features
    rows, dtype = _as_rows(x, d, "x")
    prm = params.cast(dtype)
    r = forward(rows, prm)
    jac = np.broadcast_to(prm.rotation, (rows.shape[0], d, d)).copy()
    for p in range(d - 1):
        g = int(prm.degrees[p])
        slope = basis.derivatives(r[:, p], g, prm.center[p], prm.scale[p], prm.tails) @ prm.forward[p, :g, p + 1 :]
        jac[:, p + 1 :, :] -= slope[:, :, None] * jac[:, p, None, :]
    return jac.reshape(np.shape(x)[:-1] + (d, d))
