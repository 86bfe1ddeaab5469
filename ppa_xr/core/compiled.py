"""Compiled per-pixel loops (numba): step-function look-ups, their row sums, the pixel keys of a sample, and the
gap fill's per-pixel solves (:mod:`ppa_xr.core.fill`).

Every function is compiled on first use and cached on disk (:func:`ppa_xr.core.jit.njit`
picks a writable cache folder), and releases the GIL (``nogil=True``), so dask's threads run one call per
task in parallel. Nothing here starts threads of its own.

Step functions (:class:`ppa_xr.core.lookup.StepLookup`): a column's
function is ``table[pos(v)]`` with ``pos(v) = #{P_i <= v}`` over its sorted
breakpoints ``P`` (``np.searchsorted(P, v, side="right")``). ``pos`` starts at
the first breakpoint of ``v``'s cell in a uniform grid of the coordinate

    t(v) = sign(u) (bits(1 + |u|) - bits(1)),   u = (v - c) s,

(``bits``: the IEEE-754 pattern of a float64 as an integer, a piecewise
linear ``2^52 log2(1 + |u|)``: linear near the column's center ``c``,
logarithmic in its tails, like ``asinh``) and counts the breakpoints of
that cell that are ``<= v`` (a branchless binary search). Every operation of ``t`` and of the cell is
monotone in ``v``, and the cells of the breakpoints come from the same
function (:func:`grid_cells`), so the position is exactly the binary
search's, whatever the rounding.

Pixel keys (:mod:`ppa_xr.core.keys`): SplitMix64 of ``seed + (index + 1) *
golden`` in uint64 arithmetic (wrapping), bit for bit numpy's.
"""

from __future__ import annotations

import numpy as np
from numba.extending import overload

from ppa_xr.core.basis import TAILS as BASIS_TAILS
from ppa_xr.core.jit import inlined, njit

#: the bit pattern of 1.0 as a float64
_ONE_BITS = np.int64(np.float64(1.0).view(np.int64))
_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)

_jit = njit


def _numpy_division(func):
    """:func:`njit` with numpy's division: by zero gives inf or NaN, as numpy's expressions do (not an exception)."""
    return njit(func, error_model="numpy")


@_jit
def _coordinate(v, center, inv_scale):
    """``t(v)`` of the module docstring, in float64."""
    u = (np.float64(v) - center) * inv_scale
    t = np.float64(np.float64(1.0 + abs(u)).view(np.int64) - _ONE_BITS)
    return -t if u < 0 else t


#: values per block of a look-up: the block's cells and positions stay in L1
BLOCK = 2048


@_jit
def _clipped_cell(g, last):
    """``floor(g)`` clipped to ``0..last`` (NaN to 0: a NaN value's cell is never read as a result)."""
    if not g > 0.0:
        return 0
    if not g < last:
        return last
    return int(g)


@_jit
def row_coordinates(values, center, inv_scale):
    """``t`` of each value of ``values`` (d, m) in its row's coordinate (the grid's ends)."""
    out = np.empty(values.shape, np.float64)
    for j in range(values.shape[0]):
        for q in range(values.shape[1]):
            out[j, q] = _coordinate(values[j, q], center[j], inv_scale[j])
    return out


@_jit
def grid_cells(breaks, sizes, center, inv_scale, slope, intercept, cells):
    """Flat cell ``j cells + g`` of each of the first ``sizes[j]`` breakpoints of each row ``j`` of ``breaks`` (d, m),
    in one ascending (row-major) array: the grid's own arithmetic, for building ``start``."""
    out = np.empty(sizes.sum(), np.int64)
    i = 0
    for j in range(breaks.shape[0]):
        for q in range(sizes[j]):
            g = _coordinate(breaks[j, q], center[j], inv_scale[j]) * slope[j] + intercept[j]
            out[i] = j * cells + _clipped_cell(g, cells - 1)
            i += 1
    return out


@_jit
def _tiled(center, inv_scale, slope, intercept, cells, rows):
    """The per-column constants repeated over ``rows`` rows (the cell loop then runs over a whole block), and each
    position's offset ``j cells`` into the flat ``start``."""
    d = len(center)
    m = rows * d
    tc, ts, tsl, tic = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    offset = np.empty(m, np.uint32)
    for i in range(rows):
        for j in range(d):
            q = i * d + j
            tc[q], ts[q], tsl[q], tic[q], offset[q] = center[j], inv_scale[j], slope[j], intercept[j], j * cells
    return tc, ts, tsl, tic, offset


@_jit
def _block_positions(block, tiled, starts, points, depth, last, pos):
    """Flat position ``j L + pos_j(v)`` of every value of ``block`` (whole rows of ``d``) into ``pos``; whether
    every value is finite.

    Loops over the block: the cells (arithmetic only, vectorized, the
    per-column constants tiled to the block), the gathers of ``start``, then
    in each column ``j`` a branchless binary search of ``depth[j]``
    comparisons over the ``2^depth[j] - 1`` breakpoints from there, one level
    for all the column's values at a time (the loads of one level are
    independent, so they overlap), the last level of all columns in one loop. The breakpoints past the cell's own are
    all ``> v`` (or the NaN padding), so the search counts the cell's
    breakpoints ``<= v`` whatever their number.
    """
    tc, ts, tsl, tic, offset = tiled
    finite = True
    for q in range(len(block)):
        v = block[q]
        finite &= v - v == 0
        g = _coordinate(v, tc[q], ts[q]) * tsl[q] + tic[q]
        pos[q] = np.uint32(_clipped_cell(g, last)) + offset[q]
    for q in range(len(block)):
        pos[q] = starts[pos[q]]
    d = len(depth)
    for j in range(d):  # the levels above the last, column by column, for all its values at a time: overlapped loads
        half = np.uint32(1) << np.uint32(depth[j] - 1)
        for _ in range(depth[j] - 1):
            for q in range(j, len(block), d):
                pos[q] += half * np.uint32(points[pos[q] + half - np.uint32(1)] <= block[q])
            half >>= np.uint32(1)
    for q in range(len(block)):  # the last level of every column: one comparison
        pos[q] += np.uint32(points[pos[q]] <= block[q])
    return finite


