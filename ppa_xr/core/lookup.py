"""Piecewise-constant functions of each column, evaluated without a full binary search.

A column's function is ``table[pos(v)]`` with ``pos(v) = #{P_i <= v}`` for its
sorted breakpoints ``P`` (what ``np.searchsorted(P, v, side="right")``
returns). A binary search over all of ``P`` costs ~40 ns a value, mostly
mispredicted branches; here ``pos`` comes from a uniform grid in a compressed
coordinate of the column (:mod:`ppa_xr.core.compiled`: piecewise linear in
``log2(1 + |v - c| / s)``, ``c``, ``s``: median and half inter-quartile range
of ``P``), cut into ``G = CELLS_PER_BREAK * len(P)`` cells over
``[t(P_0), t(P_-1)]``. With ``start[g] = #{i : cell(P_i) < g}`` (cells of the
breakpoints by the same compiled arithmetic),
``pos(v) = start[cell(v)] + #{P_i <= v : cell(P_i) = cell(v)}``: a gather and
a branchless binary search of ``depth = bit_length(steps)`` comparisons over
the ``2^depth - 1`` breakpoints from ``start[cell(v)]``, ``steps`` being the most
breakpoints in one cell of the column. ``steps`` is 1 on Gaussian, lognormal, Cauchy and
bimodal columns (the coordinate turns tails logarithmic), but a spike (a
share of the sample on one value: clipped or saturated pixels, a dequantized
integer band's most common level) puts many breakpoints in one cell; the
search keeps the cost of every value at ``depth <= bit_length(len(P))``
comparisons whatever the data. Each operation is monotone, so ``pos`` is
exactly the binary search's. The loops are compiled (numba), one pass over
the values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import compiled

#: grid cells per breakpoint: 8 keeps one breakpoint per cell on the columns above
CELLS_PER_BREAK = 8


@dataclass(frozen=True)
class StepLookup:
    """``table[j, pos_j(v)]`` for each column ``j`` (module docstring); all arrays padded to a common length.

    Parameters
    ----------
    breaks : np.ndarray
        (d, L) sorted distinct breakpoints of each column, padded with NaN (no value compares above it, +inf
        included) to ``L = K + 2^depth - 1`` (a search from a row's last cell stays in its row).
    table : np.ndarray
        (d, L) value on each position ``0..K`` (then padding).
    start : np.ndarray
        (d, G) uint32: first position of each grid cell, as a flat index into ``breaks`` and ``table``.
    center, inv_scale, slope, intercept : np.ndarray
        (d,) float64: the cell of ``v`` in column ``j`` is
        ``floor(slope_j t((v - center_j) inv_scale_j) + intercept_j)``, clipped to ``0..G-1``
        (``t``: ``ppa_xr.core.compiled.grid_cells``'s coordinate).
    steps : int
        The most breakpoints in one cell (of all columns).
    depth : np.ndarray
        (d,) int64: comparisons after the grid in each column, the ``bit_length`` of its most breakpoints in one
        cell, at most ``K.bit_length()``.
    """

    breaks: np.ndarray
    table: np.ndarray
    start: np.ndarray
    center: np.ndarray
    inv_scale: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray
    steps: int
    depth: np.ndarray

    @classmethod
    def build(cls, breaks: np.ndarray, tables: np.ndarray) -> StepLookup:
        """From sorted breakpoints ``P`` (d, K) of each column (ties allowed) and the values (d, K+1) on their positions.

        Parameters
        ----------
        breaks : np.ndarray
            (d, K) finite breakpoints, sorted along each row.
        tables : np.ndarray
            (d, K+1) the value below the first breakpoint, between each two, and from the last on.

        Returns
        -------
        StepLookup
            The look-up, its grid built.

        Raises
        ------
        ValueError
            Shapes that do not match, breakpoints not finite or not sorted, or more than 2^32 positions.
        """
        breaks, tables = np.asarray(breaks, dtype=np.float64), np.asarray(tables)
        if breaks.ndim != 2 or breaks.shape[1] < 1 or tables.shape != (breaks.shape[0], breaks.shape[1] + 1):
            raise ValueError(f"expected breakpoints (d, K) and values (d, K+1), got shapes {breaks.shape} and {tables.shape}")
        if not np.isfinite(breaks).all() or (np.diff(breaks, axis=1) < 0).any():
            raise ValueError("breakpoints must be finite and sorted along each row (np.sort(P, axis=1))")
        d, K = breaks.shape
        padded, table, sizes = _distinct(breaks, tables)
        rows = np.arange(d)
        quartiles = padded[rows[:, None], (sizes[:, None] * np.array([1, 2, 3])) // 4]
        center = quartiles[:, 1].copy()  # contiguous: the compiled loops read it as such
        with np.errstate(over="ignore", divide="ignore"):  # a spread near 1e-308 has no finite inverse: the largest float
            inv_scale = 1.0 / np.where(quartiles[:, 2] > quartiles[:, 0], (quartiles[:, 2] - quartiles[:, 0]) / 2, 1.0)
        inv_scale = np.minimum(inv_scale, np.finfo(np.float64).max)
        ends = padded[rows[:, None], np.column_stack([rows * 0, sizes - 1])]  # (d, 2): first and last breakpoints
        t_ends = compiled.row_coordinates(ends, center, inv_scale)
        cells = CELLS_PER_BREAK * K
        span = t_ends[:, 1] - t_ends[:, 0]
        slope = cells / np.where(span > 0, span, np.inf)  # one breakpoint: every value in cell 0
        intercept = -t_ends[:, 0] * slope
        # cells of all breakpoints at once, as flat cells j G + c (ascending); start = rank among its row's breakpoints
        flat_cells = compiled.grid_cells(padded, sizes, center, inv_scale, slope, intercept, cells)
        counts = np.bincount(flat_cells, minlength=d * cells)
        steps = int(counts.max())
        depth = np.array([int(c).bit_length() for c in counts.reshape(d, cells).max(axis=1)], dtype=np.int64)
        width = K + (1 << steps.bit_length()) - 1  # >= K + 1: every row ends with NaN, and a search from its last cell stays in it
        if d * width >= 2**32:
            raise ValueError(f"{d} columns of {K} breakpoints are too many for one look-up (2^32 positions)")
        padded = np.pad(padded, ((0, 0), (0, width - K - 1)), constant_values=np.nan)
        table = np.pad(table, ((0, 0), (0, width - K - 1)), mode="edge")
        ranks = (np.cumsum(counts) - counts).reshape(d, cells)  # breakpoints in earlier cells
        start = (ranks - np.cumsum(sizes)[:, None] + sizes[:, None] + (rows * width)[:, None]).astype(np.uint32)  # in cache: 4 bytes
        return cls(padded, table, start, center, inv_scale, slope, intercept, steps, depth)

    def _grid(self) -> tuple:
        return self.breaks, self.table, self.start, self.center, self.inv_scale, self.slope, self.intercept, self.depth

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """``table[j, pos_j(v_j)]`` for ``values`` (..., d); undefined where a value is NaN (mask it)."""
        d = self.breaks.shape[0]
        flat = np.ascontiguousarray(np.reshape(values, (-1, d)))
        result = np.empty(flat.shape, dtype=self.table.dtype)
        compiled.step_lookup(flat, *self._grid(), result)
        return result.reshape(np.shape(values))

    def row_sums(self, values: np.ndarray) -> np.ndarray:
        """``sum_j table[j, pos_j(v_j)]`` for ``values``, summed in order of ``j`` in float64.

        Parameters
        ----------
        values : np.ndarray
            (..., d) values: the sums run over the last axis.

        Returns
        -------
        np.ndarray
            (...) float64 sums; NaN where a value is NaN (or where +inf and -inf meet in one row).
        """
        flat = np.ascontiguousarray(np.reshape(values, (-1, self.breaks.shape[0])))
        result = np.empty(len(flat), dtype=np.float64)
        compiled.step_row_sums(flat, *self._grid(), result)
        return result.reshape(np.shape(values)[:-1])


def _distinct(breaks: np.ndarray, tables: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's distinct breakpoints (a tie takes the value after its last copy), padded with NaN to ``K + 1``,
    their values on positions ``0..size`` (the last repeated after), and each row's size."""
    d, K = breaks.shape
    padded = np.full((d, K + 1), np.nan)
    table = np.empty((d, K + 1), dtype=tables.dtype)
    sizes = np.full(d, K)
    tied = (np.diff(breaks, axis=1) <= 0).any(axis=1)
    padded[~tied, :K], table[~tied] = breaks[~tied], tables[~tied]
    for j in np.flatnonzero(tied):
        last = np.append(breaks[j, 1:] != breaks[j, :-1], True)
        sizes[j] = last.sum()
        padded[j, : sizes[j]] = breaks[j, last]
        table[j, : sizes[j] + 1] = np.concatenate([tables[j, :1], tables[j, 1:][last]])
        table[j, sizes[j] + 1 :] = table[j, sizes[j]]
    return padded, table, sizes



#: most table entries (all columns) of an :class:`IntegerSteps`: 16 MB of float64
INTEGER_ENTRIES = 1 << 21


@dataclass(frozen=True)
class IntegerSteps:
    """A :class:`StepLookup`'s row sums on integer values, one gather a value: ``table[j, clip(v - low_j, 0, last_j)]``.

    Each column's function is tabulated on every integer of ``low_j..low_j + last_j``, a range reaching past
    its first and last breakpoints, beyond which the function is constant; so the table gives the step
    function's own value at every integer, bit for bit, without a search: the cost of a value is the same
    whatever the data. Values that are not integers (or NaN) are looked up by ``steps``.

    Parameters
    ----------
    table : np.ndarray
        (d, L) float64: the function at ``low_j + i``, each row padded with its last value.
    low : np.ndarray
        (d,) int64: the first integer of each column's table.
    last : np.ndarray
        (d,) int64: the last index of each column's table.
    steps : StepLookup
        The function itself, for values that are not integers.
    """

    table: np.ndarray
    low: np.ndarray
    last: np.ndarray
    steps: StepLookup

    @classmethod
    def build(cls, steps: StepLookup) -> IntegerSteps | None:
        """From a look-up; None where its breakpoints span more than :data:`INTEGER_ENTRIES` integers in all."""
        breaks = steps.breaks
        first, final = breaks[:, 0], np.nanmax(breaks, axis=1)
        if not (np.abs(np.concatenate([first, final])) < 2.0**52).all():
            return None
        low, high = np.floor(first).astype(np.int64) - 1, np.ceil(final).astype(np.int64) + 1
        last = high - low
        if int(last.sum()) + len(last) > INTEGER_ENTRIES:
            return None
        grid = low + np.minimum(np.arange(int(last.max()) + 1)[:, None], last)  # (L, d): each column's integers, the last repeated
        return cls(np.ascontiguousarray(steps(grid.astype(np.float64)).T), low, last, steps)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """``sum_j f_j(v_j)`` of feature-major ``values`` (d, n) -> (n,), summed in order of ``j`` in float64:
        :meth:`StepLookup.row_sums` of ``values.T``, bit for bit, by the table where every value is an integer, else by the search."""
        values = np.ascontiguousarray(values)
        result = np.empty(values.shape[1], dtype=np.float64)
        if compiled.integer_sums(values, self.table, self.low, self.last, result):
            return result
        return self.steps.row_sums(values.T)


#: cells per bin of a :class:`UniformGrid`: 16 keeps a column's table (of a 100,000 sample) in L1, and its maps within
#: 0.03 bits of the step function's on average per column (tests/test_lookup.py; ``bench_information.py --only grid``)
GRID_CELLS = 16


@dataclass(frozen=True)
class UniformGrid:
    """A piecewise-constant density tabulated on a uniform grid, looked up by one multiply, floor, clip and gather.

    The grid is uniform in the coordinate ``t`` of :mod:`ppa_xr.core.compiled` (linear near a column's median,
    logarithmic in its tails), ``G = GRID_CELLS * B`` cells over the column's fitted range ``[e_0, e_B]``. Each
    cell holds ``log2`` of its mean density, the mass of the piecewise-constant density in the cell over the
    cell's width, so the grid's density has the same mass on every cell and on the whole range; a value's
    cost is the same whatever the data. A cell inside one bin holds that bin's density; a cell across a bin
    edge the mass-weighted mean of the two (the approximation: at most ``1 / GRID_CELLS`` of a bin's values
    move to it). Outside the range: the density given for it.

    Parameters
    ----------
    table : np.ndarray
        (d, G + 2) float64: ``log2`` density below the range, in each cell, above the range.
    low, high : np.ndarray
        (d,) the range of each column.
    center, inv_scale, slope, intercept : np.ndarray
        (d,): a value ``v`` of ``[low, high]`` is in cell ``floor(slope t((v - center) inv_scale) + intercept)``,
        clipped to ``1..G``.
    """

    table: np.ndarray
    low: np.ndarray
    high: np.ndarray
    center: np.ndarray
    inv_scale: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray

    @classmethod
    def build(cls, edges: np.ndarray, log_density: np.ndarray, outside: np.ndarray, cells: int = GRID_CELLS) -> UniformGrid:
        """From the bins' edges (d, B+1) (sorted, ties allowed, first below last), their ``log2`` densities (d, B)
        and the ``log2`` density outside the range (d,)."""
        edges, log_density = np.asarray(edges, np.float64), np.asarray(log_density, np.float64)
        d, bins = log_density.shape
        count = cells * bins
        quartiles = edges[:, [bins // 4, bins // 2, (3 * bins) // 4]]
        center = quartiles[:, 1].copy()
        with np.errstate(over="ignore", divide="ignore"):
            inv_scale = 1.0 / np.where(quartiles[:, 2] > quartiles[:, 0], (quartiles[:, 2] - quartiles[:, 0]) / 2, 1.0)
        inv_scale = np.minimum(inv_scale, np.finfo(np.float64).max)
        ends = compiled.row_coordinates(np.ascontiguousarray(edges[:, [0, -1]]), center, inv_scale)
        slope = count / (ends[:, 1] - ends[:, 0])
        intercept = 1.0 - ends[:, 0] * slope
        mass = np.concatenate([np.zeros((d, 1)), np.cumsum(np.exp2(log_density) * np.diff(edges, axis=1), axis=1)], axis=1)
        # the cells' bounds (uniform in t, monotone whatever the rounding) and the mass in each over its width, in one
        # compiled pass a row (the numpy expressions' own operations: the same bits, without their (d, G) temporaries)
        bounds, ratio = np.empty((d, count + 1)), np.empty((d, count))
        with np.errstate(divide="ignore", invalid="ignore"):
            compiled.grid_masses(edges, mass, np.ascontiguousarray(ends[:, 0]), slope, center, inv_scale, bounds, ratio)
            inside = np.log2(ratio)
        empty = ~np.isfinite(inside)  # a cell narrower than rounding: the density of the bin at its start
        if empty.any():
            rows, columns = np.nonzero(empty)
            position = np.array([np.searchsorted(edges[j], bounds[j, c], side="right") - 1 for j, c in zip(rows, columns)])
            inside[rows, columns] = log_density[rows, np.clip(position, 0, bins - 1)]
        table = np.column_stack([outside, inside, outside])
        return cls(np.ascontiguousarray(table), edges[:, 0].copy(), edges[:, -1].copy(), center, inv_scale, slope, intercept)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """``sum_j log2 p_j(v_j)`` of feature-major ``values`` (d, n) -> (n,), in order of ``j`` in float64; NaN where a
        value is not finite."""
        values = np.ascontiguousarray(values)
        result = np.empty(values.shape[1], dtype=np.float64)
        return compiled.grid_sums(values, self.table, self.low, self.high, self.center, self.inv_scale, self.slope, self.intercept, result)
