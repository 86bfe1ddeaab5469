"""Chunk kernels: forward map, inverse map and Jacobian on any ``(..., d)`` block.

With ``A`` the composed rotation and ``T_p`` the monomial features of step
``p`` (see :mod:`ppa_xr.core.params` for the coefficient matrices):

* forward: ``r = A (x - mean) - b_f``, then for ``p = 0..k-2``
  ``r[p+1:k] -= F_p^T T_p(r_p)`` (``r_p`` is final once the corrections of the
  earlier steps are in): one GEMM, then per panel of up to :data:`PANEL`
  curved steps small in-place GEMMs inside the panel and one for the rest;
  steps without a polynomial (exact rotations) cost nothing;
* inverse: every ``alpha_p = r_p`` is given, so
  ``x = mean + sum_{p<k} b_p + [r, T_0(r_0), ..., T_{k-1}(r_{k-1})] [A_k; H_0; ...; H_{k-1}]``
  is one GEMM; with ``k < d`` components only the first ``k`` steps run (the
  residual after step ``k`` is set to its mean, zero): the truncated
  reconstruction;
* squared error for ``k`` components: ``||r[k:]||^2`` after the first ``k``
  forward steps, and for every ``k`` at once in one pass (:func:`error_curve`);
* Jacobian: ``dr/dx = L A`` with ``L`` unit lower-triangular (a product of
  shears), so ``|det| = 1``.

A whitening model (standardizing or noise-whitening, ``W``) maps
``W (x - mean)``: ``A W`` replaces ``A`` in the first GEMM and the inverse's
operator and constant are multiplied by ``W^-1`` (:mod:`ppa_xr.core.params`).
A reduced model (``W = V^T S``, r x d) reads ``d`` inputs and has ``r``
components; its errors add each point's part outside the span of its
fitting sample (:meth:`~ppa_xr.core.PPAParams.outside_error`).

Pixels are processed in blocks of :data:`BLOCK` held transposed (components x
pixels), so each step reads and writes contiguous rows that stay in cache.
Rows are independent: a kernel applied to any subset of pixels gives the same
subset of the result. A pixel with a NaN or +-inf input is NaN in every output.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import basis, blas, compiled
from .checks import check_components, features_last
from .docstrings import shared
from .params import PPAParams

#: pixels per block (:data:`~ppa_xr.core.compiled.PIXEL_BLOCK`, the compiled look-ups' blocks too: one number)
BLOCK = compiled.PIXEL_BLOCK


def computed_dtype(dtype: np.dtype) -> np.dtype:
    """The floating dtype every kernel computes and returns for inputs of ``dtype``: float32 stays float32,
    anything else (float64, integers, bools) is float64."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float32 else np.dtype(np.float64)


def _as_columns(x: np.ndarray, width: int, what: str) -> tuple[np.ndarray, np.dtype, bool]:
    """``x`` (``...`` x width) as a (width, pixels) array, without copying when possible.

    Returns the array, the float dtype of the computation, and whether ``x`` is
    stored feature-major (bands first in memory, as a raster chunk of a
    ``(band, y, x)`` cube is): then the output is laid out the same way.
    """
    x = features_last(np.asarray(x), width, what)
    dtype = computed_dtype(x.dtype)
    moved = np.moveaxis(x, -1, 0)
    return moved.reshape(width, -1).astype(dtype, copy=False), dtype, band_first(x)


def band_first(x: np.ndarray) -> bool:
    """Whether ``x`` (``...`` x d) holds its features farthest apart in memory (bands first, as a raster chunk of a
    ``(band, y, x)`` cube): by the strides, not by contiguity, so that a strided view of a band-first chunk (a
    slice of a larger raster, as dask hands out slices of an in-memory cube) counts too."""
    return x.ndim > 1 and x.size > 0 and abs(x.strides[-1]) > max(abs(s) for s in x.strides[:-1])


