"""The compiled per-pixel loops (:mod:`ppa_xr.core.compiled`) against the numpy algorithms they replaced.

The references below are those numpy algorithms (as they stood before the
loops were compiled), or the definition itself (``np.searchsorted``). Keys,
samples, merges and look-ups are compared bit for bit; sums of looked-up
densities within 1e-12 relative (a sum over the bands, in another order).
"""

import pickle

import dask
import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr.core import compiled
from ppa_xr.cube import sampling
from ppa_xr.cube.inputs import model_features
from ppa_xr.information import StepLookup
from ppa_xr.cube.report import _pixel_block, _report_sample, _statistics
from ppa_xr.core.keys import PixelSample, held_by, pixel_keys

# ---------------------------------------------------------------------------------------------------------------------
# numpy references

_GOLDEN, _MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def reference_keys(seed: int, index: np.ndarray) -> np.ndarray:
    """SplitMix64 of ``seed + (index + 1) * golden`` in numpy (wrapping uint64)."""
    z = (index.astype(np.uint64) + np.uint64(1)) * _GOLDEN + np.uint64(seed)
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def reference_held(samples, index):
    held = np.zeros(np.shape(index), bool)
    for sample in samples:
        if sample.size:
            held |= reference_keys(sample.seed, index) <= np.uint64(sample.key_max)
    return held


