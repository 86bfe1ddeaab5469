"""Piecewise-constant functions of each column, evaluated without a binary search.

A column's function is ``table[pos(v)]`` with ``pos(v) = #{P_i <= v}`` for its
sorted breakpoints ``P`` (what ``np.searchsorted(P, v, side="right")``
returns). A binary search costs ~40 ns a value, mostly mispredicted branches;
here ``pos`` comes from a uniform grid in the compressed coordinate

    t(v) = asinh((v - c) / s),   c, s: median and half inter-quartile range of P,

cut into ``G = CELLS_PER_BREAK * len(P)`` cells over ``[t(P_0), t(P_-1)]``.
With ``start[g] = #{i : cell(P_i) < g}`` (cells of the breakpoints by the same
arithmetic), ``pos(v) = start[cell(v)] + #{P_i <= v : cell(P_i) = cell(v)}``:
a gather and ``steps`` comparisons, ``steps`` being the most breakpoints in
one cell (1 on Gaussian, lognormal, Cauchy and bimodal columns: asinh turns
tails logarithmic). Each operation is monotone, so ``pos`` is exactly the
binary search's (up to a value within one rounding of a breakpoint, where
asinh's last bit decides); 5-8 ns a value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: grid cells per breakpoint: 8 keeps one breakpoint per cell on the columns above
CELLS_PER_BREAK = 8
#: values per block of a look-up (about 128 KiB of float64 per buffer)
BLOCK = 16384


def _coordinate(values: np.ndarray, center: np.ndarray, inv_scale: np.ndarray, exact: bool, t: np.ndarray | None = None) -> np.ndarray:
    """``asinh((v - center) inv_scale)`` into ``t``, in ``inv_scale``'s dtype; the difference in float64 where
    ``exact`` (values near a large center keep their spread)."""
    dtype = inv_scale.dtype
    t = np.empty(np.shape(values), dtype) if t is None else t
    with np.errstate(over="ignore", invalid="ignore"):  # beyond the dtype's range is +-inf, the last cells
        np.subtract(values, center, out=t, dtype=None if exact else dtype, casting="same_kind")
        t *= inv_scale
        return np.arcsinh(t, out=t)


@dataclass(frozen=True)
class StepLookup:
    """``table[j, pos_j(v)]`` for each column ``j`` (module docstring); all arrays padded to a common length.

    Parameters
    ----------
    breaks : np.ndarray
        (d, K+1) sorted distinct breakpoints of each column, padded with NaN
        (no value compares above it, +inf included).
    table : np.ndarray
        (d, K+1) value on each position ``0..K``.
    start : np.ndarray
        (d, G) first position of each grid cell, as a flat index into ``breaks`` and ``table``.
    center, inv_scale, slope, intercept : np.ndarray
        (d,): the cell of ``v`` in column ``j`` is
        ``floor(slope_j asinh((v - center_j) inv_scale_j) + intercept_j)``, clipped to ``0..G-1``;
        ``center`` float64, the others float32 unless the data's scale needs float64.
    steps : int
        Comparisons after the grid: the most breakpoints in one cell.
    exact_difference : bool
        Subtract the center in float64: a column's spread is far below its
        center's magnitude (1e6 +- 1e-3), which float32 would round away
        (the coordinate's dtype is that of ``inv_scale``).
    """

    breaks: np.ndarray
    table: np.ndarray
    start: np.ndarray
    center: np.ndarray
    inv_scale: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray
    steps: int
    exact_difference: bool = False

    @classmethod
    def build(cls, breaks: np.ndarray, tables: np.ndarray) -> StepLookup:
        """From sorted breakpoints ``P`` (d, K) of each column (ties allowed) and the values (d, K+1) on their positions."""
        breaks, tables = np.asarray(breaks, dtype=np.float64), np.asarray(tables)
        if breaks.ndim != 2 or breaks.shape[1] < 1 or tables.shape != (breaks.shape[0], breaks.shape[1] + 1):
            raise ValueError(f"expected breakpoints (d, K) and values (d, K+1), got shapes {breaks.shape} and {tables.shape}")
        if not np.isfinite(breaks).all() or (np.diff(breaks, axis=1) < 0).any():
            raise ValueError("breakpoints must be finite and sorted along each row (np.sort(P, axis=1))")
        d, K = breaks.shape
        padded = np.full((d, K + 1), np.nan)
        table = np.empty((d, K + 1), dtype=tables.dtype)
        sizes = np.full(d, K)
        tied = (np.diff(breaks, axis=1) <= 0).any(axis=1)
        padded[~tied, :K], table[~tied] = breaks[~tied], tables[~tied]
        for j in np.flatnonzero(tied):  # a tie takes the value after its last copy
            last = np.append(breaks[j, 1:] != breaks[j, :-1], True)
            sizes[j] = last.sum()
            padded[j, : sizes[j]] = breaks[j, last]
            table[j, : sizes[j] + 1] = np.concatenate([tables[j, :1], tables[j, 1:][last]])
            table[j, sizes[j] + 1 :] = table[j, sizes[j]]
        rows = np.arange(d)
        quartiles = padded[rows[:, None], (sizes[:, None] * np.array([1, 2, 3])) // 4]
        center = quartiles[:, 1]
        inv_scale = 1.0 / np.where(quartiles[:, 2] > quartiles[:, 0], (quartiles[:, 2] - quartiles[:, 0]) / 2, 1.0)
        ends = padded[rows[:, None], np.column_stack([rows * 0, sizes - 1])].T  # (2, d): first and last breakpoints
        exact = not (np.abs(center) * inv_scale < 1e4).all()  # float32 keeps 1e-7 of |center|
        with np.errstate(over="ignore"):  # a scale beyond float32 is inf, and the check below sends it to float64
            scale = inv_scale.astype(np.float32)
        t_ends = _coordinate(ends, center, scale, exact)  # the same arithmetic as every look-up
        if not np.isfinite(t_ends).all():  # data near 1e-40 or 1e40: the coordinate needs float64
            scale = inv_scale
            t_ends = _coordinate(ends, center, scale, exact)
        t_ends = t_ends.astype(np.float64)
        cells = CELLS_PER_BREAK * K
        span = t_ends[1] - t_ends[0]
        slope = cells / np.where(span > 0, span, np.inf)  # one breakpoint: every value in cell 0
        grid = [center, scale, slope.astype(scale.dtype), (-t_ends[0] * slope).astype(scale.dtype)]
        lookup = cls(padded, table, np.empty((d, cells), dtype=np.intp), *grid, 0, exact)
        # cells of all breakpoints at once, as flat cells j G + c (ascending); start = rank among its row's breakpoints
        valid = np.arange(K + 1) < sizes[:, None]
        flat_cells = (lookup._cells(padded.T).T + (rows * cells)[:, None])[valid]
        ranks = np.searchsorted(flat_cells, np.arange(d * cells), side="left").reshape(d, cells)
        lookup.start[...] = ranks - np.cumsum(sizes)[:, None] + sizes[:, None] + (rows * (K + 1))[:, None]
        object.__setattr__(lookup, "steps", int(np.bincount(flat_cells, minlength=d * cells).max()))
        return lookup

    def _cells(self, values: np.ndarray, t: np.ndarray | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """Grid cell of each value in its column, into ``out`` (``t``: scratch of the grid's dtype and the same shape).

        Every step is monotone in the value (rounding is), and a cell is far
        wider than the dtype's resolution; a value beyond the grid falls in
        its row's first or last cell. A NaN's cell is arbitrary: its result
        is not defined.
        """
        t = _coordinate(values, self.center, self.inv_scale, self.exact_difference, t)
        with np.errstate(invalid="ignore"):  # NaN has no integer cell
            t *= self.slope
            t += self.intercept
            np.clip(t, 0, self.start.shape[1] - 1, out=t)
            out = np.empty(t.shape, dtype=np.intp) if out is None else out
            out[...] = t
        return out

    def _blocks(self, values: np.ndarray):
        """``(rows, values, table values)`` over blocks of :data:`BLOCK` values of ``values`` (..., d) as (pixels, d),
        buffers reused in place so that every pass stays in cache."""
        d = self.breaks.shape[0]
        flat = np.reshape(values, (-1, d))
        rows = max(1, BLOCK // d)
        t, pos = np.empty((rows, d), self.inv_scale.dtype), np.empty((rows, d), dtype=np.intp)
        below, found = np.empty((rows, d), dtype=bool), np.empty((rows, d), dtype=self.table.dtype)
        row_offset = np.arange(d) * self.start.shape[1]
        for first in range(0, len(flat), rows):
            v = flat[first:first + rows]
            n = len(v)
            p = self._cells(v, t=t[:n], out=pos[:n])
            p += row_offset
            np.take(self.start, p, out=p, mode="clip")  # in range by construction: "clip" skips the bounds check
            for _ in range(self.steps):
                p += np.less_equal(np.take(self.breaks, p, mode="clip"), v, out=below[:n])
            yield slice(first, first + n), v, np.take(self.table, p, out=found[:n], mode="clip")

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """``table[j, pos_j(v_j)]`` for ``values`` (..., d); undefined where a value is NaN (mask it)."""
        result = np.empty((int(np.prod(np.shape(values)[:-1])), self.breaks.shape[0]), dtype=self.table.dtype)
        for rows, _, found in self._blocks(values):
            result[rows] = found
        return result.reshape(np.shape(values))

    def row_sums(self, values: np.ndarray) -> np.ndarray:
        """``sum_j table[j, pos_j(v_j)]`` for ``values`` (..., d) -> (...), NaN where a value is NaN (or where
        +inf and -inf meet in one row). Sums by BLAS, block by block: numpy's sum along a short last axis
        is several times slower."""
        result = np.empty(int(np.prod(np.shape(values)[:-1])), dtype=self.table.dtype)
        ones = np.ones(self.breaks.shape[0], dtype=self.table.dtype)
        for rows, v, found in self._blocks(values):
            np.dot(found, ones, out=result[rows])
            with np.errstate(invalid="ignore"):
                result[rows][np.isnan(v @ ones.astype(v.dtype, copy=False))] = np.nan
        return result.reshape(np.shape(values)[:-1])