def pixel_rows(x: np.ndarray) -> np.ndarray:
    """``x`` (``...`` x d) as (pixels, d) rows in C order of the pixels: a view where the layout allows it, else one
    copy in the chunk's own layout, each band's values contiguous for a band-first chunk (numpy's pixel-major
    reshape of a strided band-first view gathers across the bands, 2-3 times the cost of the copy of its runs)."""
    d = x.shape[-1]
    if band_first(x):
        return np.moveaxis(x, -1, 0).reshape(d, -1).T
    return x.reshape(-1, d)


def _output(shape: tuple[int, ...], width: int, dtype: np.dtype, feature_major: bool) -> tuple[np.ndarray, np.ndarray]:
    """An output of ``shape + (width,)`` in the input's layout, and its (width, pixels) view."""
    if feature_major:
        cols = np.empty((width, int(np.prod(shape))), dtype)
        return np.moveaxis(cols.reshape((width,) + shape), 0, -1), cols
    out = np.empty(shape + (width,), dtype)
    return out, out.reshape(-1, width).T


def _invalid_to_nan(out: np.ndarray) -> None:
    """A pixel (column) with any non-finite output (a NaN or +-inf input, an overflow) is NaN in all of them.

    The test is the column sums, by a GEMM with a row of ones: numpy's sum
    along a pixel's few contiguous values costs 7x more.
    """
    total = np.empty((1, out.shape[1]), out.dtype)
    blas.matmul_into(np.ones((1, out.shape[0]), out.dtype), out, total)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is what this looks for
        bad = ~np.isfinite(total[0])
    if bad.any():
        out[:, bad] = np.nan


def _scaled(params: PPAParams, p: int, alpha: np.ndarray) -> np.ndarray:
    """``t = (alpha - c_p) / s_p`` as a new array (a division: ``1 / s_p`` can overflow for data near 1e-300)."""
    t = alpha - params.center[p]
    t /= params.scale[p]
    return t