@_jit
def step_lookup(values, breaks, table, start, center, inv_scale, slope, intercept, depth, out):
    """``out[i, j] = table[j, pos_j(values[i, j])]`` for ``values`` (n, d, C-contiguous) into ``out`` (n, d,
    C-contiguous); undefined where a value is NaN (the caller masks it). Blocks of about :data:`BLOCK` values."""
    n, d = values.shape
    rows = max(1, BLOCK // d)
    tiled = _tiled(center, inv_scale, slope, intercept, start.shape[1], rows)
    flat, result, starts, points, values_of = values.ravel(), out.ravel(), start.ravel(), breaks.ravel(), table.ravel()
    pos = np.empty(rows * d, np.uint32)
    for first in range(0, n * d, rows * d):
        block = flat[first : first + rows * d]
        _block_positions(block, tiled, starts, points, depth, start.shape[1] - 1, pos)
        for q in range(len(block)):
            result[first + q] = values_of[pos[q]]


@_jit
def step_row_sums(values, breaks, table, start, center, inv_scale, slope, intercept, depth, out):
    """``out[i] = sum_j table[j, pos_j(values[i, j])]`` for ``values`` (n, d, C-contiguous), summed in order of
    ``j`` in float64; NaN where a value is NaN or where +inf and -inf meet in one row (looked for only in a block
    with a value that is not finite)."""
    n, d = values.shape
    rows = max(1, BLOCK // d)
    tiled = _tiled(center, inv_scale, slope, intercept, start.shape[1], rows)
    flat, starts, points, values_of = values.ravel(), start.ravel(), breaks.ravel(), table.ravel()
    pos = np.empty(rows * d, np.uint32)
    for first in range(0, n, rows):
        block = flat[first * d : min(first + rows, n) * d]
        finite = _block_positions(block, tiled, starts, points, depth, start.shape[1] - 1, pos)
        for i in range(len(block) // d):
            total = 0.0
            for q in range(i * d, i * d + d):
                total += values_of[pos[q]]
            out[first + i] = total
        if not finite:
            for i in range(len(block) // d):
                nan = up = down = False
                for q in range(i * d, i * d + d):
                    v = block[q]
                    nan |= np.isnan(v)
                    up |= v == np.inf
                    down |= v == -np.inf
                if nan or (up and down):
                    out[first + i] = np.nan


@_jit
def feature_major(values, out):
    """``out[j, i] = values[i, j]`` for ``values`` (n, d), any strides (a band-first chunk's pixels, or pixel rows),
    into ``out`` (d, n) in its float type, by blocks of :data:`FORWARD_BLOCK` pixels (a cache-sized transpose)."""
    n, d = values.shape
    for first in range(0, n, FORWARD_BLOCK):
        stop = min(first + FORWARD_BLOCK, n)
        for j in range(d):
            row = out[j]
            for i in range(first, stop):
                row[i] = values[i, j]


#: pixels per block of :func:`forward_error`: its components and powers (d + degree rows) stay in L1
FORWARD_BLOCK = 256
#: the tails of the compiled polynomials (:func:`forward_error`, :func:`map_fill`), by code: their place in
#: :data:`ppa_xr.core.basis.TAILS`
TAILS = {name: code for code, name in enumerate(BASIS_TAILS)}


@_jit
def forward_error(x, lin, bias, later_bias, degrees, center, scale, coef, tails, k, out, error):
    """The whole forward map of every pixel of ``x`` (d_in, n), feature-major, into ``out`` (d, n), and its squared
    error after ``k`` steps, ``||r[k:]||^2``, into ``error`` (n,), in ``x``'s float type, in one pass.

    Per block of :data:`FORWARD_BLOCK` pixels, held as (components, pixels):
    ``r = lin x - bias``; then each step ``p`` with a polynomial
    (``degrees[p] > 0``) forms ``t = (r_p - center_p) / scale_p`` and its
    powers with ``tails`` (:data:`TAILS`, as :func:`ppa_xr.core.basis.powers`)
    and subtracts ``sum_m coef[p, m, j] t^(m+1)`` from each later ``r_j``;
    after the first ``k`` steps the error is taken and ``later_bias``
    subtracted. Each loop runs over the block's pixels (vectorized), every
    pixel's arithmetic in the same order whatever the block. A pixel with a
    value that is not finite, or an output that overflows, is NaN in all of
    ``out`` and in ``error``.
    """
    d_in, n = x.shape
    d = lin.shape[0]
    size = min(FORWARD_BLOCK, n)
    gmax = max(1, coef.shape[1])
    r = np.empty((d, size), out.dtype)
    powers, err, check = np.empty((gmax, size), out.dtype), np.empty(size, out.dtype), np.empty(size, out.dtype)
    factors = np.arange(1, gmax + 1).astype(out.dtype)  # 1..gmax in the float type (an integer factor would widen it)
    for first in range(0, n, size):
        m = min(size, n - first)
        for j in range(d):
            row = r[j]
            for i in range(m):
                row[i] = -bias[j]
            for c in range(d_in):
                w, source = lin[j, c], x[c, first : first + m]  # slices: their indices are known >= 0 (vectorized)
                for i in range(m):
                    row[i] += w * source[i]
        _steps(r, powers, degrees, center, scale, coef, tails, 0, min(k, d - 1), m, factors)
        _squared_tail(r, k, m, err)
        for i in range(m):
            check[i] = err[i]
        if k < d - 1:
            for j in range(d):
                row = r[j]
                for i in range(m):
                    row[i] -= later_bias[j]
            _steps(r, powers, degrees, center, scale, coef, tails, k, d - 1, m, factors)
        for j in range(d):  # err + sum_j r_j: not finite where any of them is not (NaN or inf)
            row, target = r[j], out[j, first : first + m]
            for i in range(m):
                check[i] += row[i]
                target[i] = row[i]
        errors = error[first : first + m]
        for i in range(m):
            errors[i] = err[i]
            if not check[i] - check[i] == 0:
                for j in range(d):
                    out[j, first + i] = np.nan
                errors[i] = np.nan


@_jit
def _squared_tail(r, k, m, err):
    """``err[i] = sum_{j >= k} r[j, i]^2``, in order of ``j``."""
    for i in range(m):
        err[i] = r[0, i] - r[0, i]
    for j in range(k, r.shape[0]):
        row = r[j]
        for i in range(m):
            err[i] += row[i] * row[i]


@_jit
def distinct_finite(rows, out):
    """``out[j]``: the distinct finite values of the sorted row ``rows[j]``, whose finite values lie together between
    its -inf and its +inf and NaN: one where any is finite, and one more at each step up between two of them
    (``(np.diff(S) > 0) & finite`` counted, plus ``finite.any()``, as :func:`ppa_xr.information.discrete_columns`
    defines it), in one pass without its (n, d) temporaries."""
    d, n = rows.shape
    for j in range(d):
        row = rows[j]
        lo, hi = 0, n
        while lo < n and not np.isfinite(row[lo]):
            lo += 1
        while hi > lo and not np.isfinite(row[hi - 1]):
            hi -= 1
        finite = row[lo:hi]  # a slice: its loop vectorizes (one over lo + 1..hi does not, 7x slower)
        count = 1 if hi > lo else 0
        for i in range(1, len(finite)):
            count += finite[i] > finite[i - 1]
        out[j] = count


@_jit
def suffix_squares(r, errors, p, first):
    """``errors[p - 1] += r[p]^2``, then ``errors[j - 1] = errors[j] + r[j]^2`` for ``j = p - 1, ..., first``: the
    squared errors ``||r[j:]||^2`` of :func:`ppa_xr.core.kernels.error_curve` between two curved steps, row by row
    (rows of ``r`` and ``errors`` contiguous), the sums numpy's ``np.add(e, np.square(r))`` makes, without its
    temporaries."""
    n = r.shape[1]
    row, target = r[p], errors[p - 1]
    for i in range(n):
        target[i] += row[i] * row[i]
    for j in range(p - 1, first - 1, -1):
        row, source, target = r[j], errors[j], errors[j - 1]
        for i in range(n):
            target[i] = source[i] + row[i] * row[i]


@_jit
def _steps(r, powers, degrees, center, scale, coef, tails, start, stop, m, factors):
    """The curved steps ``start..stop-1`` of :func:`forward_error` on the block ``r`` (its first ``m`` pixels);
    ``factors``: 1, 2, ... in the float type."""
    d = r.shape[0]
    unit = factors[0]
    for p in range(start, stop):
        g = degrees[p]
        if g == 0:
            continue
        base, t = powers[0], r[p]
        for i in range(m):
            base[i] = (t[i] - center[p]) / scale[p]
        if tails != 2:
            for i in range(m):
                v = base[i]
                base[i] = -unit if v < -unit else (unit if v > unit else v)
        for q in range(1, g):
            previous, current = powers[q - 1], powers[q]
            for i in range(m):
                current[i] = previous[i] * powers[0, i]
        if tails == 1:
            _linear_tails(r[p], powers, g, center[p], scale[p], m, factors)
        for j in range(p + 1, d):
            row = r[j]
            for q in range(g):
                w = coef[p, q, j]
                if w != 0:
                    power = powers[q]
                    for i in range(m):
                        row[i] -= w * power[i]


@_jit
def _linear_tails(t_row, powers, g, center, scale, m, factors):
    """Beyond ``[-1, 1]``: each power continued by its tangent at the end, ``b^(q+1) + (q+1) b^q (t - b)``
    (:func:`ppa_xr.core.basis.powers`)."""
    for i in range(m):
        t = (t_row[i] - center) / scale
        excess = t - powers[0, i]
        if excess != 0:  # NaN too: it stays NaN
            for q in range(g - 1, 0, -1):
                powers[q, i] += factors[q] * powers[q - 1, i] * excess
            powers[0, i] += excess


@_jit
def integer_sums(values, table, low, last, out):
    """``out[i] = sum_j table[j, clip(values[j, i] - low[j], 0, last[j])]`` for feature-major ``values`` (d, n), summed
    in order of ``j`` in float64, one column at a time (its table stays in cache); whether every value is an integer
    (else ``out`` is undefined). :class:`ppa_xr.core.lookup.IntegerSteps`."""
    d, n = values.shape
    whole = 0
    for i in range(n):
        out[i] = 0.0
    for j in range(d):
        column, entries = values[j], table[j]
        low_j, high_j = np.float64(low[j]), np.float64(low[j] + last[j])
        for i in range(n):
            v = np.float64(column[i])
            whole += np.int64(v == np.floor(v))  # NaN and inf are no integers
            clipped = v if v > low_j else low_j  # NaN: the first entry (not used)
            clipped = clipped if clipped < high_j else high_j
            out[i] += entries[np.int64(clipped) - low[j]]
    return whole == n * d


#: pixels per block of the feature-major kernels (:data:`ppa_xr.core.kernels.BLOCK` is this one number): a block's
#: look-ups (:func:`grid_sums`) keep their sums and cells in cache and read each column's table once
PIXEL_BLOCK = 16384


@_jit
def grid_sums(values, table, low, high, center, inv_scale, slope, intercept, out):
    """``out[i] = sum_j table[j, cell_j(values[j, i])]`` for feature-major ``values`` (d, n), summed in order of ``j``
    in float64; NaN where a value is not finite. :class:`ppa_xr.core.lookup.UniformGrid`: the cell of ``v`` in
    ``[low_j, high_j]`` is ``floor(slope_j t(v) + intercept_j)`` clipped to ``1..G``, ``t`` the coordinate of
    :func:`_coordinate`; 0 below, ``G + 1`` above. By sub-blocks of :data:`PIXEL_BLOCK` pixels, column by column:
    the cells (arithmetic only, vectorized), then the gathers from the column's table."""
    d, n = values.shape
    above = table.shape[1] - 1
    cells, bad = np.empty(PIXEL_BLOCK, np.int64), np.empty(PIXEL_BLOCK, np.float64)
    for first in range(0, n, PIXEL_BLOCK):
        m = min(PIXEL_BLOCK, n - first)
        sums = out[first : first + m]
        sums[:] = 0.0
        bad[:m] = 0.0
        for j in range(d):
            column, entries = values[j, first : first + m], table[j]
            c, s, a, b, lo, hi = center[j], inv_scale[j], slope[j], intercept[j], low[j], high[j]
            for i in range(m):
                v = np.float64(column[i])
                g = _coordinate(v, c, s) * a + b
                g = g if g > 1.0 else 1.0  # NaN too: its entry is not used
                g = g if g < above - 1.0 else above - 1.0
                cell = np.int64(g)
                cells[i] = 0 if v < lo else (above if v > hi else cell)
                bad[i] += v - v  # 0, or NaN where v is not finite
            for i in range(m):
                sums[i] += entries[cells[i]]
        for i in range(m):
            sums[i] += bad[i]
    return out


@_jit
def tail_squares(r, k, error, bias):
    """``error[i] = sum_{j >= k} r[j, i]^2`` of ``r`` (d, n), summed in order of ``j`` in ``r``'s float type, each row
    while it is in cache; ``bias`` (d,), where not empty, is first subtracted from the rows, in place, in the same
    pass. Numpy's ``r -= bias[:, None]`` and ``np.einsum("ij,ij->j", r[k:], r[k:])`` bit for bit wherever ``n >= 2``
    (the einsum accumulates row after row; of a single contiguous column it sums pairwise), and a pixel's bits the
    same whatever the number of pixels beside it."""
    d, n = r.shape
    shift = len(bias) > 0
    error[:] = 0
    for j in range(d):
        row = r[j]
        if shift:
            b = bias[j]
            for i in range(n):
                row[i] -= b
        if j >= k:
            for i in range(n):
                error[i] += row[i] * row[i]
    return error


@_numpy_division
def grid_masses(edges, mass, start, slope, center, inv_scale, bounds, ratio):
    """The cells of a :class:`ppa_xr.core.lookup.UniformGrid`, row by row: ``bounds`` (d, G + 1) the cells' bounds
    (:func:`_cell_bounds`), and ``ratio`` (d, G) each cell's mass over its width, the mass read off the
    piecewise-linear cumulative ``mass`` (d, B + 1) at the ``edges`` (d, B + 1) (:func:`_interpolated`). The same
    operations, in the same order, as the numpy expressions they replace: the same bits, without their (d, G)
    temporaries."""
    d, points = bounds.shape
    slopes, cumulative = np.empty(edges.shape[1] - 1), np.empty(points)
    for row in range(d):
        xp, fp = edges[row], mass[row]
        for i in range(len(slopes)):
            slopes[i] = (fp[i + 1] - fp[i]) / (xp[i + 1] - xp[i])
        _cell_bounds(xp, start[row], slope[row], center[row], inv_scale[row], bounds[row])
        _interpolated(bounds[row], xp, fp, slopes, cumulative)
        for q in range(points - 1):
            ratio[row, q] = (cumulative[q + 1] - cumulative[q]) / (bounds[row, q + 1] - bounds[row, q])


@_numpy_division
def _cell_bounds(xp, start, slope, center, inv_scale, out):
    """The inverse of :func:`_coordinate` at ``t = start + q / slope`` (``np.round``, ``np.sign`` and the bit
    pattern as the numpy expression has them), the ends at the first and last of ``xp``, made monotone
    (``np.maximum.accumulate``)."""
    points, running = len(out), -np.inf
    for q in range(points):
        if q == 0 or q == points - 1:
            value = xp[0] if q == 0 else xp[len(xp) - 1]
        else:
            t = start + np.float64(q) / slope
            bits = np.int64(min(np.rint(abs(t)), 2.0**62)) + _ONE_BITS
            sign = 1.0 if t > 0 else (-1.0 if t < 0 else 0.0)
            value = center + sign * (_as_float(bits) - 1.0) / inv_scale
        running = running if running > value else value
        out[q] = running


@_numpy_division
def _interpolated(x, xp, fp, slopes, out):
    """``np.interp(x, xp, fp)`` for ascending ``x``, bit for bit: its branches and arithmetic, ``slopes[i] =
    (fp[i+1] - fp[i]) / (xp[i+1] - xp[i])``, the position ``j = #{xp <= x} - 1`` (the last of tied points) walked
    from the previous one."""
    last, j = len(xp) - 1, 0
    for q in range(len(x)):
        v = x[q]
        while j < last and xp[j + 1] <= v:
            j += 1
        if v > xp[last] or v < xp[0]:
            out[q] = fp[last] if v > xp[last] else fp[0]
        elif j == last or xp[j] == v:
            out[q] = fp[j]
        else:
            y = slopes[j] * (v - xp[j]) + fp[j]
            if y != y:  # NaN: numpy's second try, from the right end
                y = slopes[j] * (v - xp[j + 1]) + fp[j + 1]
                y = fp[j] if y != y and fp[j] == fp[j + 1] else y
            out[q] = y


@_jit
def _as_float(bits):
    """The float64 whose IEEE-754 pattern is ``bits`` (int64)."""
    return np.int64(bits).view(np.float64)


@_jit
def _key(seed, index):
    """SplitMix64 of ``seed + (index + 1) golden`` (uint64, wrapping)."""
    z = (np.uint64(index) + np.uint64(1)) * _GOLDEN + seed
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@_jit
def pixel_keys(seed, index, out):
    """``out[i]``: the key of pixel ``index[i]`` under ``seed`` (:func:`ppa_xr.core.keys.pixel_keys`)."""
    seed = np.uint64(seed)
    for i in range(len(index)):
        out[i] = _key(seed, index[i])


@_jit
def _held(index, seeds, maxima):
    """Whether the pixel is in any of the samples ``(seeds[s], maxima[s])`` (key at most the sample's largest)."""
    for s in range(len(seeds)):
        if _key(seeds[s], index) <= maxima[s]:
            return True
    return False


@_jit
def held(index, seeds, maxima, out):
    """``out[i]``: pixel ``index[i]`` belongs to one of the samples ``(seeds, maxima)`` (uint64 each; empty samples left out)."""
    for i in range(len(index)):
        out[i] = _held(index[i], seeds, maxima)


def _itemsize(array):
    """The bytes of one element of ``array``, a constant of the compiled code (a stride compared with it
    lets the compiler version a loop for contiguous data)."""
    return array.itemsize


@overload(_itemsize)
def _itemsize_constant(array):
    size = array.dtype.bitwidth // 8
    return lambda array: size


@_jit
def chunk_keys(base, width, seed, seeds, maxima):
    """The key under ``seed`` of every pixel of a chunk (lines starting at global indices ``base``, ``width`` pixels
    each, flat), and whether no sample ``(seeds, maxima)`` holds it (free); no value is read. Loops over a line's
    consecutive indices, vectorized."""
    n = len(base) * width
    keys, free = np.empty(n, np.uint64), np.ones(n, np.bool_)
    seed = np.uint64(seed)
    for r in range(len(base)):
        line = r * width
        for c in range(width):
            keys[line + c] = _key(seed, base[r] + c)
        for s in range(len(seeds)):
            for c in range(width):
                free[line + c] &= _key(seeds[s], base[r] + c) > maxima[s]
    return keys, free


@_jit
def sample_candidates(bands, keys, free, bound, capacity, any_observed=False):
    """The valid free pixels of a chunk (:func:`chunk_keys`) and their keys, and the values of those with a key at
    most ``bound`` (up to ``capacity`` of them), in one pass over the chunk.

    ``bands`` (d, R, C), any strides: the chunk's values, features first, its
    pixels as R lines of C (the last pixel dimension). Valid: every feature
    finite (``v - v == 0``); with ``any_observed``, at least one feature finite
    (a pixel with gaps, copied with its gaps as they are). Each line is read in the order of its memory
    (feature by feature, or pixel by pixel), with a loop of its own where
    that order is contiguous (vectorized); a pixel whose key is within
    ``bound`` is copied while its line is in cache. Returns the local flat
    positions ``r C + c`` (ascending), their keys, and the copied rows
    (C-contiguous, in the same order) with their count.
    """
    d, lines, width = bands.shape
    rows = np.empty(lines * width, np.int64)
    kept_keys = np.empty(lines * width, np.uint64)
    values = np.empty((capacity, d), bands.dtype)
    bad = np.empty(width, bands.dtype)  # v - v: 0, or NaN where v is NaN or infinite
    by_feature = abs(bands.strides[2]) <= abs(bands.strides[0])
    count = copied = 0
    for r in range(lines):
        if any_observed:
            _line_unobserved(bands, r, bad, by_feature)
        elif by_feature:
            _line_by_feature(bands, r, bad)
        else:
            _line_by_pixel(bands, r, bad)
        for c in range(width):
            q = r * width + c
            if bad[c] == 0 and free[q]:
                rows[count], kept_keys[count] = q, keys[q]
                count += 1
                if keys[q] <= bound and copied < capacity:
                    for j in range(d):
                        values[copied, j] = bands[j, r, c]
                    copied += 1
    return rows[:count], kept_keys[:count], values, copied


@_jit
def _line_by_feature(bands, r, bad):
    """``bad[c] = sum_j (v_jc - v_jc)`` of line ``r``, feature by feature (a band-first chunk's memory order)."""
    d, _, width = bands.shape
    bad[:] = 0
    for j in range(d):
        line = bands[j, r]
        if bands.strides[2] == _itemsize(bands):  # the same loop twice: this one compiled (vectorized) for a unit stride
            for c in range(width):
                bad[c] += line[c] - line[c]
        else:
            for c in range(width):
                bad[c] += line[c] - line[c]


@_jit
def _line_by_pixel(bands, r, bad):
    """``bad[c] = sum_j (v_jc - v_jc)`` of line ``r``, pixel by pixel (a pixel-major chunk's memory order)."""
    d, _, width = bands.shape
    for c in range(width):
        pixel = bands[:, r, c]
        total = pixel[0] - pixel[0]
        if bands.strides[0] == _itemsize(bands):
            for j in range(1, d):
                total += pixel[j] - pixel[j]
        else:
            for j in range(1, d):
                total += pixel[j] - pixel[j]
        bad[c] = total


@_jit
def _line_unobserved(bands, r, bad, by_feature):
    """``bad[c]``: 1 where no feature of pixel ``c`` of line ``r`` is finite, else 0 (in the line's memory order)."""
    d, _, width = bands.shape
    bad[:] = 1
    if by_feature:
        for j in range(d):
            line = bands[j, r]
            for c in range(width):
                bad[c] *= line[c] - line[c] != 0
    else:
        for c in range(width):
            for j in range(d):
                if bands[j, r, c] - bands[j, r, c] == 0:
                    bad[c] = 0
                    break


@_jit
def gather_pixels(bands, rows):
    """``out[i, j] = bands[j, rows[i] // C, rows[i] % C]``: the chosen pixels of a chunk as rows (C-contiguous),
    256 pixels at a time, feature by feature where ``bands`` is feature-major."""
    d, _, width = bands.shape
    n = len(rows)
    out = np.empty((n, d), bands.dtype)
    line, col = np.empty(256, np.int64), np.empty(256, np.int64)
    by_feature = abs(bands.strides[2]) <= abs(bands.strides[0])
    for first in range(0, n, 256):
        m = min(256, n - first)
        for i in range(m):
            line[i], col[i] = divmod(rows[first + i], width)
        if by_feature:  # read each feature's plane in order
            for j in range(d):
                plane = bands[j]
                for i in range(m):
                    out[first + i, j] = plane[line[i], col[i]]
        else:
            for i in range(m):
                for j in range(d):
                    out[first + i, j] = bands[j, line[i], col[i]]
    return out


@_jit
def pixel_index(rows, width, starts, line_blocks, offset, size, tiles):
    """Global flat index and block id of the pixels ``rows`` (flat in a chunk of lines of ``width``;
    :meth:`ppa_xr.cube.sampling._Layout.lines`)."""
    index, blocks = np.empty(len(rows), np.int64), np.empty(len(rows), np.int64)
    for i in range(len(rows)):
        line = rows[i] // width
        c = rows[i] - line * width
        index[i] = starts[line] + c
        blocks[i] = line_blocks[line] * tiles + (offset + c) * tiles // size
    return index, blocks


# ---------------------------------------------------------------------------------------------------------------------
# gap filling (:mod:`ppa_xr.core.fill`): per pixel, on its own gaps, no padding to the chunk's most


#: the tails of :func:`ppa_xr.core.basis.powers` as the compiled fill takes them
_TINY = np.finfo(np.float64).tiny
#: how close (relatively) a whole step's decrease of ``q`` must come to its model's for the next step's decrease
#: to be predicted with the same ``H`` (:func:`map_fill`)
TRUST = 0.25
#: the posterior mean's points along each Laplace axis, in its standard deviations (:mod:`ppa_xr.core.fill`)
SIGMA_POINT = 1.5
#: the shift of the Laplace posterior's mean by the recorded marginals (in its standard deviations) below which the
#: MAP stands (:func:`_wide`)
SHIFT = 0.3


def _fill_jit(func):
    """:func:`njit` with numpy's error model: a division by zero gives inf or NaN, no check at each division."""
    return njit(func, error_model="numpy")


def _uncounted(func):
    """:func:`_fill_jit` without numba's reference counts (``_nrt=False``): a per-pixel loop whose helpers take arrays
    from tuples counts each one up and down at every call, an atomic operation that took about a quarter of the MAP
    fill's loop. Such a function allocates nothing (its caller passes every buffer)."""
    return njit(func, error_model="numpy", _nrt=False)


@inlined
def _powers(t, g, tails, feats, slopes, at):
    """``feats[at:at + g]``: :func:`ppa_xr.core.basis.powers` of one ``t`` (the same products in the same order), and
    ``slopes[at:at + g]`` their derivatives (:func:`ppa_xr.core.basis.power_derivatives`, order 1); offsets, not
    views (a view is an array object, counted at every call)."""
    base = t
    if tails != 2:
        base = -1.0 if t < -1.0 else (1.0 if t > 1.0 else t)
    power = 1.0
    for j in range(g):
        slopes[at + j] = (j + 1) * power
        power = base if j == 0 else power * base
        feats[at + j] = power
    if tails == 1 and t != base:
        excess = t - base
        for j in range(g - 1, 0, -1):
            feats[at + j] += (j + 1) * feats[at + j - 1] * excess
        feats[at] += excess
    if tails == 0 and abs(t) > 1.0:
        for j in range(g):
            slopes[at + j] = 0.0


@inlined
def _cholesky_solve(h, b, m, out):
    """``out[:m] = -(H + ridge)^-1 b`` for ``H = h[:m, :m]`` (symmetric, positive semi-definite; overwritten), the
    ridge ``1e-13 diag(H)`` plus the smallest normal number (the numpy fill's ``_ridge``); False where ``H`` is not
    positive definite even so (``out`` then 0)."""
    for a in range(m):
        h[a, a] += 1e-13 * h[a, a] + _TINY
    for j in range(m):
        s = h[j, j]
        for k in range(j):
            s -= h[j, k] * h[j, k]
        if not s > 0.0:
            for a in range(m):
                out[a] = 0.0
            return False
        s = np.sqrt(s)
        h[j, j] = s
        for i in range(j + 1, m):
            v = h[i, j]
            for k in range(j):
                v -= h[i, k] * h[j, k]
            h[i, j] = v / s
    for i in range(m):  # L y = -b
        v = -b[i]
        for k in range(i):
            v -= h[i, k] * out[k]
        out[i] = v / h[i, i]
    for i in range(m - 1, -1, -1):  # L^T x = y
        v = out[i]
        for k in range(i + 1, m):
            v -= h[k, i] * out[k]
        out[i] = v / h[i, i]
    return True


@inlined
def _row_gaps(x, i, value, idx):
    """Row ``i`` of ``x`` as float64 into ``value`` (its gaps, NaN or +-inf, at 0) and its gaps' columns into ``idx``;
    their number."""
    m = 0
    for k in range(x.shape[1]):  # branchless: a gap's place is written at every entry, and kept where it is one
        v = np.float64(x[i, k])
        finite = v - v == 0
        value[k] = v if finite else 0.0
        idx[m] = k
        m += not finite
    return m


@inlined
def _linear_row(value, idx, m, mean, covariance_inverse, h, b, step):
    """``value``'s gaps (``idx[:m]``) at the Gaussian conditional mean ``x_m = mu_m - P_mm^-1 P_mo (x_o - mu_o)``
    (``P``: the inverse covariance, (d, d)), solved as :func:`_cholesky_solve` does."""
    d = len(value)
    for k in range(m):
        value[idx[k]] = mean[idx[k]]
    for a in range(m):
        row = idx[a]
        v = 0.0
        for k in range(d):
            v += covariance_inverse[row, k] * (value[k] - mean[k])
        b[a] = v
        for e in range(m):
            h[a, e] = covariance_inverse[row, idx[e]]
    _cholesky_solve(h, b, m, step)
    for a in range(m):
        value[idx[a]] += step[a]


@_fill_jit
def gaps_at(x, values, out):
    """``out`` (n, d, float64): ``x`` (n, d) with its gaps (NaN or +-inf) at ``values`` (d,)."""
    n, d = x.shape
    for i in range(n):
        for k in range(d):
            v = np.float64(x[i, k])
            out[i, k] = v if v - v == 0 else values[k]


def linear_fill(x, out, mean, covariance_inverse):
    """``out`` (n, d, float64): the rows of ``x`` (n, d; NaN or +-inf where a value is missing) with their gaps at the
    Gaussian conditional mean (:func:`_linear_row`, per row on its own gaps), observed values as they are, a row
    with none NaN. The loop (:func:`_linear_rows`) is compiled without reference counts, its buffers made here."""
    d = x.shape[1]
    _linear_rows(x, out, mean, covariance_inverse, (np.empty(d), np.empty(d), np.empty(d)), np.empty(d, np.int64), np.empty((d, d)))


@_uncounted
def _linear_rows(x, out, mean, covariance_inverse, vectors, idx, h):
    """:func:`linear_fill`'s loop over the rows, with its buffers (``vectors``: the row, the step and ``b``)."""
    value, step, b = vectors
    for i in range(x.shape[0]):
        _linear_start(x, i, value, idx, mean, covariance_inverse, h, b, step, out)


@inlined
def _projections(delta, m, idx, row, start, plan, tau, slopes, ts):
    """The curved steps' powers ``tau`` (stacked, with their ``slopes``) and scaled projections ``ts`` at the gaps
    ``x_m = start + delta``: ``r_p = u_p - sum_(j of earlier steps) G[j, p] tau_j``, ``u_C = U_C + (A W)[C, m] delta``
(``start``: ``u``, its columns ``C`` read)."""
    steps, degrees, first, center, scale, tails, lin_c, g_c = plan
    for i in range(len(steps)):
        rp = start[row, steps[i]]
        for a in range(m):
            rp += lin_c[i, idx[a]] * delta[a]
        for j in range(first[i]):
            rp -= g_c[j, i] * tau[j]
        t = (rp - center[i]) / scale[i]
        ts[i] = t
        _powers(t, degrees[i], tails, tau, slopes, first[i])


@inlined
def _objective(delta, m, idx, row, sums, plan, tau, slopes, ts, gathered):
    """``q = r^T Lambda^-1 r`` at ``x_m = start + delta`` from the row's sums at the start (``sums``: ``Q0 = u^T L u``,
    ``w = (A W)^T L u``, ``v = G L u``; ``Q0`` of the row in ``q0[0]``) and the model's (``gathered``: ``P_mm``, ``M_m = (G L A W)_m``, ``K = G L G^T``):
    ``q = Q0 + 2 delta^T w_m + delta^T P_mm delta - 2 tau^T (v + M_m delta) + tau^T K tau`` (``r = u - G^T tau``)."""
    q0, w, v, start = sums
    p_mm, m_m, k_mat = gathered
    _projections(delta, m, idx, row, start, plan, tau, slopes, ts)
    q = q0[0]
    for a in range(m):
        inner = 2.0 * w[row, idx[a]]
        for e in range(m):
            inner += p_mm[a, e] * delta[e]
        q += delta[a] * inner
    for j in range(len(tau)):
        inner = -2.0 * v[row, j]
        for a in range(m):
            inner -= 2.0 * m_m[j, a] * delta[a]
        for e in range(len(tau)):
            inner += k_mat[j, e] * tau[e]
        q += tau[j] * inner
    return q


@inlined
def _tangents(m, idx, plan, slopes, dr, sigma, gamma):
    """The tangents of the curved steps' projections on the gaps, ``dr`` (c x m): ``d tau / d x_m = D`` has rank c,
    ``D_(first_i + l) = sigma_(first_i + l) dr_i`` with ``sigma = T_l'(t_i) / s_i``, and
    ``dr_i = (A W)[p_i, m] - sum_(k < i) gamma_ki dr_k``, ``gamma_ki = sum_(j of step k) G[j, p_i] sigma_j``."""
    steps, degrees, first, center, scale, tails, lin_c, g_c = plan
    for i in range(len(steps)):
        for j in range(first[i], first[i] + degrees[i]):
            sigma[j] = slopes[j] / scale[i]
        for k in range(i):
            v = 0.0
            for j in range(first[k], first[k] + degrees[k]):
                v += g_c[j, i] * sigma[j]
            gamma[k] = v
        for a in range(m):
            v = lin_c[i, idx[a]]
            for k in range(i):
                v -= gamma[k] * dr[k, a]
            dr[i, a] = v


@inlined
def _gradient(delta, m, idx, row, sums, gathered, plan, tau, sigma, dr, b, zeta):
    """``b = J^T L r = w_m + P_mm delta - M_m^T tau - D^T (v + M_m delta - K tau)`` (``J = (A W)_m - G^T D``),
    with ``D^T y = sum_i dr_i zeta_i``, ``zeta_i = sum_(j of step i) sigma_j y_j``."""
    q0, w, v, start = sums
    p_mm, m_m, k_mat = gathered
    steps, degrees, first = plan[0], plan[1], plan[2]
    n_tau = len(tau)
    for i in range(len(steps)):
        z = 0.0
        for j in range(first[i], first[i] + degrees[i]):
            y = v[row, j]
            for a in range(m):
                y += m_m[j, a] * delta[a]
            for e in range(n_tau):
                y -= k_mat[j, e] * tau[e]
            z += sigma[j] * y
        zeta[i] = z
    for a in range(m):
        g = w[row, idx[a]]
        for e in range(m):
            g += p_mm[a, e] * delta[e]
        for j in range(n_tau):
            g -= m_m[j, a] * tau[j]
        for i in range(len(steps)):
            g -= dr[i, a] * zeta[i]
        b[a] = g


@inlined
def _hessian(m, plan, gathered, sigma, dr, h, mu, kappa, y):
    """The lower triangle of ``H = J^T L J = P_mm - M_m^T D - D^T M_m + D^T K D`` in ``h``, by ``D``'s rank c:
    ``H = P_mm + sum_i (dr_i y_i^T - mu_i dr_i^T)``, ``mu_i = M_m^T sigma_i``, ``y_i = sum_k kappa_ik dr_k - mu_i``,
    ``kappa_ik = sigma_i^T K sigma_k`` (``sigma_i``: ``sigma`` on step i's rows)."""
    p_mm, m_m, k_mat = gathered
    steps, degrees, first = plan[0], plan[1], plan[2]
    c = len(steps)
    for i in range(c):
        for a in range(m):
            v = 0.0
            for j in range(first[i], first[i] + degrees[i]):
                v += m_m[j, a] * sigma[j]
            mu[i, a] = v
        for k in range(c):
            v = 0.0
            for j in range(first[i], first[i] + degrees[i]):
                inner = 0.0
                for e in range(first[k], first[k] + degrees[k]):
                    inner += k_mat[j, e] * sigma[e]
                v += sigma[j] * inner
            kappa[i, k] = v
    for i in range(c):
        for a in range(m):
            v = -mu[i, a]
            for k in range(c):
                v += kappa[i, k] * dr[k, a]
            y[i, a] = v
    for a in range(m):
        for e in range(a + 1):
            v = p_mm[a, e]
            for i in range(c):
                v += dr[i, a] * y[i, e] - mu[i, a] * dr[i, e]
            h[a, e] = v


@inlined
def _decrement(h, b, m, work):
    """``b^T H^-1 b`` for ``H = L L^T`` with ``L`` the lower triangle of ``h`` (a factor of :func:`_cholesky_solve`):
    the decrease of ``q`` that a Gauss-Newton step with that ``H`` predicts."""
    out = 0.0
    for i in range(m):
        v = b[i]
        for k in range(i):
            v -= h[i, k] * work[k]
        work[i] = v / h[i, i]
        out += work[i] * work[i]
    return out


@inlined
def _gather(idx, m, covariance_inverse, g_lin, p_mm, m_m):
    """The model's matrices at a row's gaps: ``P_mm`` and ``M_m``."""
    for a in range(m):
        for e in range(m):
            p_mm[a, e] = covariance_inverse[idx[a], idx[e]]
        for j in range(g_lin.shape[0]):
            m_m[j, a] = g_lin[j, idx[a]]


@inlined
def _reach(ts):
    """The largest ``|t_p|`` of the curved steps."""
    out = 0.0
    for s in range(len(ts)):
        out = max(out, abs(ts[s]))
    return out


@inlined
def _halved(delta, step, m, idx, row, sums, plan, gathered, q, halvings, work):
    """``delta + t step`` for the first ``t = 1, 1/2, ...`` (up to ``halvings``) with ``q`` not larger, into ``delta``
    with its ``tau``, ``slopes`` and ``ts``; the new ``q`` and ``t`` (``q`` itself and 0, ``delta`` kept, where none is)."""
    tau, slopes, ts, trial, trial_tau, trial_slopes, trial_ts = work
    t = 1.0
    for _ in range(halvings):
        for a in range(m):
            trial[a] = delta[a] + t * step[a]
        trial_q = _objective(trial, m, idx, row, sums, plan, trial_tau, trial_slopes, trial_ts, gathered)
        if trial_q <= q:
            for a in range(m):
                delta[a] = trial[a]
            for j in range(len(tau)):
                tau[j], slopes[j] = trial_tau[j], trial_slopes[j]
            for j in range(len(ts)):
                ts[j] = trial_ts[j]
            return trial_q, t
        t /= 2
    return q, 0.0


@inlined
def _linear_start(x, row, value, idx, mean, linear_inverse, h, b, step, out):
    """Row ``row`` of ``x`` at its linear fill (:func:`linear_fill`'s, bit for bit) in ``value`` and ``out``, its
    gaps' columns in ``idx``; their number."""
    m = _row_gaps(x, row, value, idx)
    if m == len(value):
        for k in range(m):
            value[k] = np.nan
    elif m:
        _linear_row(value, idx, m, mean, linear_inverse, h, b, step)
    for k in range(len(value)):  # element by element: a row view would be an array object, counted at every row
        out[row, k] = value[k]
    return m


@inlined
def _start_offsets(u, row, precision, value, idx, m, mean, delta):
    """The linear fill's offsets from the mean at the gaps into ``delta``; ``Q0 = u^T L u`` of the row."""
    for a in range(m):
        delta[a] = value[idx[a]] - mean[idx[a]]
    q0 = 0.0
    for k in range(u.shape[1]):
        q0 += precision[k] * u[row, k] * u[row, k]
    return q0


@inlined
def _output(delta, m, idx, row, u, tau, marginal, o):
    """``r_p = u_p + (A W)[p, m] delta - G[:, p]^T tau`` at ``x_m = start + delta`` of the ``o``-th output with a recorded
    marginal (``marginal``: their indices, tables ``c_p`` of ``log f_p + r^2 / (2 Lambda_p)``, first points, 1 / spacings,
    ``(A W)`` rows and ``G`` columns)."""
    lin_o, g_o = marginal[4], marginal[5]
    rp = u[row, marginal[0][o]]
    for a in range(m):
        rp += lin_o[o, idx[a]] * delta[a]
    for j in range(len(tau)):
        rp -= g_o[j, o] * tau[j]
    return rp


@inlined
def _table(rp, marginal, o):
    """``c_p(r_p)`` of the ``o``-th output with a recorded marginal: linear between its points, constant beyond."""
    table, low, inverse_spacing = marginal[1], marginal[2], marginal[3]
    last = table.shape[1] - 1
    g = (rp - low[o]) * inverse_spacing[o]
    if not g > 0.0:
        return table[o, 0]
    if not g < last:
        return table[o, last]
    k = int(g)
    return table[o, k] + (g - k) * (table[o, k + 1] - table[o, k])


@inlined
def _excess(delta, m, idx, row, u, tau, marginal):
    """``sum_p c_p(r_p)`` over the outputs with a recorded marginal at ``x_m = start + delta``."""
    total = 0.0
    for o in range(len(marginal[0])):
        total += _table(_output(delta, m, idx, row, u, tau, marginal, o), marginal, o)
    return total


@inlined
def _slope(rp, marginal, o):
    """``c_p'(r_p)`` of the ``o``-th output with a recorded marginal: its segment's slope (0 beyond its points)."""
    table, low, inverse_spacing = marginal[1], marginal[2], marginal[3]
    g = (rp - low[o]) * inverse_spacing[o]
    if not (g > 0.0 and g < table.shape[1] - 1):
        return 0.0
    k = int(g)
    return (table[o, k + 1] - table[o, k]) * inverse_spacing[o]


@inlined
def _wide(delta, m, idx, row, u, tau, plan, marginal, buffers):
    """Whether the recorded marginals would move the Laplace posterior's mean (``H = L L^T``, ``L`` in ``h``) by more than
    :data:`SHIFT` of its standard deviation, to first order: ``||L^-1 sum_p c_p'(r_p) J_p||``, ``J_p = (A W)[p, m] -
    sum_i (sum_(j of step i) G[j, p] sigma_j) dr_i`` (``dr``, ``sigma``: :func:`_tangents`')."""
    dr, sigma, h, z, shift = buffers[0], buffers[1], buffers[3], buffers[9], buffers[10]
    lin_o, g_o = marginal[4], marginal[5]
    first, degrees = plan[2], plan[1]
    for a in range(m):
        shift[a] = 0.0
    for i in range(len(degrees)):
        z[i] = 0.0
    for o in range(len(marginal[0])):
        slope = _slope(_output(delta, m, idx, row, u, tau, marginal, o), marginal, o)
        if slope == 0.0:
            continue
        for a in range(m):
            shift[a] += slope * lin_o[o, idx[a]]
        for i in range(len(degrees)):
            c = 0.0
            for j in range(first[i], first[i] + degrees[i]):
                c += g_o[j, o] * sigma[j]
            z[i] += slope * c
    for a in range(m):
        for i in range(len(degrees)):
            shift[a] -= z[i] * dr[i, a]
    total = 0.0
    for a in range(m):  # L^-1 shift
        v = shift[a]
        for k in range(a):
            v -= h[a, k] * z[k]
        z[a] = v / h[a, a]
        total += z[a] * z[a]
    return total > SHIFT * SHIFT


@inlined
def _posterior_mean(delta, q, m, idx, row, sums, plan, gathered, marginal, h, work, axis, mean):
    """The posterior mean of the gaps' offsets under ``p(x) ~ exp(-q(x) / 2 + sum_p c_p(r_p))`` from ``2m + 1`` points:
    the MAP ``delta`` and ``delta +- SIGMA_POINT L^-T e_a`` (the Laplace posterior's axes, ``H = L L^T``), each
    weighted by the density there (:func:`_excess`); into ``mean``."""
    tau, trial, trial_tau, trial_slopes, trial_ts = work[0], work[3], work[4], work[5], work[6]
    u = sums[3]
    base = _excess(delta, m, idx, row, u, tau, marginal)
    total = 1.0
    for a in range(m):
        mean[a] = delta[a]
    for e in range(m):
        for a in range(m - 1, -1, -1):  # L^T v = e_e
            v = 1.0 if a == e else 0.0
            for k in range(a + 1, m):
                v -= h[k, a] * axis[k]
            axis[a] = v / h[a, a]
        for sign in (-SIGMA_POINT, SIGMA_POINT):
            for a in range(m):
                trial[a] = delta[a] + sign * axis[a]
            trial_q = _objective(trial, m, idx, row, sums, plan, trial_tau, trial_slopes, trial_ts, gathered)
            weight = np.exp(-(trial_q - q) / 2 + _excess(trial, m, idx, row, u, trial_tau, marginal) - base)
            if weight == weight and weight < np.inf:
                total += weight
                for a in range(m):
                    mean[a] += weight * trial[a]
    for a in range(m):
        mean[a] /= total


@_uncounted
def _posterior_rows(x, out, sums, model, plan, marginal, scratch):
    """The rows of ``out`` (their MAP fill) that :func:`map_fill` found wide (:func:`_wide`; ``scratch``'s last entry)
    moved to the posterior mean (:func:`_posterior_mean`), with the Laplace posterior at the MAP itself (``H = L L^T``;
    kept where it is not positive definite): a pass of their own, so the loop over every row keeps its code;
    :func:`_map_rows`' buffers (``scratch``)."""
    if len(marginal[0]) == 0:
        return
    n, d = x.shape
    covariance_inverse, g_lin, k_mat, mean = model[0], model[1], model[2], model[3]
    u, wv, precision = sums
    idx, vectors, matrices, steps, wide = scratch
    q0, value, delta, step, b, spare, axis = vectors[0], vectors[1], vectors[2], vectors[3], vectors[4], vectors[5], vectors[6]
    p_mm, h, m_m, dr, mu, y = matrices
    sigma, gamma, kappa = steps[0], steps[7], steps[9]
    row_sums = (q0, wv[:, :d], wv[:, d:], u)
    work = (steps[1], steps[3], steps[2], spare, steps[4], steps[6], steps[5])
    gathered = (p_mm, m_m, k_mat)
    for row in range(n):
        if not wide[row]:
            continue
        m = _row_gaps(x, row, value, idx)
        for a in range(m):
            delta[a] = out[row, idx[a]] - mean[idx[a]]
            b[a] = 0.0
        _gather(idx, m, covariance_inverse, g_lin, p_mm, m_m)
        q0[0] = 0.0
        for k in range(d):
            q0[0] += precision[k] * u[row, k] * u[row, k]
        q = _objective(delta, m, idx, row, row_sums, plan, work[0], work[1], work[2], gathered)
        _tangents(m, idx, plan, work[1], dr, sigma, gamma)
        _hessian(m, plan, gathered, sigma, dr, h, mu, kappa, y)
        if _cholesky_solve(h, b, m, step):
            _posterior_mean(delta, q, m, idx, row, row_sums, plan, gathered, marginal, h, work, axis, step)
            for a in range(m):
                out[row, idx[a]] = mean[idx[a]] + step[a]


@inlined
def _trusted(factored, t, decrease, predicted):
    """Whether a step was whole (``t`` 1, ``H`` factored) and ``q`` fell by its quadratic model's ``predicted`` decrease
    within :data:`TRUST`."""
    return factored and t == 1.0 and abs(decrease - predicted) <= TRUST * predicted


def fill_scratch(d, n_tau, c, rows):
    """The buffers of :func:`map_fill` for rows of ``d`` values, a model of ``n_tau`` stacked powers in ``c`` curved
    steps, parts of at most ``rows`` rows (made once per fill, reused by every part)."""
    vectors = (np.empty(1),) + tuple(np.empty(d) for _ in range(7))
    matrices = (np.empty((d, d)), np.empty((d, d)), np.empty((n_tau, d)), np.empty((c, d)), np.empty((c, d)), np.empty((c, d)))
    steps = (np.empty(n_tau), np.empty(n_tau), np.empty(c), np.empty(n_tau), np.empty(n_tau), np.empty(c), np.empty(n_tau),
             np.empty(c), np.empty(c), np.empty((c, c)))
    return np.empty(d, np.int64), vectors, matrices, steps, np.zeros(rows, np.bool_)


def map_fill(x, out, sums, model, plan, marginal, iterations, tolerance, halvings, guard, scratch=None):
    """The MAP fill ``argmin_(x_m) r(x)^T Lambda^-1 r(x)`` of each row of ``x`` (n, d; NaN or +-inf at its gaps),
    by Gauss-Newton on its own gaps from the linear fill (:mod:`ppa_xr.core.fill`): each step halved up to
    ``halvings`` times until ``q`` does not increase, until ``q`` falls by at most ``tolerance`` of itself, or the
    next step's predicted decrease ``b^T H^-1 b`` is at most ``tolerance`` of ``q`` (with the last step's ``H``, where
    that step was whole and ``q`` fell by its prediction within :data:`TRUST`: no step needed to see it settle), or
    ``iterations`` run out (``q`` then is still at most the start's), written into ``out`` (n, d, float64) where every
    curved step's ``|t_p|`` is within ``guard`` or the start's, the linear fill (:func:`linear_fill`, bit for bit)
    elsewhere.

    Every term is one of the row's sums at the start (``sums``: ``u = A W x - A W mean - b`` (n, d), ``[w, v] = u
    [(A W)^T L, L G^T]`` (n, d + |G|), from two GEMMs of the caller, and ``1 / Lambda``, for ``Q0 = u^T L u``) or of the model's (``model``: ``P = (A W)^T L A W``, ``G L A W``, ``K = G L G^T``; ``G``:
    the curved steps' ``F_p`` stacked, ``L = Lambda^-1``), and ``d tau / d x_m`` has the rank c of the curved steps,
    so a row costs ``O(m^2 c + |G| m + |G|^2)`` per iteration, whatever ``d``. The sums are taken at the row with its
    gaps at the mean ``mu`` (``model``'s fourth entry), the start ``delta`` is the linear fill's offset from it
    (``model``'s last entry: the linear fill's inverse covariance), so no pass of its own computes the linear fill.
    Where ``marginal`` (:func:`_excess`) records outputs that are not Gaussian, the rows whose MAP they would move
    (:func:`_wide`, with the last step's ``H``) move to the posterior mean (:func:`_posterior_rows`).

    ``scratch``: :func:`fill_scratch`'s buffers (made here where None). The two loops are called from Python, each its
    own compiled function: called from a compiled wrapper instead, they ran 17% slower once loaded from numba's cache
    (as fast as these when just compiled)."""
    if scratch is None:
        scratch = fill_scratch(x.shape[1], model[1].shape[0], len(plan[0]), len(x))
    _map_rows(x, out, sums, model, plan, marginal, (iterations, tolerance, halvings, guard), scratch)
    _posterior_rows(x, out, sums, model, plan, marginal, scratch)


@_uncounted
def _map_rows(x, out, sums, model, plan, marginal, settings, scratch):
    """:func:`map_fill`'s loop over the rows, with its buffers from ``scratch`` and the rows found wide marked in its
    last entry."""
    n, d = x.shape
    iterations, tolerance, halvings, guard = settings
    covariance_inverse, g_lin, k_mat, mean, linear_inverse = model
    u, wv, precision = sums
    idx, vectors, matrices, steps, wide = scratch
    q0, value, delta, step, b, spare, shift, z = vectors
    p_mm, h, m_m, dr, mu, y = matrices
    sigma, tau, ts, slopes, trial_tau, trial_ts, trial_slopes, gamma, zeta, kappa = steps
    row_sums = (q0, wv[:, :d], wv[:, d:], u)
    work = (tau, slopes, ts, spare, trial_tau, trial_slopes, trial_ts)
    gathered = (p_mm, m_m, k_mat)  # P_mm and M_m refilled at each row
    buffers = (dr, sigma, gamma, h, mu, kappa, y, b, step, z, shift)
    posterior = len(marginal[0]) > 0
    for row in range(n):
        wide[row] = False
        m = _linear_start(x, row, value, idx, mean, linear_inverse, h, b, step, out)
        if m == 0 or m == d:
            continue
        _gather(idx, m, covariance_inverse, g_lin, p_mm, m_m)
        q0[0] = _start_offsets(u, row, precision, value, idx, m, mean, delta)
        q = _objective(delta, m, idx, row, row_sums, plan, tau, slopes, ts, gathered)
        start, linear_q = _reach(ts), q
        trusted = factored = False  # the last step was whole and q fell as its quadratic model predicted (within a quarter)
        for _ in range(iterations):
            _tangents(m, idx, plan, slopes, dr, sigma, gamma)
            _gradient(delta, m, idx, row, row_sums, gathered, plan, tau, sigma, dr, b, zeta)
            if trusted and _decrement(h, b, m, step) <= tolerance * q:
                break
            _hessian(m, plan, gathered, sigma, dr, h, mu, kappa, y)
            factored = _cholesky_solve(h, b, m, step)
            predicted = 0.0
            for a in range(m):
                predicted -= b[a] * step[a]
            new_q, t = _halved(delta, step, m, idx, row, row_sums, plan, gathered, q, halvings, work)
            settled = q - new_q <= tolerance * q
            trusted = _trusted(factored, t, q - new_q, predicted)
            q = new_q
            if settled:
                break
        reach = _reach(ts)
        if q < linear_q and (reach <= guard or reach <= start):
            if posterior and factored:
                wide[row] = _wide(delta, m, idx, row, u, tau, plan, marginal, buffers)
            for a in range(m):
                out[row, idx[a]] = mean[idx[a]] + delta[a]


@_jit
def column_moments(X):
    """One pass over the rows of ``X`` (n x d, row-major, n >= 1): each column's sum, in float64 from 0 in row
    order (``X.sum(axis=0, dtype=np.float64)`` of a row-major array, bit for bit), its least and its largest value."""
    d = X.shape[1]
    sums, low, high = np.zeros(d), np.empty(d), np.empty(d)
    for j in range(d):
        low[j] = high[j] = np.float64(X[0, j])
    for i in range(X.shape[0]):
        for j in range(d):
            v = np.float64(X[i, j])
            sums[j] += v
            low[j] = min(low[j], v)
            high[j] = max(high[j], v)
    return sums, low, high


@_jit
def centred_into(X, mean, inv, out):
    """``out = (X - mean) * inv`` (n x d, float64), each operation rounded as numpy's two would be."""
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i, j] = (np.float64(X[i, j]) - mean[j]) * inv
