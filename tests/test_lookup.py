"""The grid look-up of step functions gives what a binary search gives, at every kind of value."""

import numpy as np
import pytest

from ppa_xr.core import compiled
from ppa_xr.core.entropy import EqualMassBins
from ppa_xr.core.lookup import IntegerSteps, StepLookup


def _columns(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    return [
        rng.normal(size=n),
        np.exp(2 * rng.normal(size=n)),  # skewed, long right tail
        rng.standard_cauchy(size=n),  # tails far beyond the quartiles
        np.round(rng.normal(size=n) * 3),  # ties: many equal breakpoints
        np.where(rng.uniform(size=n) < 0.9, rng.normal(size=n) * 1e-3, 50 + rng.normal(size=n)),  # two far modes
        np.full(n, 7.0),  # one value only
    ]


@pytest.mark.parametrize("seed", [0, 1])
def test_step_lookup_equals_binary_search(seed):
    rng = np.random.default_rng(seed)
    columns = _columns(rng, 20_000)
    breaks = np.sort(np.column_stack(columns), axis=0)[:: 1 + seed * 37 + 140].T
    tables = rng.normal(size=(6, breaks.shape[1] + 1))
    lookup = StepLookup.build(breaks, tables)
    values = np.column_stack(_columns(rng, 30_000)) * rng.uniform(0.5, 1.5, size=6)
    values[:40] = breaks.T[:40]  # exactly on breakpoints
    values[40:46] = [np.inf, -np.inf, 1e308, -1e308, 0.0, np.nan]
    out = lookup(values)
    for j, (P, table) in enumerate(zip(breaks, tables)):
        finite = ~np.isnan(values[:, j])
        np.testing.assert_array_equal(out[finite, j], table[np.searchsorted(P, values[finite, j], side="right")])
    assert lookup.steps <= 8  # the grid stays a few comparisons from the answer, even with two modes far apart
    np.testing.assert_array_equal(lookup(values.reshape(3, -1, 6)).reshape(-1, 6)[~np.isnan(values)], out[~np.isnan(values)])


@pytest.mark.parametrize("offset, spread", [(0.0, 1e-41), (1e300, 1e290), (1e6, 1e-3), (-5e37, 1e36)])
def test_step_lookup_at_any_scale(offset, spread):
    """Data near 1e-41 (below float32's range), near 1e300 (above it), a small spread on a large offset: exact, and
    still a few comparisons from the answer (the float32 coordinate would have merged the values into one cell)."""
    rng = np.random.default_rng(0)
    sample = offset + spread * rng.normal(size=(20_000, 2))
    breaks = np.sort(sample, axis=0)[::150].T
    tables = rng.normal(size=(2, breaks.shape[1] + 1))
    lookup = StepLookup.build(breaks, tables)
    values = offset + spread * rng.normal(size=(30_000, 2)) * 1.5
    out = lookup(values)
    for j in range(2):
        np.testing.assert_array_equal(out[:, j], tables[j][np.searchsorted(breaks[j], values[:, j], side="right")])
    assert lookup.steps <= 3


def test_step_lookup_refuses_what_it_cannot_represent():
    P = np.array([[0.0, 1.0, 2.0]])
    with pytest.raises(ValueError, match="shapes"):
        StepLookup.build(P, np.zeros((1, 3)))  # one value per position: K + 1 = 4
    with pytest.raises(ValueError, match="sorted"):
        StepLookup.build(P[:, ::-1], np.zeros((1, 4)))
    with pytest.raises(ValueError, match="finite"):
        StepLookup.build(np.array([[0.0, np.nan, 2.0]]), np.zeros((1, 4)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_step_lookup_bounded_on_spikes(seed):
    """A share of the sample on (or near) one value, as clipped pixels or a dequantized integer band's commonest
    level, puts many breakpoints in one cell: the positions stay exact and the search after the grid takes at most
    ``bit_length(K)`` comparisons, not one per breakpoint of the cell."""
    rng = np.random.default_rng(seed)
    n = 40_000
    spike = rng.uniform(size=n) < rng.uniform(0.2, 0.6)
    columns = [
        np.where(spike, 1.0 + rng.uniform(-0.5, 0.5, n), 1 + np.abs(rng.normal(3000, 1500, n))),  # clipped at 1, dequantized
        np.where(spike, 5.0 + 1e-9 * rng.normal(size=n), rng.normal(size=n)),  # a spike far into a tail
        np.where(spike, rng.normal(size=n) * 1e-6, rng.standard_cauchy(n)),  # a spike at the centre of heavy tails
        rng.normal(size=n),
    ]
    breaks = np.sort(np.column_stack(columns), axis=0)[::127].T
    K = breaks.shape[1]
    tables = rng.normal(size=(len(columns), K + 1))
    lookup = StepLookup.build(breaks, tables)
    assert lookup.steps > 40  # the grid alone leaves many breakpoints to compare with
    assert lookup.depth.max() == lookup.steps.bit_length() <= K.bit_length()
    assert lookup.depth[3] == 1  # a column without a spike: one comparison, whatever the others need
    values = np.column_stack(columns)[rng.permutation(n)]
    values[:200] = breaks.T[rng.integers(0, K, 200)]  # on breakpoints, and just either side
    values[200:400] = np.nextafter(breaks.T[rng.integers(0, K, 200)], np.inf)
    values[400:600] = np.nextafter(breaks.T[rng.integers(0, K, 200)], -np.inf)
    values[600:604] = [np.inf, -np.inf, 1e308, -1e308]
    out = lookup(values)
    for j, (P, table) in enumerate(zip(breaks, tables)):
        np.testing.assert_array_equal(out[:, j], table[np.searchsorted(P, values[:, j], side="right")])
    finite = np.isfinite(values).all(axis=1)
    in_order = out[finite, 0] + out[finite, 1] + out[finite, 2] + out[finite, 3]  # summed in order of the columns
    np.testing.assert_array_equal(lookup.row_sums(values[finite]), in_order)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integer_table_is_the_step_lookup_on_integers(seed):
    """Integer values (quantized bands, read as floats) are looked up by one gather into the step function tabulated
    on the integers: the same sums bit for bit, also beyond the breakpoints, on ties and one-value columns; a block
    with a value that is not an integer (or NaN, inf) is looked up by the search."""
    rng = np.random.default_rng(seed)
    columns = [np.round(rng.normal(300, 80, 5000)), np.round(np.exp(rng.normal(4, 1, 5000))), np.full(5000, 7.0),
               np.round(rng.normal(-50, 3, 5000)) + rng.uniform(-0.5, 0.5, 5000)]  # dequantized: breakpoints between integers
    breaks = np.sort(np.column_stack(columns), axis=0)[:: 70 + seed].T
    lookup = StepLookup.build(breaks, rng.normal(size=(4, breaks.shape[1] + 1)))
    table = IntegerSteps.build(lookup)
    values = np.round(np.column_stack([rng.normal(300, 150, 20_000), rng.normal(50, 200, 20_000), rng.normal(7, 3, 20_000),
                                       rng.normal(-50, 20, 20_000)]))
    for dtype in (np.float64, np.float32):
        given = values.astype(dtype)
        np.testing.assert_array_equal(table.sums(given.T), lookup.row_sums(given))
    for odd in (0.5, np.nan, np.inf):
        mixed = values.copy()
        mixed[123, 1] = odd
        np.testing.assert_array_equal(table.sums(mixed.T), lookup.row_sums(mixed))
    assert IntegerSteps.build(StepLookup.build(breaks * 1e6, lookup.table[:, : breaks.shape[1] + 1])) is None  # too wide a range


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_uniform_grid_holds_each_cells_mass(seed):
    """The maps' grid: a cell inside one bin holds that bin's density (most values), the grid's density has the
    step density's mass, values beyond the fitted range get the density outside it, NaN and inf give NaN, and the
    mean over the sample moves by little."""
    rng = np.random.default_rng(seed)
    n = 20_000
    X = np.column_stack([rng.normal(size=n), np.exp(rng.normal(size=n)), np.where(rng.uniform(size=n) < 0.7, rng.normal(size=n), 30 + 3 * rng.normal(size=n)),
                         rng.standard_cauchy(size=n)])
    bins = EqualMassBins.fit(X)
    grid = bins.grid()
    exact = bins.log2_density(X)
    by_column = np.column_stack([grid_column(bins, j).sums(X[:, j : j + 1].T) for j in range(4)])
    moved = np.abs(by_column - exact)
    assert (moved < 1e-9).mean(axis=0).min() > 0.55  # a cell holds two bins' values only at a bin edge: measured 0.64-0.91
    assert moved.mean(axis=0).max() < 0.03  # bits a value moves on average: measured 0.005-0.020 (seeds 0-2)
    assert np.abs(by_column.mean(axis=0) - exact.mean(axis=0)).max() < 0.005  # the mean over the sample: measured below 0.002
    for j in range(3):  # the mass: a fine mesh of the fitted range (Cauchy's is too wide for one)
        mesh = np.linspace(bins.edges[j, 0], bins.edges[j, -1], 2_000_001)
        density = np.exp2(grid_column(bins, j).sums(mesh[None, :]))
        mass = np.sum(np.exp2(bins.log_density[j]) * np.diff(bins.edges[j]))
        assert np.sum(density[:-1] * np.diff(mesh)) == pytest.approx(mass, rel=2e-3)
    outside = bins.lookup.table[:, 0]
    far = np.array([[-1e9, -1e9, -1e9, -1e30], [1e9, 1e9, 1e9, 1e30]]).T
    np.testing.assert_array_equal(grid.sums(far), [outside.sum()] * 2)
    odd = np.zeros((4, 3))
    odd[1, 0], odd[2, 1], odd[0, 2] = np.nan, np.inf, -np.inf
    assert np.isnan(grid.sums(odd)).all()
    np.testing.assert_array_equal(grid.sums(X.T.astype(np.float32)), grid.sums(X.T.astype(np.float32).astype(np.float64)))


def grid_column(bins, j):
    """The grid of column ``j`` alone."""
    from ppa_xr.core.lookup import UniformGrid

    return UniformGrid.build(bins.edges[j : j + 1], bins.log_density[j : j + 1], bins.lookup.table[j : j + 1, 0])


def _reference_table(edges: np.ndarray, log_density: np.ndarray, outside: np.ndarray, grid) -> np.ndarray:
    """The grid's table by numpy's own expressions (the cells' bounds, made monotone, and np.interp of the mass)."""
    d, bins = log_density.shape
    count = grid.table.shape[1] - 2
    start = compiled.row_coordinates(np.ascontiguousarray(edges[:, :1]), grid.center, grid.inv_scale)[:, 0]  # t of the first edge
    t = start[:, None] + np.arange(count + 1) / grid.slope[:, None]
    bits = np.minimum(np.round(np.abs(t)), 2.0**62).astype(np.int64) + np.float64(1.0).view(np.int64)
    bounds = grid.center[:, None] + np.sign(t) * (bits.view(np.float64) - 1.0) / grid.inv_scale[:, None]
    bounds[:, 0], bounds[:, -1] = edges[:, 0], edges[:, -1]
    bounds = np.maximum.accumulate(bounds, axis=1)
    mass = np.concatenate([np.zeros((d, 1)), np.cumsum(np.exp2(log_density) * np.diff(edges, axis=1), axis=1)], axis=1)
    cumulative = np.stack([np.interp(bounds[j], edges[j], mass[j]) for j in range(d)])
    with np.errstate(divide="ignore", invalid="ignore"):
        inside = np.log2(np.diff(cumulative, axis=1) / np.diff(bounds, axis=1))
    empty = ~np.isfinite(inside)
    for j, c in zip(*np.nonzero(empty)):
        inside[j, c] = log_density[j, np.clip(np.searchsorted(edges[j], bounds[j, c], side="right") - 1, 0, bins - 1)]
    return np.column_stack([outside, inside, outside])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_uniform_grid_is_numpys_expressions_bit_for_bit(seed):
    """The compiled build of the cells (``compiled.grid_masses``) gives the numpy expressions' table exactly: ties,
    long tails, far modes and spikes (zero-width cells) alike."""
    rng = np.random.default_rng(seed)
    columns = _columns(rng, 20_000)[:-1] + [np.where(rng.uniform(size=20_000) < 0.4, 1.0, rng.normal(size=20_000))]
    bins = EqualMassBins.fit(np.column_stack(columns))
    grid = bins.grid()
    reference = _reference_table(bins.edges, bins.log_density, bins.lookup.table[:, 0], grid)
    np.testing.assert_array_equal(grid.table, reference)