def run_spans(n_rows: int, span: Callable[[int, int], None], threads: int | None) -> None:
    """Run ``span(lo, hi)`` over contiguous row ranges on ``threads`` threads (default:
    all cores). Pass ``threads=1`` when an outer scheduler (dask) already runs
    one kernel per core."""
    threads = max(1, min(threads or os.cpu_count() or 1, -(-n_rows // BLOCK)))
    bounds = np.linspace(0, n_rows, threads + 1).astype(int)
    with blas.single_thread:
        if threads == 1:
            span(0, n_rows)
        else:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(span, bounds[:-1], bounds[1:]))


#: :func:`~ppa_xr.core.compiled.tail_squares`'s empty bias (no shift), by dtype
_NO_SHIFT = {np.dtype(t).char: np.empty(0, t) for t in (np.float32, np.float64)}

PANEL = 8  # steps whose corrections to the later components are applied in one GEMM


def _forward_plan(params: PPAParams, rows: int, n_steps: int, first: int = 0):
    """Rotation, bias and, per panel of steps, the coefficient matrices of the first ``rows``
    outputs after the first ``n_steps`` steps.

    Inside a panel ``[q0, q1)`` each step corrects the panel's later components
    at once (``r_p`` must be final before ``T_p(r_p)`` is formed); the
    corrections of the whole panel to ``r[q1:]`` are one GEMM with the stacked
    features ``[T_q0; ...; T_{q1-1}]``. ``first > 0``: the steps ``first..n_steps-1`` only,
    continuing a block the first ``first`` steps have run on; the bias is then
    theirs alone, ``sum_{first <= p < n_steps} b_p`` (no rotation: None).
    """
    panels = []
    curved = [p for p in params.curved_steps() if first <= p < min(n_steps, rows - 1)]  # rotation steps need nothing
    for i in range(0, len(curved), PANEL):
        group = curved[i : i + PANEL]
        q1 = min(group[-1] + 1, rows) if i + PANEL >= len(curved) else curved[i + PANEL]
        steps = [(p, int(params.degrees[p]), np.asfortranarray(params.forward[p, : params.degrees[p], p + 1 : q1])) for p in group]
        rest = np.asfortranarray(np.vstack([params.forward[p, : params.degrees[p], q1:rows] for p in group]))
        panels.append((q1, steps, rest))
    bias = params.forward_bias[first:n_steps, :rows].sum(axis=0)
    if first:
        return None, bias[:, None], panels
    lin = params.input_rotation(rows)
    return np.asfortranarray(lin.T), (lin @ params.mean + bias)[:, None], panels


def _blockwise(
    x, params: PPAParams, key: tuple, build, width: int, n_feats: int, body, threads: int | None, straight: bool = False,
    r_at: int | None = None,
) -> np.ndarray:
    """The frame of the forward-type kernels over blocks of pixels held as (rows, pixels).

    ``build(prm)`` returns the (cached) ``lin^T``, ``bias`` and the rest of the
    plan; per block ``r = lin @ block - bias`` goes into a reused buffer and
    ``body(prm, plan, r, feats, out)`` writes the block's (width, pixels) output.
    ``straight``: the output is ``r`` itself (no polynomial acts on it), computed
    straight into the output (:func:`_rotation_into`). ``r_at``: where the output's
    rows are contiguous (feature-major), ``r`` is its rows ``r_at:r_at + rows`` instead of a
    buffer (the body then finds its final ``r`` in place).
    """
    cols, dtype, feature_major = _as_columns(params.inputs(x), params.n_inputs, "x")
    prm = params.cast(dtype)
    lin_t, bias, plan = prm.cached(key, lambda: build(prm))
    rows = lin_t.shape[1]
    out, out_cols = _output(np.shape(x)[:-1], width, dtype, feature_major)
    if straight:
        _rotation_into(out_cols, cols, lin_t, bias, threads)
        return out

    in_place = r_at is not None and out_cols.strides[1] == out_cols.itemsize

    def span(lo: int, hi: int) -> None:
        size = min(BLOCK, hi - lo)
        feats_buffer, r_buffer = np.empty(n_feats * size, dtype), None if in_place else np.empty(rows * size, dtype)
        for start in range(lo, hi, BLOCK):
            block = cols[:, start : min(start + BLOCK, hi)]
            # (rows, pixels) views of reused buffers: each step's row stays contiguous and
            # in cache, and fresh large temporaries would cost page faults
            n = block.shape[1]
            feats = feats_buffer[: n_feats * n].reshape(n_feats, n)
            r = out_cols[r_at : r_at + rows, start : start + n] if r_buffer is None else r_buffer[: rows * n].reshape(rows, n)
            blas.matmul_into(lin_t.T, block, r, points=1)
            r -= bias
            body(prm, plan, r, feats, out_cols[:, start : start + n])
            _invalid_to_nan(out_cols[:, start : start + n])

    run_spans(cols.shape[1], span, threads)
    return out


def _rotation_into(out_cols: np.ndarray, cols: np.ndarray, lin_t: np.ndarray, bias: np.ndarray, threads: int | None) -> None:
    """``out = lin @ x - bias`` with the GEMM written straight into the output, span by span (no block
    buffer, no copy): the map of a model without polynomials among these outputs."""

    def span(lo: int, hi: int) -> None:
        for start in range(lo, hi, BLOCK):  # block by block: the bias and the check read the GEMM's output from cache
            r = out_cols[:, start : min(start + BLOCK, hi)]
            blas.matmul_into(lin_t.T, cols[:, start : start + r.shape[1]], r, points=1)
            r -= bias
            _invalid_to_nan(r)

    run_spans(cols.shape[1], span, threads)


def _forward_steps(prm: PPAParams, panels, r: np.ndarray, feats: np.ndarray, rows: int) -> None:
    """The curved steps of a forward plan (:func:`_forward_plan`) on a block ``r`` (rows, pixels), in place."""
    for q1, steps, rest in panels:
        offset = 0
        for p, g, inside in steps:
            t = basis.powers(_scaled(prm, p, r[p]), g, prm.tails, feats[offset : offset + g])
            if p + 1 < q1:  # r[p+1:q1] -= inside^T t
                blas.matmul_into(inside.T, t, r[p + 1 : q1], -1.0, 1.0, points=1)
            offset += g
        if q1 < rows:
            blas.matmul_into(rest.T, feats[:offset], r[q1:], -1.0, 1.0, points=1)


def _map_forward(x, params: PPAParams, rows: int, n_steps: int, width: int, finish, threads: int | None) -> np.ndarray:
    """Run the forward map's first ``n_steps`` steps on the first ``rows`` outputs of every
    block of ``x``; ``finish(r, out)`` turns the (rows, pixels) result into the (width, pixels) output."""

    def body(prm, panels, r, feats, out) -> None:
        _forward_steps(prm, panels, r, feats, rows)
        finish(r, out)

    n_feats = PANEL * max(int(params.degrees.max(initial=1)), 1)
    build = lambda prm: _forward_plan(prm, rows, n_steps)  # noqa: E731
    straight = finish is _copy and not any(p < min(n_steps, rows - 1) for p in params.curved_steps())
    return _blockwise(x, params, ("forward", rows, n_steps), build, width, n_feats, body, threads, straight)


@shared
def _copy(r: np.ndarray, out: np.ndarray) -> None:
    blas.copy_into(r, out)


def whitening(params: PPAParams, k: int, dtype: np.dtype) -> np.ndarray:
    """``sqrt(lambda_j)``, ``j < k``: the components' standard deviations on the fitting sample, which ``whiten=True``
    divides the components by (:func:`forward`) and multiplies back (:func:`inverse`); the one place of that rule."""
    return np.sqrt(np.maximum(params.explained_variance[:k], np.finfo(np.float64).tiny)).astype(dtype)


@shared
def forward(x: np.ndarray, params: PPAParams, n_components: int | None = None, threads: int | None = None,
            whiten: bool = False) -> np.ndarray:
    """PPA coordinates ``r[..., :n_components]`` of ``x`` (``...`` x d); float32 stays float32.

    Parameters
    ----------
    {{kernel_x}}
    n_components : int, optional
        Outputs to return, 1..d (default d).
    {{threads}}
    whiten : bool
        Divide each component by its standard deviation on the fitting sample, ``r_j / sqrt(lambda_j)`` (``whitening``).

    Returns
    -------
    np.ndarray
        (``...`` x k); NaN where a point has a NaN or inf.
    """
    d = params.n_features
    k = d if n_components is None else check_components(n_components, d)
    out = _map_forward(x, params, k, d - 1, k, _copy, threads)
    if whiten:
        out /= whitening(params, k, out.dtype)
    return out


def _inverse_plan(params: PPAParams, k: int) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Stacked ``[A_k; H_p ...]``, the bias and the (step, degree) of the first ``k`` inverse steps.

    The residual after step ``k`` is set to its mean, zero, so the later steps
    (their polynomials and constants) drop out; steps without a polynomial
    (exact rotations) contribute nothing and are left out too.
    """
    used = [(p, int(params.degrees[p])) for p in params.curved_steps() if p < k]
    stacked = np.vstack([params.rotation[:k]] + [params.inverse[p, :g] for p, g in used])
    bias = params.inverse_bias[:k].sum(axis=0)
    if params.whitened:  # x - mean = W^-1 z, as rows: z @ W^-T
        back = params.unwhitening().T
        stacked, bias = stacked @ back, bias @ back
    bias = params.mean + bias
    return np.asfortranarray(stacked), bias, used


@shared
def inverse(r: np.ndarray, params: PPAParams, threads: int | None = None, whiten: bool = False) -> np.ndarray:
    """Input-space point of the first ``k <= d`` PPA coordinates ``r`` (``...`` x k).

    With ``k < d`` this is the ``k``-component reconstruction: the residual
    after step ``k`` is set to its mean (zero) and only the first ``k``
    inverse steps run, ``x^ = mean + sum_{p<k} [a_p alpha_p + h_p(alpha_p)]``.
    The squared error is then that residual's energy, never above PCA's on the
    fitting sample.

    Parameters
    ----------
    r : np.ndarray
        The first k PPA coordinates (``...`` x k).
    params : PPAParams
        The fitted parameters.
    {{threads}}
    whiten : bool
        The components were whitened (``forward(..., whiten=True)``): multiplied back by ``sqrt(lambda_j)`` first.

    Returns
    -------
    np.ndarray
        (``...`` x d) points in input space.
    """
    d = params.n_features
    r = np.asarray(r)
    if r.ndim < 1:
        raise ValueError(f"components must be an array (... x k), got a scalar {r!r}")
    k = check_components(r.shape[-1], d, "the number of components along the last axis")
    if whiten:
        r = r * whitening(params, k, computed_dtype(r.dtype))
    cols, dtype, feature_major = _as_columns(r, k, "components")
    prm = params.cast(dtype)
    operator, bias, used = prm.cached(("inverse", k), lambda: _inverse_plan(prm, k))
    out, out_cols = _output(r.shape[:-1], params.n_inputs, dtype, feature_major)

    n_feats = operator.shape[0] - k

    def span(lo: int, hi: int) -> None:
        feats_buffer = np.empty(n_feats * min(BLOCK, hi - lo), dtype)
        for start in range(lo, hi, BLOCK):
            block = cols[:, start : min(start + BLOCK, hi)]
            n = block.shape[1]
            x = out_cols[:, start : start + n]  # the GEMMs write straight into the output
            blas.matmul_into(operator[:k].T, block, x, points=1)
            if used:  # the polynomials' part: a second GEMM on their features, added in place
                feats = feats_buffer[: n_feats * n].reshape(n_feats, n)
                offset = 0
                for p, g in used:
                    basis.powers(_scaled(prm, p, block[p]), g, prm.tails, feats[offset : offset + g])
                    offset += g
                blas.matmul_into(operator[k:].T, feats, x, 1.0, 1.0, points=1)
            x += bias[:, None]
            _invalid_to_nan(x)

    run_spans(cols.shape[1], span, threads)
    if params.used is not None:  # a reduced model's dropped inputs: not modelled, NaN
        out[..., ~params.used] = np.nan
    return out


def _with_outside(errors: np.ndarray, x: np.ndarray, params: PPAParams) -> np.ndarray:
    """``errors`` (``...``, or ``...`` x k) plus each point's squared error outside a reduced model's span (in place)."""
    outside = params.outside_error(np.asarray(x))
    if outside is not None:
        errors += (outside if errors.ndim == outside.ndim else outside[..., None]).astype(errors.dtype)
    return errors


@shared
def reconstruct(x: np.ndarray, params: PPAParams, n_components: int, threads: int | None = None) -> np.ndarray:
    """``x`` rebuilt from its first ``n_components`` components: ``inverse(forward(x)[..., :k])``.

    Parameters
    ----------
    {{kernel_x}}
    {{kept}}
    {{threads}}

    Returns
    -------
    np.ndarray
        (``...`` x d) reconstructions.
    """
    return inverse(forward(x, params, n_components, threads), params, threads)


@shared
def squared_error(x: np.ndarray, params: PPAParams, n_components: int, threads: int | None = None) -> np.ndarray:
    """Per-point squared error of the ``k``-component reconstruction, ``sum_j (x_j - x^_j)^2``.

    The rows ``k..d-1`` of the forward map after its first ``k`` steps are an
    orthogonal image of the residual after step ``k``, so the error is their
    squared norm: one truncated forward pass, no inverse.

    Parameters
    ----------
    {{kernel_x}}
    {{kept}}
    {{threads}}

    Returns
    -------
    np.ndarray
        (``...``) squared errors (whitened units for a whitening model).
    """
    d = params.n_features
    k = check_components(n_components, d)

    def norm(r: np.ndarray, out: np.ndarray) -> None:
        compiled.tail_squares(r, k, out[0], _NO_SHIFT[r.dtype.char])

    return _with_outside(_map_forward(x, params, d, k, 1, norm, threads)[..., 0], x, params)


def forward_and_error(x: np.ndarray, params: PPAParams, n_components: int, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``forward(x, params)`` and ``squared_error(x, params, n_components)`` in one pass.

    The pass is ``squared_error``'s (the error bit for bit): the rotation and
    the first ``k`` steps, then ``||r[k:]||^2``; the same block then goes on
    through the bias and the curved steps of ``k..d-2`` to the whole forward
    map, equal to :func:`forward` up to rounding (its corrections are summed
    in another order). A map without curved steps runs the two kernels (its
    forward writes the GEMM straight into the output).
    """
    d = params.n_features
    k = check_components(n_components, d)
    if not any(p < d - 1 for p in params.curved_steps()):
        return forward(x, params, threads=threads), squared_error(x, params, k, threads)
    cols, dtype, feature_major = _as_columns(params.inputs(x), params.n_inputs, "x")
    prm = params.cast(dtype)
    lin_t, bias, plan = prm.cached(("forward", d, k), lambda: _forward_plan(prm, d, k))
    _, later_bias, later_plan = prm.cached(("forward", d, d - 1, k), lambda: _forward_plan(prm, d, d - 1, k))
    shape = np.shape(x)[:-1]
    out, out_cols = _output(shape, d, dtype, feature_major)
    error, error_cols = _output(shape, 1, dtype, feature_major)
    n_feats = PANEL * max(int(params.degrees.max(initial=1)), 1)
    in_place = out_cols.strides[1] == out_cols.itemsize  # rows of the output contiguous (feature-major): r is the output itself
    # r - (+0.0) is r bit for bit (-0.0 too, NaN stays NaN): no pass where the later steps have no bias (no curve among them)
    shifted = bool(later_bias.any() or np.signbit(later_bias).any())

    def span(lo: int, hi: int) -> None:
        size = min(BLOCK, hi - lo)
        feats_buffer, r_buffer = np.empty(n_feats * size, dtype), None if in_place else np.empty(d * size, dtype)
        for start in range(lo, hi, BLOCK):
            block = cols[:, start : min(start + BLOCK, hi)]
            n = block.shape[1]
            feats = feats_buffer[: n_feats * n].reshape(n_feats, n)
            r = out_cols[:, start : start + n] if r_buffer is None else r_buffer[: d * n].reshape(d, n)
            blas.matmul_into(lin_t.T, block, r, points=1)
            r -= bias
            _forward_steps(prm, plan, r, feats, d)
            compiled.tail_squares(r, k, error_cols[0, start : start + n], _NO_SHIFT[dtype.char])
            _invalid_to_nan(error_cols[:, start : start + n])
            if shifted:
                r -= later_bias
            _forward_steps(prm, later_plan, r, feats, d)
            if r_buffer is not None:
                _copy(r, out_cols[:, start : start + n])
            _invalid_to_nan(out_cols[:, start : start + n])

    run_spans(cols.shape[1], span, threads)
    return out, _with_outside(error[..., 0], x, params)


@shared
def _error_plan(params: PPAParams) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, np.ndarray, np.ndarray]]]:
    steps = [
        (p, int(params.degrees[p]), np.asfortranarray(params.forward[p, : params.degrees[p], p + 1 :]), params.forward_bias[p, p + 1 :, None])
        for p in params.curved_steps()
    ]
    lin = params.input_rotation()
    return np.asfortranarray(lin.T), (lin @ params.mean)[:, None], steps