def _reference_index_and_block(layout, offsets, sizes):
    index, block = np.zeros(1, np.int64), np.zeros(1, np.int64)
    for start, size, total, tiles in zip(offsets, sizes, layout.shape, layout.tiles):
        position = np.arange(start, start + size, dtype=np.int64)
        index = np.add.outer(index * total, position).ravel()
        block = np.add.outer(block * tiles, position * tiles // total).ravel()
    return index, block


def reference_block_sample(block, seed, offsets, layout, n, exclude, valid="all"):
    values = block.reshape(-1, block.shape[-1])
    index, blocks = _reference_index_and_block(layout, offsets, block.shape[:-1])
    observed = np.isfinite(values).any(axis=1) if valid == "any" else np.isfinite(values).all(axis=1)
    rows = np.flatnonzero(observed & ~reference_held(exclude, index))
    keys = reference_keys(seed, index[rows])
    kept = sampling._smallest(keys, n)
    rows = rows[kept]
    return keys[kept], values[rows], blocks[rows], index[rows], len(keys)


def reference_merge(parts, n):
    """The rows of the ``n`` smallest keys of the parts, each part's rows in their order, parts in their order."""
    kept = sampling._smallest(np.concatenate([part[0] for part in parts]), n)  # ascending positions
    return *(np.concatenate([part[i] for part in parts])[kept] for i in range(4)), sum(part[4] for part in parts)


def reference_step(breaks: np.ndarray, tables: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``tables[j][#{P_j <= v}]`` per column by binary search; NaN where a value is NaN."""
    out = np.full(values.shape, np.nan)
    for j, (P, table) in enumerate(zip(breaks, tables)):
        finite = ~np.isnan(values[:, j])
        out[finite, j] = table[np.searchsorted(P, values[finite, j], side="right")]
    return out


def reference_row_sums(breaks, tables, values):
    """Sum over the columns; NaN where a value is NaN or where +inf and -inf meet in one row."""
    sums = reference_step(breaks, tables, values).sum(axis=1)
    both = (values == np.inf).any(axis=1) & (values == -np.inf).any(axis=1)
    return np.where(both, np.nan, sums)


def reference_density(bins, values):
    """``log2 p_j(v_j)`` of :class:`EqualMassBins` by binary search (the breakpoints and values its look-up is built from)."""
    breaks = np.column_stack([bins.edges[:, :-1], np.nextafter(bins.edges[:, -1], np.inf)])
    outside = bins.log_density.min(axis=1, keepdims=True) - 1.0
    return reference_step(breaks, np.hstack([outside, bins.log_density, outside]), np.asarray(values, dtype=np.float64))


def reference_grid(grid, values):
    """``sum_j log2 p_j`` of feature-major ``values`` (d, n) on a :class:`UniformGrid`, its cells found by numpy."""
    v = np.asarray(values, dtype=np.float64).T  # (n, d)
    u = (v - grid.center) * grid.inv_scale
    with np.errstate(invalid="ignore"):
        t = np.abs(u) + 1.0
        t = (t.view(np.int64) - np.float64(1.0).view(np.int64)).astype(np.float64) * np.where(u < 0, -1.0, 1.0)
        g = np.nan_to_num(t * grid.slope + grid.intercept, nan=1.0)
    size = grid.table.shape[1] - 2
    cells = np.clip(g, 1.0, float(size)).astype(np.int64)
    cells = np.where(v < grid.low, 0, np.where(v > grid.high, size + 1, cells))
    sums = grid.table[np.arange(v.shape[1]), cells].sum(axis=1)
    return np.where(np.isfinite(v).all(axis=1), sums, np.nan)


# ---------------------------------------------------------------------------------------------------------------------
# look-ups


def _hostile(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Columns a look-up must survive: (name -> samples)."""
    return {
        "normal": rng.normal(size=n),
        "ties": np.round(rng.normal(size=n) * 2),
        "one value": np.full(n, 3.5),
        "cauchy": rng.standard_cauchy(size=n),
        "lognormal": np.exp(3 * rng.normal(size=n)),
        "1e-41": 1e-41 * rng.normal(size=n),
        "1e-310 (subnormal)": 1e-310 * np.round(rng.normal(size=n) * 50),
        "1e300": 1e300 * rng.normal(size=n),
        "1e6 +- 1e-3": 1e6 + 1e-3 * rng.normal(size=n),
        "-5e37 +- 1e36": -5e37 + 1e36 * rng.normal(size=n),
        "two far modes": np.where(rng.uniform(size=n) < 0.9, 1e-3 * rng.normal(size=n), 50 + rng.normal(size=n)),
    }


@pytest.mark.parametrize("seed", [0, 1])
def test_lookup_is_the_binary_search_on_hostile_columns(seed):
    rng = np.random.default_rng(seed)
    columns = _hostile(rng, 4000)
    breaks = np.sort(np.column_stack(list(columns.values())), axis=0)[:: 37 + seed].T
    tables = rng.normal(size=(breaks.shape[0], breaks.shape[1] + 1))
    lookup = StepLookup.build(breaks, tables)
    values = np.column_stack(list(_hostile(rng, 6000).values())) * rng.uniform(0.9, 1.1, size=len(columns))
    values[:50] = breaks.T[:50]  # exactly on breakpoints
    values[50:60] = np.nextafter(breaks.T[:10], np.inf)  # just past them
    values[60:70] = np.nextafter(breaks.T[:10], -np.inf)  # just before
    values[70:76] = np.array([np.inf, -np.inf, np.nan, 1e308, -1e308, 0.0])[:, None]
    values[76, ::2], values[76, 1::2] = np.inf, -np.inf  # +inf and -inf in one row
    values[77, 3] = np.inf  # +inf alone in a row
    values[78, 4] = np.nan
    expected = reference_step(breaks, tables, values)
    out = lookup(values)
    finite = ~np.isnan(values)
    np.testing.assert_array_equal(out[finite], expected[finite])
    sums = lookup.row_sums(values)
    reference = reference_row_sums(breaks, tables, values)
    np.testing.assert_array_equal(np.isnan(sums), np.isnan(reference))
    assert np.isnan(sums[[72, 76, 78]]).all() and np.isfinite(sums[77])
    size = np.nansum(np.abs(expected), axis=1)  # a sum in another order: within 1e-12 of the sum of the terms' sizes
    valid = ~np.isnan(reference)
    assert (np.abs(sums - reference)[valid] <= 1e-12 * size[valid]).all()
    for shape in [(2, 3000), (6000,)]:  # any leading shape, any layout
        strided = np.asfortranarray(values).reshape(*shape, -1)
        np.testing.assert_array_equal(lookup(strided).reshape(values.shape)[finite], expected[finite])
        np.testing.assert_array_equal(lookup.row_sums(strided).ravel(), sums)


def test_lookup_float32_values_compare_as_float64():
    """float32 values against float64 breakpoints: the comparison of ``np.searchsorted`` (both as float64)."""
    rng = np.random.default_rng(4)
    breaks = np.sort(rng.normal(size=(3, 200)), axis=1)
    breaks[1] = breaks[1].astype(np.float32)  # breakpoints a float32 value can equal
    tables = rng.normal(size=(3, 201))
    values = rng.normal(size=(5000, 3)).astype(np.float32)
    values[:200, 1] = breaks[1]
    lookup = StepLookup.build(breaks, tables)
    np.testing.assert_array_equal(lookup(values), reference_step(breaks, tables, values.astype(np.float64)))


# ---------------------------------------------------------------------------------------------------------------------
# keys and samples


def test_keys_and_exclusion_bit_for_bit():
    rng = np.random.default_rng(0)
    index = np.concatenate([rng.integers(0, 2**40, 10_000), [0, 1, 2**62, 2**63 - 1]]).astype(np.int64)
    for seed in (0, 1, 2**63 - 1, 123456789):
        np.testing.assert_array_equal(pixel_keys(seed, index), reference_keys(seed, index))
    samples = (PixelSample(5, 2**62, 10, (1,)), PixelSample(6, 2**64 - 1, 0, (1,)), PixelSample(7, 2**61, 3, (1,)))
    np.testing.assert_array_equal(held_by(samples, index), reference_held(samples, index))
    assert not held_by((), index).any()


def _blocks(rng):
    full = rng.normal(size=(30, 40, 50, 7)).astype(np.float32)
    holes = full.copy()
    holes[rng.uniform(size=holes.shape) < 0.02] = np.nan
    holes[0, 0, 0, 3], holes[1, 1, 1, 0] = np.inf, -np.inf
    band_first = np.ascontiguousarray(np.moveaxis(holes, -1, 0))
    return {
        "pixel-major, no holes": full[5:25, 3:33, 2:40],
        "pixel-major, holes": holes[5:25, 3:33, 2:40],
        "band-first view": np.moveaxis(band_first[:, 5:25, 3:33, 2:40], 0, -1),
        "int16": (100 * np.nan_to_num(holes[5:25, 3:33, 2:40])).astype(np.int16),
        "float64 strided": holes.astype(np.float64)[5:25:2, 3:33, 2:40:3],
    }


@pytest.mark.parametrize("valid", ["all", "any"])
@pytest.mark.parametrize("n", [1, 700, 10**6])
def test_block_sample_bit_for_bit(n, valid, monkeypatch):
    """Both ways a chunk's rows are copied: in the pass (the n smallest free keys all valid) and after it; pixels
    with every feature finite, or (``missing="fill"``) with any, their gaps copied as they are."""
    second_pass = []
    gather = compiled.gather_pixels
    monkeypatch.setattr(compiled, "gather_pixels", lambda *args: second_pass.append(1) or gather(*args))
    rng = np.random.default_rng(1)
    layout = sampling._Layout((30, 40, 50), (3, 4, 5))
    exclude = (PixelSample(11, 2**62, 10, (30, 40, 50)), PixelSample(12, 2**64 - 1, 0, (30, 40, 50)))
    for name, block in _blocks(rng).items():
        for excluded in ((), exclude):
            expected = reference_block_sample(block, 42, (5, 3, 2), layout, n, excluded, valid)
            got = sampling._block_sample(block, 42, (5, 3, 2), layout, n, excluded, valid)
            for e, g in zip(expected[:4], got[:4]):
                assert e.dtype == g.dtype and g.flags.c_contiguous, name
                np.testing.assert_array_equal(g, e, err_msg=name)
            assert got[4] == expected[4], name
    if valid == "all":  # with "any", hardly a pixel of these chunks is invalid
        assert 0 < len(second_pass) < 10 if n == 700 else not second_pass


@pytest.mark.parametrize("valid", ["all", "any"])
@pytest.mark.parametrize("n", [1, 700, 10**6])
def test_block_sample_of_pixels_with_gaps(n, valid):
    """Chunks where most values are missing (NaN or +-inf) and about 1 pixel in 12 has none observed: with
    ``valid="any"`` (``missing="fill"``) every pixel with a finite value is a candidate, its gaps copied as they are."""
    rng = np.random.default_rng(3)
    full = rng.normal(size=(30, 40, 50, 7)).astype(np.float32)
    sparse = np.where(rng.uniform(size=full.shape) < 0.7, np.where(rng.uniform(size=full.shape) < 0.5, np.nan, np.inf), full)
    layout = sampling._Layout((30, 40, 50), (3, 4, 5))
    blocks = {"pixel-major": sparse[5:25, 3:33, 2:40],
              "band-first view": np.moveaxis(np.ascontiguousarray(np.moveaxis(sparse, -1, 0))[:, 5:25, 3:33, 2:40], 0, -1)}
    for name, block in blocks.items():
        expected = reference_block_sample(block, 42, (5, 3, 2), layout, n, (), valid)
        got = sampling._block_sample(block, 42, (5, 3, 2), layout, n, (), valid)
        for e, g in zip(expected[:4], got[:4]):
            np.testing.assert_array_equal(g, e, err_msg=name)
        assert got[4] == expected[4] and (expected[4] > 10_000) == (valid == "any"), name


def test_empty_chunks_and_pixel_tables():
    layout = sampling._Layout((30, 40, 50), (3, 4, 5))
    empty = np.zeros((0, 4, 5, 7), np.float32)
    for e, g in zip(reference_block_sample(empty, 1, (3, 0, 0), layout, 10, ()), sampling._block_sample(empty, 1, (3, 0, 0), layout, 10, ())):
        np.testing.assert_array_equal(g, e)
    table = np.random.default_rng(0).normal(size=(500, 3))
    table[7, 1] = np.nan
    flat = sampling._Layout((500,), (100,))
    for e, g in zip(reference_block_sample(table, 1, (0,), flat, 40, ()), sampling._block_sample(table, 1, (0,), flat, 40, ())):
        np.testing.assert_array_equal(g, e)


def test_merge_bit_for_bit():
    rng = np.random.default_rng(2)

    def part(m, d=4):
        return rng.integers(0, 2**63, m).astype(np.uint64), rng.normal(size=(m, d)), rng.integers(0, 9, m), rng.integers(0, 10**6, m), m

    for sizes, n in [((10, 20), 5), ((100, 0), 50), ((0, 0), 3), ((1000, 1000), 1500), ((5, 5), 100), ((300, 700), 1000),
                     ((7,), 3), ((40, 0, 13, 256, 1), 100), ((256,) * 16, 5000), ((256,) * 16, 1)]:
        parts = [part(m) for m in sizes]
        expected, got = reference_merge(parts, n), sampling._merge_samples(parts, n)
        for e, g in zip(expected[:4], got[:4]):
            assert e.dtype == g.dtype and g.flags.c_contiguous
            np.testing.assert_array_equal(g, e)
        assert got[4] == expected[4]


_SCENES = {
    "landsat": lambda: ppa_xr.datasets.open_landsat8_sample(),
    "abu": lambda: ppa_xr.datasets.open_abu_beach().reflectance,
    "rgb": lambda: ppa_xr.datasets.open_rgb_byte(masked=True),
}


@pytest.fixture(scope="module", params=list(_SCENES))
def scene(request):
    """A bundled scene and a model fitted on at most half of its pixels (the held-out report's setting)."""
    cube = _SCENES[request.param]()
    pixels = cube.sizes["x"] * cube.sizes["y"]
    model = cube.ppa.fit(n_samples=min(200_000, pixels // 2), random_state=0)
    return request.param, cube, model


def test_samples_of_the_bundled_scenes_bit_for_bit(scene, monkeypatch):
    """The held-out report's sample and a plain one, in memory and in chunks: as the numpy sampler drew them."""
    _, cube, model = scene
    cases = {"memory": cube, "chunks": cube.chunk({"y": 100, "x": 150})}
    da = cube.transpose(..., "band")
    exclude = sampling.fitted_shares(da, "band", model.sample_)
    assert exclude  # the model's own sample of this scene is recorded: the exclusion is exercised
    draws = {}
    for label, c in cases.items():
        c = c.transpose(..., "band")
        draws[label] = lambda c=c: [sampling.sample_features(c, "band", 5000, 3, exclude=exclude), sampling.sample_features(c, "band", None, 4)]
    got = {label: draw() for label, draw in draws.items()}
    monkeypatch.setattr(sampling, "_block_sample", reference_block_sample)
    monkeypatch.setattr(sampling, "_merge_samples", reference_merge)
    for label, draw in draws.items():
        for g, e in zip(got[label], draw()):
            for field in ("values", "keys", "groups", "index"):
                np.testing.assert_array_equal(getattr(g, field), getattr(e, field), err_msg=f"{label} {field}")
            assert g.n_valid == e.n_valid and g.drawn == e.drawn


# ---------------------------------------------------------------------------------------------------------------------
# the report's per-pixel maps


def test_report_maps_of_the_bundled_scenes(scene):
    """Each scene's four per-pixel maps against references: the error maps are those of the maps' own compiled pass
    (bit for bit) and ``squared_error``'s up to rounding; the redundancy maps (a difference of two sums over the bands)
    within 1e-12 of the quantized inputs' step functions found by binary search and the outputs' grids indexed by
    numpy (float64 cubes), and one float32 rounding of that (float32 cubes)."""
    from ppa_xr.core import kernels
    from ppa_xr.core.entropy import MapDensities

    name, cube, model = scene
    da, dim = model_features(cube, model, None)
    sample, _, _ = _report_sample(da, dim, model, None, 0, True)
    _, discrete, _, measures, _, _ = _statistics(model.params_, sample, "spacing", 0)
    assert discrete.all()  # every bundled scene is quantized: its inputs' densities are the step functions themselves
    ppa, pca = measures["ppa"], measures["pca"]
    densities = MapDensities.of(ppa, pca, discrete)
    x = np.moveaxis(da.values, da.get_axis_num(dim), -1)
    maps = _pixel_block(x, ppa, pca, 2, 1, densities).reshape(-1, 4)
    flat = x.reshape(-1, x.shape[-1])
    columns = np.ascontiguousarray(flat.T, dtype=maps.dtype)
    (r_ppa, error_ppa), (r_pca, error_pca) = (kernels.forward_error(columns, m.params, 2) for m in (ppa, pca))
    np.testing.assert_array_equal(maps[:, 2], error_ppa)
    np.testing.assert_array_equal(maps[:, 3], error_pca)
    squared = kernels.squared_error(flat, ppa.params, 2, 1)
    np.testing.assert_allclose(error_ppa, squared, rtol=1e-4 if maps.dtype == np.float32 else 1e-10, atol=1e-6 * np.nanmax(squared))
    inputs = reference_density(ppa.inputs, flat.astype(maps.dtype)).sum(axis=1)
    outputs = [reference_grid(grid, r) for grid, r in ((densities.ppa, r_ppa), (densities.pca, r_pca))]
    gains = np.stack([out - inputs + m.params.log2_det_jacobian() for out, m in zip(outputs, (ppa, pca))], axis=-1)
    scales = np.stack([np.abs(out) + np.abs(inputs) for out in outputs], axis=-1)  # what the sums' rounding is relative to
    np.testing.assert_array_equal(np.isnan(maps[:, :2]), np.isnan(gains))
    rounding = 0.0 if maps.dtype == np.float64 else np.finfo(np.float32).eps * np.abs(gains)
    valid = ~np.isnan(gains)
    assert (np.abs(maps[:, :2] - gains)[valid] <= (1e-12 * scales + rounding)[valid]).all()
    if name == "rgb":
        assert np.isnan(maps[:, 0]).any()  # the masked pixels are NaN in every map


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_maps_read_a_band_first_chunk_in_its_own_layout(seed):
    """A band-first chunk (a strided view of a larger ``(band, y, x)`` raster, as dask hands out slices of a cube in
    memory) is read as rows of its bands' contiguous runs (``kernels.pixel_rows``), not gathered into pixel-major rows
    (numpy's reshape of such a view: 2-3 times the cost); its maps are those of the same pixels held pixel-major, bit
    for bit; and a block's look-ups read each band's table once (one sub-block of the grid sums per block)."""
    from ppa_xr.core import kernels
    from ppa_xr.core.entropy import MapDensities

    from .conftest import curved_sample

    d = 36
    raster = np.ascontiguousarray(np.moveaxis(curved_sample(90 * 80, d=d, seed=seed).reshape(90, 80, d), -1, 0), dtype=np.float32)
    raster[5, 10, 20] = np.nan  # an invalid pixel: NaN in every map
    cube = xr.DataArray(raster, dims=("band", "y", "x"))
    model = cube.ppa.fit(n_samples=2000, random_state=seed)
    da, dim = model_features(cube, model, None)
    sample, _, _ = _report_sample(da, dim, model, None, 0, True)
    _, discrete, _, measures, _, _ = _statistics(model.params_, sample, "spacing", 0)
    densities = MapDensities.of(measures["ppa"], measures["pca"], discrete)
    view = np.moveaxis(raster[:, 7:70, 3:61], 0, -1)  # (63, 58, d), bands farthest apart, rows not mergeable
    rows = kernels.pixel_rows(view)
    assert kernels.band_first(rows) and rows.strides[0] == rows.itemsize  # each band's values contiguous
    np.testing.assert_array_equal(rows, view.reshape(-1, d))
    pixel_major = np.ascontiguousarray(view)
    assert kernels.pixel_rows(pixel_major).base is not None  # a view of pixel-major rows, no copy
    got = _pixel_block(view, measures["ppa"], measures["pca"], 3, 1, densities)
    np.testing.assert_array_equal(got, _pixel_block(pixel_major, measures["ppa"], measures["pca"], 3, 1, densities))
    assert np.isnan(got[10 - 7, 20 - 3]).all() and not np.isnan(np.delete(got.reshape(-1, 4), (10 - 7) * 58 + 17, axis=0)).any()


@pytest.fixture(scope="module")
def scheduled_report():
    """A chunked crop of the Landsat scene, a model of it, and its report computed by the synchronous scheduler."""
    cube = ppa_xr.datasets.open_landsat8_sample().isel(x=slice(0, 240), y=slice(0, 200)).chunk({"x": 120, "y": 100})
    # through pickle first, as the workers get it: a fitted model's pca_rotation is a reversed view, which pickle
    # makes contiguous, and its PCA's products (BLAS) then round differently in the last bits, compiled loops or not
    model = pickle.loads(pickle.dumps(cube.ppa.fit(n_samples=10_000, random_state=0, degree=2)))
    with dask.config.set(scheduler="synchronous"):
        expected = cube.ppa.information_report(model, n_components=2).compute()
    return cube, model, expected


@pytest.mark.parametrize("scheduler", ["threads", "processes", "synchronous", "cluster"])
def test_report_under_every_scheduler(request, scheduled_report, scheduler):
    """The compiled loops run in dask's threads, in worker processes and on a LocalCluster (the functions travel
    by reference and compile, or load from the disk cache, in each process): the same report."""
    cube, model, expected = scheduled_report
    if scheduler == "cluster":
        distributed = pytest.importorskip("distributed")
        with distributed.Client(request.getfixturevalue("cluster")):
            got = cube.ppa.information_report(model, n_components=2).compute()
    else:
        with dask.config.set(scheduler=scheduler):
            got = cube.ppa.information_report(model, n_components=2).compute()
    xr.testing.assert_identical(got, expected)


def test_read_only_chunks():
    """Chunks and chunk samples that arrive read-only (a memory map, a distributed worker's buffers) compile and
    give the same results."""
    rng = np.random.default_rng(3)
    layout = sampling._Layout((30, 40, 50), (3, 4, 5))
    block = _blocks(rng)["band-first view"]
    frozen = block.copy()
    frozen.flags.writeable = False
    expected = reference_block_sample(block, 42, (5, 3, 2), layout, 700, ())
    got = sampling._block_sample(frozen, 42, (5, 3, 2), layout, 700, ())
    for e, g in zip(expected, got):
        np.testing.assert_array_equal(g, e)
    a = tuple(np.array(x) for x in got[:4]) + (got[4],)
    for x in got[:4]:
        x.flags.writeable = False
    for e, g in zip(reference_merge([got, a], 500), sampling._merge_samples([got, a], 500)):
        np.testing.assert_array_equal(g, e)
    lookup = StepLookup.build(np.sort(rng.normal(size=(3, 40)), axis=1), rng.normal(size=(3, 41)))
    values = rng.normal(size=(100, 3))
    values.flags.writeable = False
    np.testing.assert_array_equal(lookup.row_sums(values), lookup.row_sums(values.copy()))


# ---------------------------------------------------------------------------------------------------------------------
# the report's sample statistics and kernels: the same numbers from fewer passes


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernels_sharing_a_pass(dtype):
    """``forward_and_error`` is ``squared_error`` bit for bit and ``forward`` up to rounding (curved and straight maps,
    both layouts), and ``error_curve`` every ``squared_error``, the same numbers in either layout, with ``forward`` up
    to rounding from the same pass."""
    from ppa_xr import PPA
    from ppa_xr.core import kernels

    from .conftest import curved_sample

    X = curved_sample(40_000, d=6).astype(dtype)
    X[5, 2] = np.nan
    for degree in (None, 1):
        model = PPA(random_state=0, **({} if degree is None else {"degree": degree})).fit(curved_sample(5000, d=6))
        curve = kernels.error_curve(X, model.params_)
        for x in (X, np.asfortranarray(X)):
            for k in (1, 3):
                r, error = kernels.forward_and_error(x, model.params_, k)
                full = kernels.forward(x, model.params_)
                np.testing.assert_allclose(r, full, rtol=0, atol=(1e-5 if dtype == np.float32 else 1e-13) * np.nanmax(np.abs(full)))
                np.testing.assert_array_equal(np.isnan(r), np.isnan(full))
                np.testing.assert_array_equal(error, kernels.squared_error(x, model.params_, k))
            np.testing.assert_array_equal(kernels.error_curve(x, model.params_), curve)  # contiguous rows either way
            shared, outputs = kernels.error_curve(x, model.params_, with_forward=True)  # the same pass, its final r kept
            np.testing.assert_array_equal(shared, curve)
            full = kernels.forward(x, model.params_)
            np.testing.assert_allclose(outputs, full, rtol=0, atol=(1e-5 if dtype == np.float32 else 1e-13) * np.nanmax(np.abs(full)))
            np.testing.assert_array_equal(np.isnan(outputs), np.isnan(full))
        for k in range(1, 6):
            error = kernels.squared_error(X, model.params_, k)
            np.testing.assert_allclose(curve[:, k - 1], error, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-6 * np.nanmax(error))
        assert np.isnan(curve[5]).all() and (curve[:, 5][~np.isnan(curve[:, 5])] == 0).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tails", ["clamp", "linear", "polynomial"])
def test_compiled_forward_and_error(dtype, tails):
    """The report's compiled pass (feature-major) is ``forward`` and ``squared_error`` up to rounding, for curved and
    straight maps and every tail, NaN in every output and the error of a pixel with a NaN, and the same numbers bit
    for bit whatever the block a pixel is in."""
    from ppa_xr import PPA
    from ppa_xr.core import kernels

    from .conftest import curved_sample

    X = (curved_sample(3000, d=6) * 1.5).astype(dtype)  # beyond the fitted range: the tails act
    X[5, 2] = np.nan
    for degree in (None, 1):
        model = PPA(random_state=0, tails=tails, **({} if degree is None else {"degree": degree})).fit(curved_sample(5000, d=6))
        full = kernels.forward(X, model.params_)
        tolerance = (1e-5 if dtype == np.float32 else 1e-12) * np.nanmax(np.abs(full))
        for k in (1, 3, 5, 6):
            r, error = kernels.forward_error(X.T, model.params_, k)
            assert r.dtype == error.dtype == dtype
            np.testing.assert_allclose(r.T, full, rtol=0, atol=tolerance)
            np.testing.assert_array_equal(np.isnan(r.T), np.isnan(full))
            squared = kernels.squared_error(X, model.params_, k)
            valid = ~np.isnan(X).any(axis=1)  # an invalid pixel's error is NaN at every k (squared_error's is 0 at k = d)
            np.testing.assert_allclose(error[valid], squared[valid], rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-6 * np.nanmax(squared))
            assert np.isnan(error[~valid]).all()
            shifted, shifted_error = kernels.forward_error(X[7:].T, model.params_, k)  # other blocks
            np.testing.assert_array_equal(shifted, r[:, 7:])
            np.testing.assert_array_equal(shifted_error, error[7:])


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_rotations_error_is_the_same_bits_in_any_block(seed, dtype):
    """Above ``COMPILED_FEATURES`` a map without curved steps (PCA, or a PPA of degree 1) goes through the GEMM, then
    its bias and error in one compiled pass: its outputs are ``forward``'s bit for bit, its error the sum of the squared
    outputs ``k..d-1`` in order of the components, NaN where a pixel is, also alone in a block (a chunk's last pixel,
    where its pixel count is one more than a multiple of the kernels' block: an einsum over a one-pixel block summed
    its contiguous row pairwise, other bits), and then the same numbers as among others (float64)."""
    from ppa_xr import PPA
    from ppa_xr.core import kernels

    from .conftest import curved_sample

    d = kernels.COMPILED_FEATURES + 4
    X = curved_sample(3000, d=d, seed=seed)
    model = PPA(degree=1, random_state=0).fit(X[:2000])
    x = np.ascontiguousarray(X[2000:2300].T, dtype=dtype)
    x[3, 5] = np.nan
    for params in (model.params_, model.params_.pca()):
        for k in (1, 3, d - 1, d):
            r, error = kernels.forward_error(x, params, k)
            full = kernels.forward(x.T, params)
            np.testing.assert_array_equal(r, full.T)
            expected = 0 * full[:, 0]  # NaN where the pixel is, at k = d too
            for j in range(k, d):  # the definition, in order of the components
                expected += full[:, j] * full[:, j]
            np.testing.assert_array_equal(error, expected)
            assert np.isnan(error[5]) and np.isnan(r[:, 5]).all() and not np.isnan(np.delete(error, 5)).any()
            for i in (0, 6, 299):
                alone, alone_error = kernels.forward_error(np.ascontiguousarray(x[:, i : i + 1]), params, k)
                np.testing.assert_array_equal(alone_error[0], sum((alone[j, 0] * alone[j, 0] for j in range(k, d)), 0 * alone[0, 0]))
                if dtype == np.float64:  # single-precision BLAS rounds the outputs by the call's size
                    np.testing.assert_array_equal(alone[:, 0], r[:, i])
                    np.testing.assert_array_equal(alone_error[0], error[i])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_pixels_error_is_the_same_alone_in_a_block(seed):
    """A curved map above ``COMPILED_FEATURES`` (the report's PPA maps, through ``forward_and_error``) and
    ``squared_error`` give a pixel alone in its block (a chunk's last pixel, where its pixel count is one more than a
    multiple of the kernels' block) the same error bit for bit as among others, outputs too (float64: single-precision
    BLAS rounds its products by the call's size): the errors' sums run row after row for any count of pixels, where an
    einsum over a single column summed it pairwise."""
    from ppa_xr import PPA
    from ppa_xr.core import kernels

    from .conftest import curved_sample

    d = kernels.COMPILED_FEATURES + 4
    X = curved_sample(3000, d=d, seed=seed)
    model = PPA(random_state=0).fit(X[:2000])
    assert any(p < d - 1 for p in model.params_.curved_steps())
    x = np.ascontiguousarray(X[2000:2200].T)
    for k in (1, 3, d - 1):
        r, error = kernels.forward_error(x, model.params_, k)
        squared = kernels.squared_error(x.T, model.params_, k)
        for i in range(0, 200, 7):
            alone, alone_error = kernels.forward_error(np.ascontiguousarray(x[:, i : i + 1]), model.params_, k)
            np.testing.assert_array_equal(alone[:, 0], r[:, i])
            np.testing.assert_array_equal(alone_error[0], error[i])
            np.testing.assert_array_equal(kernels.squared_error(x.T[i : i + 1], model.params_, k)[0], squared[i])


@pytest.mark.parametrize("weighted", [False, True])
def test_error_curves_give_the_outputs_too(weighted):
    """``compare_errors_and_forward``: ``compare_errors`` and both maps' outputs from the same passes, up to rounding,
    at any scale of the data (it compares on data divided by a power of two, exactly undone for the outputs)."""
    from ppa_xr import PPA
    from ppa_xr.core import errors, kernels

    from .conftest import curved_sample

    model = PPA(random_state=0).fit(curved_sample(5000, d=6))
    X = curved_sample(4000, d=6, seed=1)
    weights = np.random.default_rng(2).uniform(0.5, 2, len(X)) if weighted else None
    for scale in (1.0, 1e150):
        params = model.params_.scaled(scale)
        comparison, r_ppa, r_pca, _, _ = errors.compare_errors_and_forward(params, X * scale, weights)
        alone = errors.compare_errors(params, X * scale, weights=weights)
        for field in ("ppa", "pca", "relative", "se"):
            np.testing.assert_allclose(getattr(comparison, field), getattr(alone, field), rtol=1e-9)
        for r, method in ((r_ppa, params), (r_pca, params.pca())):
            full = kernels.forward(X * scale, method)
            np.testing.assert_allclose(r, full, rtol=0, atol=1e-13 * np.abs(full).max())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_error_curves_from_a_feature_major_copy_are_the_same_bits(seed):
    """``compare_errors_and_forward(..., columns=)``: the passes' scaled copy made from the caller's feature-major
    copy of the rows (the report's) gives every number the strided copy of the rows gives, bit for bit, at any
    scale (the scaling by a power of two is the same product of the same values, only laid out otherwise)."""
    from ppa_xr import PPA
    from ppa_xr.core import errors, kernels

    from .conftest import curved_sample

    d = 40 + 7 * seed  # above COMPILED_FEATURES and around it: both kinds of pass
    model = PPA(random_state=seed).fit(curved_sample(3000, d=d, seed=seed))
    X = curved_sample(2500 + 37 * seed, d=d, seed=seed + 10)
    for scale in (1.0, 1e150, 1e-200):
        params, rows = model.params_.scaled(scale), X * scale
        columns = kernels.feature_major(rows, np.dtype(np.float64))
        plain = errors.compare_errors_and_forward(params, rows, None, 3)
        shared = errors.compare_errors_and_forward(params, rows, None, 3, columns)
        for field in ("ppa", "pca", "relative", "se"):
            np.testing.assert_array_equal(getattr(shared[0], field), getattr(plain[0], field))
        assert shared[0].spread == plain[0].spread
        for ours, theirs in zip(shared[1:], plain[1:]):
            np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(columns, rows.T)  # the caller's copy is left as it was


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_curved_steps_by_one_test_over_all_steps(seed):
    """Which steps have a polynomial, found by one test over every step's rows (the comparisons rescale a model per
    call, 4 ms a time at 198 features step by step): the steps with a nonzero coefficient or bias, as plain ints."""
    from ppa_xr import PPA

    from .conftest import curved_sample

    # every step curved: least squares (the default keeps no curve where every axis after it is noise)
    params = PPA(random_state=seed, degree=3, configuration="fixed").fit(curved_sample(3000, d=7, seed=seed)).params_
    arrays = params.arrays()
    arrays["forward"][2] = 0.0
    arrays["forward_bias"][2, 4] = 1e-300  # a bias alone makes a step curved
    arrays["forward"][4] = 0.0
    arrays["forward_bias"][4] = 0.0  # a straight step
    edited = type(params)(**arrays, tails=params.tails)
    for p in (params, edited, edited.scaled(0.25), edited.pca()):
        expected = [q for q in range(p.n_features - 1) if p.forward[q].any() or p.forward_bias[q].any()]
        assert p.curved_steps() == expected and all(type(q) is int for q in expected)
    assert edited.curved_steps() == [0, 1, 2, 3, 5] and edited.pca().curved_steps() == []


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_suffix_squares_are_numpys_sums(dtype, seed):
    """The error curves' running sums between two curved steps, compiled: numpy's ``np.add(e, np.square(r))`` row by
    row bit for bit (no fused multiply-add), NaN and inf carried, on rows of a larger buffer and on a first step at 0."""
    from ppa_xr.core import compiled

    rng = np.random.default_rng(seed)
    r = (rng.normal(size=(9, 777)) * np.logspace(-3, 3, 9)[:, None]).astype(dtype)
    r[2, 5], r[6, 7] = np.nan, np.inf
    for p, first in ((8, 1), (5, 2), (3, 3), (0, 1)):
        start = (rng.normal(size=(9, 777)) ** 2).astype(dtype)
        expected, got = start.copy(), start.copy()
        expected[p - 1] += np.square(r[p])
        for j in range(p - 1, first - 1, -1):
            np.add(expected[j], np.square(r[j]), out=expected[j - 1])
        compiled.suffix_squares(r, got, p, first)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_values_counted_in_one_pass_as_the_numpy_definition(seed):
    """``discrete_columns``'s count (one compiled pass over the sorted rows) is that of its numpy definition: a
    finite value, and a step up between two finite neighbours, with NaN, +-inf, signed zeros, all-NaN, one row."""
    from ppa_xr.core.entropy import column_sorts

    rng = np.random.default_rng(seed)
    for _ in range(200):
        n, d = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        X = rng.integers(-4, int(rng.integers(1, 30)), size=(n, d)) * 0.5
        mask = rng.random((n, d))
        X[mask < 0.1], X[(mask > 0.1) & (mask < 0.15)], X[(mask > 0.15) & (mask < 0.2)] = np.nan, np.inf, -np.inf
        X[(mask > 0.2) & (mask < 0.25)] = -0.0
        if rng.random() < 0.1:
            X[:, 0] = np.nan
        S = column_sorts(X)
        finite = np.isfinite(S)
        with np.errstate(invalid="ignore"):
            expected = ((np.diff(S, axis=0) > 0) & finite[1:] & finite[:-1]).sum(axis=0) + finite.any(axis=0)
        got = np.empty(d, np.int64)
        compiled.distinct_finite(np.ascontiguousarray(S.T), got)
        np.testing.assert_array_equal(got, expected)


def test_densities_read_finiteness_off_the_sorted_columns():
    """Where the sorted columns' first and last rows are finite every row is kept without testing each; a NaN or an
    inf anywhere still drops its row (the same densities as from the complete rows alone)."""
    from ppa_xr.core.entropy import EqualMassBins, column_sorts

    rng = np.random.default_rng(3)
    X = rng.normal(size=(5000, 3))
    fitted = EqualMassBins.fit(X, sorted_columns=column_sorts(X))
    np.testing.assert_array_equal(fitted.edges, EqualMassBins.fit(X).edges)
    for bad in (np.nan, np.inf, -np.inf):
        Y = X.copy()
        Y[17, 1] = bad
        fitted = EqualMassBins.fit(Y, sorted_columns=column_sorts(Y))
        assert fitted.n == 4999
        np.testing.assert_array_equal(fitted.edges, EqualMassBins.fit(np.delete(Y, 17, axis=0)).edges)


def test_one_sort_serves_the_quantization_test_and_the_densities():
    from ppa_xr.core.entropy import (
        EqualMassBins,
        column_sorts,
        discrete_columns,
    )

    rng = np.random.default_rng(5)
    n = 20_000
    X = np.column_stack([np.round(rng.normal(size=n) * 30), rng.integers(0, 5, n), rng.normal(size=n), np.full(n, 3.0), np.round(rng.normal(size=n)) / 4])
    X[::97, 0], X[5, 1], X[7, 4] = np.nan, np.inf, -0.0
    S = column_sorts(X)
    np.testing.assert_array_equal(S, np.sort(X, axis=0))
    discrete = discrete_columns(X)
    np.testing.assert_array_equal(discrete_columns(X, S), discrete)
    finite = X[np.isfinite(X).all(axis=1)][:, 2:3]
    given, sorted_here = EqualMassBins.fit(finite, sorted_columns=column_sorts(finite)), EqualMassBins.fit(finite)
    np.testing.assert_array_equal(given.edges, sorted_here.edges)
    np.testing.assert_array_equal(given.log_density, sorted_here.log_density)
    # in place where the columns are contiguous (the report's own outputs): the same sort, no copy; a copy otherwise
    owned = np.array(X.T, order="C").T
    in_place = column_sorts(owned, overwrite=True)
    assert np.shares_memory(in_place, owned)
    np.testing.assert_array_equal(in_place, S)
    rows = np.array(X)
    np.testing.assert_array_equal(column_sorts(rows, overwrite=True), S)
    np.testing.assert_array_equal(rows, X)  # pixel-major: its columns are strided, so it is copied, not sorted