@shared
def error_curve(x: np.ndarray, params: PPAParams, threads: int | None = None, with_forward: bool = False):
    """Squared reconstruction error of every point for ``k = 1..d`` components -> (``...`` x d), one pass.

    ``r = A (x - mean)``; between two curved steps ``r`` does not change, so the
    errors ``||r[k:]||^2`` of every ``k`` in between are suffix sums of ``r^2``
    (one pass over the rows after the next curved step, then a row at a time);
    then that step's correction is applied. Entry ``k-1`` equals
    :func:`squared_error` with ``k`` components (and 0 at ``k = d``). After the
    last step ``r`` is the forward map, which ``with_forward`` returns too.

    Parameters
    ----------
    {{kernel_x}}
    {{threads}}
    with_forward : bool
        Also return the pass's final ``r``: :func:`forward` up to rounding (its biases are subtracted step by step).

    Returns
    -------
    np.ndarray or tuple of np.ndarray
        (``...`` x d) squared errors keeping k = 1..d components; with ``with_forward``, also (``...`` x d) outputs.
    """
    d = params.n_features

    def body(prm, steps, r, feats, out) -> None:
        # the suffix sums go row by row: into contiguous rows, copied once into a pixel-major output
        head = out[:d]
        errors = head if head.flags.c_contiguous else np.empty(head.shape, out.dtype)
        first = 1  # the state of r is that of every k in [first, next curved step]
        for p, g, coef, bias in steps + [(d - 1, 0, None, None)]:
            # ||r[j:]||^2 for j = p, p-1, ..., first: the tail beyond p, then one row at a time
            np.einsum("ij,ij->j", r[p + 1 :], r[p + 1 :], out=errors[p - 1])
            compiled.suffix_squares(r, errors, p, first)
            if coef is not None:
                t = basis.powers(_scaled(prm, p, r[p]), g, prm.tails, feats[:g])
                r[p + 1 :] -= bias
                blas.matmul_into(coef.T, t, r[p + 1 :], -1.0, 1.0, points=1)
            first = p + 1
        errors[d - 1] = 0
        if errors is not head:
            head[...] = errors
        if with_forward and not np.may_share_memory(r, out[d:]):  # r is not already there (a pixel-major output)
            out[d:] = r

    n_feats = max(int(params.degrees.max(initial=1)), 1)
    both = _blockwise(x, params, ("errors",), _error_plan, 2 * d if with_forward else d, n_feats, body, threads,
                      r_at=d if with_forward else None)
    curve = _with_outside(both[..., :d], x, params)  # in place: a view of both
    return (curve, both[..., d:]) if with_forward else curve


@shared
def jacobian(x: np.ndarray, params: PPAParams) -> np.ndarray:
    """Analytic ``dr/dx`` at every point of ``x`` (``...`` x d) -> (``...`` x d x d).

    Parameters
    ----------
    {{kernel_x}}

    Returns
    -------
    np.ndarray
        (``...`` x d x d); all NaN where a point is invalid.
    """
    d, n_inputs = params.n_features, params.n_inputs
    cols, dtype, _ = _as_columns(x, n_inputs, "x")
    rows = cols.T
    prm = params.cast(dtype)
    r = forward(rows, prm)
    jac = np.broadcast_to(prm.input_rotation(), (rows.shape[0], d, n_inputs)).copy()
    for p in range(d - 1):
        g = int(prm.degrees[p])
        slopes = basis.power_derivatives(_scaled(prm, p, r[:, p]), g, 1, prm.tails) / prm.scale[p]
        shear = slopes.T @ prm.forward[p, :g, p + 1 :]  # d r[p+1:] / d r_p
        jac[:, p + 1 :, :] -= shear[:, :, None] * jac[:, p, None, :]
    jac[~np.isfinite(r).all(axis=1)] = np.nan  # an invalid point has no derivative: NaN in every entry, as in every output
    return jac.reshape(np.shape(x)[:-1] + (d, n_inputs))


def _rotation_error(x: np.ndarray, params: PPAParams, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`forward_error` of a map without curved steps (a rotation) on feature-major ``x`` (d, n): per block
    :func:`_rotation_into`'s GEMM, then its bias and the squared error of the outputs ``k..d-1`` in one compiled pass
    over them (:func:`~ppa_xr.core.compiled.tail_squares`), where :func:`forward` and an einsum of its
    outputs made three: the same bits."""
    d, n = x.shape
    prm = params.cast(x.dtype)
    lin_t, bias, _ = prm.cached(("forward", d, d - 1), lambda: _forward_plan(prm, d, d - 1))
    shift = np.ascontiguousarray(bias[:, 0])
    out, error = np.empty((d, n), x.dtype), np.empty(n, x.dtype)

    def span(lo: int, hi: int) -> None:
        for start in range(lo, hi, BLOCK):  # forward's blocks: single-precision BLAS rounds by a call's size
            stop = min(start + BLOCK, hi)
            r = out[:, start:stop]
            blas.matmul_into(lin_t.T, x[:, start:stop], r, points=1)
            compiled.tail_squares(r, k, error[start:stop], shift)
            _invalid_to_nan(r)

    run_spans(n, span, 1)
    error += 0 * out[0]  # NaN where the pixel is
    return out, error


def _fused_plan(prm: PPAParams, k: int) -> tuple:
    """:func:`forward_error`'s parameters: ``lin``, the bias of the rotation and the first ``k`` steps, that of the
    later steps, the degrees (0 for a step without polynomial), centers, scales and coefficients, all contiguous."""
    d = prm.n_features
    lin = np.ascontiguousarray(prm.input_rotation())
    curved = np.isin(np.arange(d - 1), prm.curved_steps())
    degrees = np.where(curved & prm.forward.any(axis=(1, 2)), prm.degrees, 0).astype(np.int64)
    bias = lin @ prm.mean + prm.forward_bias[:k].sum(axis=0)
    later = prm.forward_bias[k:].sum(axis=0).astype(lin.dtype)
    return lin, np.ascontiguousarray(bias), later, degrees, prm.center.copy(), prm.scale.copy(), np.ascontiguousarray(prm.forward)


def feature_major(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Pixel rows ``x`` (n, d), any strides, as a feature-major (d, n) copy in ``dtype``: numpy's copy where each
    feature's values are contiguous (a band-first chunk), a compiled cache-sized transpose otherwise (numpy's
    strided transpose costs 3-4 times more)."""
    out = np.empty(x.shape[::-1], dtype)
    if x.strides[0] == x.itemsize:
        np.copyto(out, x.T)
    else:
        compiled.feature_major(x, out)
    return out


#: features up to which :func:`forward_error` runs compiled loops (above, a GEMM's work outweighs its call)
COMPILED_FEATURES = 32


def forward_error(x: np.ndarray, params: PPAParams, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """``forward`` and ``squared_error(..., n_components)`` of feature-major pixels ``x`` (d, n) in one pass on this
    thread: (d, n) and (n,), feature-major, NaN in all of them where a pixel is invalid; equal to those of
    :func:`forward_and_error` up to rounding, bit for bit whatever the block a pixel is in. Up to
    :data:`COMPILED_FEATURES` features one compiled pass (:func:`ppa_xr.core.compiled.forward_error`), above it
    :func:`forward_and_error`'s GEMMs. For the report's maps (a model that is not reduced)."""
    d = params.n_features
    k = check_components(n_components, d)
    x = np.ascontiguousarray(x)
    dtype = computed_dtype(x.dtype)
    if d > COMPILED_FEATURES:  # feature-major views: the outputs are laid out the same way
        if any(p < d - 1 for p in params.curved_steps()):
            out, error = forward_and_error(x.T, params, k, 1)
            error[np.isnan(out[:, 0])] = np.nan  # squared_error keeps 0 at k = d
            return out.T, error
        return _rotation_error(x.astype(dtype, copy=False), params, k)  # a rotation: the error is that of its own outputs
    prm = params.cast(dtype)
    plan = prm.cached(("fused", k), lambda: _fused_plan(prm, k))
    out, error = np.empty((d, x.shape[1]), dtype), np.empty(x.shape[1], dtype)
    compiled.forward_error(x, *plan, compiled.TAILS[prm.tails], k, out, error)
    return out, error
