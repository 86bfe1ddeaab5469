"""Uniform samples of a cube's valid pixels: bottom-k by pixel key, one pass over the chunks, any chunking.

A pixel is valid when every feature is finite and not nodata. Every pixel
gets a uniform key, a hash of the seed and its global index
(``ppa_xr.core.keys.pixel_keys``), and the ``n`` smallest keys are kept, merged
in a tree over the chunks: the same cube and seed give the same sample under
any chunking and scheduler. Pooled over several cubes (:func:`sample_cubes`),
the smallest keys of the union are a uniform sample of all their pixels.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import dask
import numpy as np
import xarray as xr

from ..core import checks, compiled
from ..core.checks import warn_user
from ..core.spec import RANDOM_STATE
from ..core.keys import FitSample, PixelSample, exclusion, row_digest, same_row
from .inputs import feature_array, spatial_dims

#: pixels a fit samples when ``n_samples`` is not given, at most :data:`FIT_SHARE` of the valid pixels
DEFAULT_SAMPLES = 200_000
#: the share of a cube's valid pixels a fit samples at most by default: the others stay held out, so
#: ``evaluate``, the shift check and the report estimate on pixels the fit never saw on every scene
FIT_SHARE = 0.5
#: fewer held-out pixels than this give no stable estimate of an error curve or of a marginal density:
#: ``evaluate`` refuses, the shift check stays silent and the report falls back to the fitting sample
MIN_HELD_OUT = 1000


#: spatial blocks a cube is cut into for the degree selection's grouped cross-validation
N_BLOCKS = 100


@dataclass(frozen=True)
class Sample:
    """Sampled pixels ``values`` (n, d) in order of their ``keys``, the spatial block of each
    (``groups``), their flat ``index``, valid pixels seen, and which pixels they are (``drawn``)."""

    values: np.ndarray
    keys: np.ndarray
    groups: np.ndarray
    index: np.ndarray
    n_valid: int
    drawn: PixelSample


@dataclass(frozen=True)
class _Layout:
    """Global shape of the pixel dims and how many blocks each is cut into (1: not blocked)."""

    shape: tuple[int, ...]
    tiles: tuple[int, ...]

    @classmethod
    def of(cls, da: xr.DataArray, dim: Hashable) -> _Layout:
        """Blocks over the cube's :func:`~ppa_xr.cube.inputs.spatial_dims` (pixels of one place at other
        times share a block), about ``ppa_xr.cube.sampling.N_BLOCKS`` in all."""
        pixel_dims = [d for d in da.dims if d != dim]
        blocked = [d for d in spatial_dims(da, dim) if da.sizes[d] > 1]
        per_dim = N_BLOCKS ** (1 / max(len(blocked), 1))
        tiles = tuple(max(1, min(da.sizes[d], round(per_dim))) if d in blocked else 1 for d in pixel_dims)
        return cls(tuple(da.sizes[d] for d in pixel_dims), tiles)

    def lines(self, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, tuple[int, int, int]]:
        """A chunk at ``offsets`` as lines of pixels along the last pixel dim (C order): the global flat index of each
        line's first pixel, each line's block id over the other dims, and the last dim's (offset, size, tiles); a
        pixel ``c`` of line ``r`` is pixel ``start[r] + c`` of block ``line_block[r] tiles + (offset + c) tiles // size``."""
        index, block = np.zeros(1, np.int64), np.zeros(1, np.int64)
        for start, size, total, tiles in zip(offsets[:-1], sizes[:-1], self.shape[:-1], self.tiles[:-1]):
            position = np.arange(start, start + size, dtype=np.int64)
            index = np.add.outer(index * total, position).ravel()
            block = np.add.outer(block * tiles, position * tiles // total).ravel()
        last = (offsets[-1], self.shape[-1], self.tiles[-1]) if self.shape else (0, 1, 1)
        return index * last[1] + last[0], block, last


def fitted_shares(da: xr.DataArray, dim: Hashable, sample: FitSample | None) -> tuple[PixelSample, ...]:
    """The shares of a model's fitting sample drawn from this cube: same pixel grid, and the values
    of the share's witness pixel (its smallest key) unchanged here, so another scene or date on the
    same grid is not mistaken for the fitting cube (older records without a witness match by grid)."""
    if sample is None:
        return ()
    pixel_dims = [d for d in da.dims if d != dim]
    shares = sample.of_shape(tuple(da.sizes[d] for d in pixel_dims))
    return tuple(share for share in shares if share.witness is None or _witness_holds(da, dim, pixel_dims, share.witness))


def _witness_holds(da: xr.DataArray, dim: Hashable, pixel_dims: list, witness: tuple[int, str]) -> bool:
    position = np.unravel_index(witness[0], [da.sizes[d] for d in pixel_dims])
    values = np.asarray(da.isel(dict(zip(pixel_dims, map(int, position)))).transpose(dim).values)
    return bool(np.isfinite(values).all()) and same_row(values, witness[1])


def _smallest(keys: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` smallest ``keys`` (all of them when there are fewer), ascending."""
    return np.sort(np.argpartition(keys, n)[:n]) if len(keys) > n else np.arange(len(keys))


def _block_sample(block: np.ndarray, seed: int, offsets: tuple[int, ...], layout: _Layout, n: int, exclude: tuple[PixelSample, ...]) -> tuple:
    """The ``n`` valid pixels of one chunk with the smallest keys (none of ``exclude``): keys, values, blocks, flat indices,
    valid count. Keys do not depend on values: the ``n``-th smallest of the chunk's free pixels bounds the sample when
    they are all valid, and one compiled pass tests, keys and copies them (:func:`ppa_xr.core.compiled.sample_candidates`);
    where some are not, the kept rows are copied in a second pass."""
    pixel_shape = block.shape[:-1]
    width = pixel_shape[-1] if pixel_shape else 1
    lines = int(np.prod(pixel_shape[:-1], dtype=np.int64))
    bands = np.moveaxis(block, -1, 0).reshape(block.shape[-1], lines, width)  # a view, but where leading pixel dims do not merge
    (starts, line_blocks, last), excluded = layout.lines(offsets, pixel_shape), exclusion(exclude)
    keys, free = compiled.chunk_keys(starts, width, seed, *excluded)
    free_keys = keys[free]
    bound = np.partition(free_keys, n - 1)[n - 1] if len(free_keys) > n else np.uint64(2**64 - 1)
    rows, keys, values, copied = compiled.sample_candidates(bands, keys, free, bound, min(n, len(free_keys)))
    if copied == min(n, len(keys)):  # the n smallest free keys are all valid pixels: those copied
        kept = np.flatnonzero(keys <= bound)
        values = values[:copied]
    else:
        kept = _smallest(keys, n)
        values = compiled.gather_pixels(bands, rows[kept])
    index, blocks = compiled.pixel_index(rows[kept], width, starts, line_blocks, *last)
    return keys[kept], values, blocks, index, len(keys)


def _merge_samples(a: tuple, b: tuple, n: int) -> tuple:
    """The ``n`` smallest keys of two chunk samples (keys are distinct: those up to the ``n``-th smallest), each
    part's rows in their order; only the kept rows are copied, once (:func:`ppa_xr.core.compiled.merge_within`)."""
    keys = np.concatenate([a[0], b[0]])
    bound = np.partition(keys, n - 1)[n - 1] if len(keys) > n else np.uint64(2**64 - 1)
    return *compiled.merge_within(bound, *a[:4], *b[:4]), a[4] + b[4]


def sample_valid_pixels(
    obj: xr.DataArray | xr.Dataset, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = RANDOM_STATE,
    return_groups: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """A uniform random sample (without replacement) of valid pixels, as ``(n, d)``.

    A pixel is valid when every feature is finite and not nodata. Every pixel
    gets a uniform key, a hash of ``random_state`` and its global index
    (``ppa_xr.core.keys.pixel_keys``), and the ``n_samples`` smallest keys are kept (a
    bottom-k sample), in key order: one pass over the chunks, merged in a tree,
    memory about ``n_samples x d`` per chunk in flight; the cube itself is never
    loaded. The same cube and seed give the same sample under any chunking and
    scheduler. With ``return_groups`` the spatial block of each sampled pixel
    (about ``ppa_xr.cube.sampling.N_BLOCKS`` blocks over x/y) is returned too.

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        The cube, features along ``dim``.
    dim : hashable
        The feature dimension.
    n_samples : int, optional
        Pixels to draw (default up to 200,000; all of a smaller scene).
    random_state : int, Generator or None
        Seeds the keys (default 0, as every ``random_state`` here; None: fresh randomness).
    return_groups : bool
        Also return each pixel's spatial block.

    Returns
    -------
    np.ndarray or tuple of np.ndarray
        The pixels ``(n, d)`` in key order (and their blocks ``(n,)``).
    """
    sample = sample_features(feature_array(obj, dim), dim, n_samples, random_state)
    return (sample.values, sample.groups) if return_groups else sample.values


def sample_features(
    da: xr.DataArray, dim: Hashable, n_samples: int | None, random_state: int | None, exclude: tuple[PixelSample, ...] = (),
    seed: int | None = None, max_chunks: int | None = None, empty_ok: bool = False, default: int = DEFAULT_SAMPLES, warn: bool = True,
) -> Sample:
    """:func:`sample_valid_pixels` of a cube already prepared by :func:`feature_array`.

    ``exclude``: leave out the pixels of a model's fitting sample drawn from
    this cube (:func:`fitted_shares`), for held-out estimates; ``seed``
    replaces the one drawn from ``random_state`` (to draw a recorded sample
    again); ``max_chunks``: read only that many chunks, chosen at random (a
    quick sample that costs a few chunks, not a pass over the cube);
    ``empty_ok``: return an empty sample instead of raising when no pixel is
    valid. ``n_samples=None``: up to ``default`` pixels, all valid pixels of
    a smaller scene without a warning (an explicit larger request warns, unless not ``warn``).
    """
    rng = np.random.default_rng(random_state)
    sample = _draw(da, dim, _checked_count(n_samples, default), _seed(rng) if seed is None else seed, exclude, max_chunks, rng)
    _check_found(sample.n_valid, n_samples, "cube has", empty_ok, warn=warn and max_chunks is None)
    return sample


def held_out(
    da: xr.DataArray, dim: Hashable, exclude: tuple[PixelSample, ...], n_samples: int | None, random_state: int | None,
    max_chunks: int | None = None, default: int = DEFAULT_SAMPLES,
) -> Sample:
    """The one held-out sampler (``evaluate``, the shift check, the report): up to ``n_samples`` valid pixels of
    a cube outside the shares of a model's fitting sample drawn from it (``exclude``: :func:`fitted_shares`),
    from every chunk or from ``max_chunks`` random ones. Whether they are enough is :func:`shortfall`'s to say."""
    if max_chunks is not None:
        max_chunks = checks.integer(max_chunks, "max_chunks (chunks to read, or None for every chunk)", 1)
    if n_samples is not None:
        n_samples = checks.integer(n_samples, f"n_samples (held-out pixels; at least {MIN_HELD_OUT} for a stable estimate)", MIN_HELD_OUT)
    sample = sample_features(da, dim, n_samples, random_state, exclude=exclude, max_chunks=max_chunks, empty_ok=True, default=default, warn=False)
    if n_samples is not None and max_chunks is None and MIN_HELD_OUT <= sample.n_valid < n_samples:  # enough, but fewer than asked
        warn_user(f"only {sample.n_valid} valid pixels (asked for n_samples={n_samples}) lie outside the model's fitting sample; "
                  "using all of them", UserWarning)
    return sample


def shortfall(sample: Sample, chunks: int | None = None, minimum: int = MIN_HELD_OUT) -> str | None:
    """Why ``sample`` is too small for a held-out estimate (fewer than ``minimum`` pixels, :data:`MIN_HELD_OUT`), or None."""
    if sample.n_valid >= minimum:
        return None
    where = f" in the {chunks} chunks read" if chunks else ""
    return (f"only {sample.n_valid} valid pixels of this cube lie outside the model's fitting sample{where}, fewer than the "
            f"{minimum} a held-out estimate needs; " + ("read more chunks (max_chunks=None)" if chunks else
            "fit on fewer pixels (n_samples) to leave more held out, or evaluate on another scene"))


def _seed(rng: np.random.Generator) -> int:
    """The key seed drawn from ``random_state``'s generator: the one place a sample's seed comes from."""
    return int(rng.integers(2**63))


def _checked_count(n_samples: int | None, default: int = DEFAULT_SAMPLES) -> int:
    return checks.integer(default if n_samples is None else n_samples, "n_samples", 1)


def _check_found(count: int, n_samples: int | None, what: str, empty_ok: bool = False, warn: bool = True) -> None:
    """No valid pixel is an error (unless ``empty_ok``); fewer than an explicit ``n_samples`` a warning."""
    if count == 0 and not empty_ok:
        raise ValueError(f"the {what} no valid pixel (every pixel has a NaN or nodata feature)")
    if warn and n_samples is not None and count < n_samples:
        warn_user(f"only {count} valid pixels (asked for n_samples={n_samples}); using all of them", UserWarning)


def _draw(da: xr.DataArray, dim: Hashable, n: int, seed: int, exclude: tuple[PixelSample, ...], max_chunks: int | None, rng) -> Sample:
    """The bottom-``n`` sample of the cube's valid pixels under ``seed``, in one pass over its chunks (or ``max_chunks``)."""
    return _drawn(dask.compute(_lazy_draw(da, dim, n, seed, exclude, max_chunks, rng))[0], seed, _Layout.of(da, dim))


def _lazy_draw(da: xr.DataArray, dim: Hashable, n: int, seed: int, exclude: tuple[PixelSample, ...], max_chunks: int | None, rng):
    """:func:`_draw`'s reduction, not yet computed (a delayed tuple, or the tuple itself for an in-memory cube)."""
    layout = _Layout.of(da, dim)
    da = da.transpose(..., dim)
    if da.chunks is None:
        return _block_sample(np.asarray(da.values), seed, (0,) * (da.ndim - 1), layout, n, exclude)
    data = da.data.rechunk({da.ndim - 1: -1})
    starts = [np.cumsum((0,) + c[:-1]) for c in data.chunks[:-1]]
    blocks = data.to_delayed()
    chosen = list(np.ndindex(blocks.shape))
    if max_chunks is not None and max_chunks < len(chosen):
        chosen = [chosen[i] for i in np.sort(rng.choice(len(chosen), max_chunks, replace=False))]
    parts = [dask.delayed(_block_sample)(blocks[i], seed, tuple(int(s[j]) for s, j in zip(starts, i)), layout, n, exclude) for i in chosen]
    while len(parts) > 1:  # tree reduction: at most n x d per merge
        pairs = [parts[i : i + 2] for i in range(0, len(parts), 2)]
        parts = [dask.delayed(_merge_samples)(*pair, n) if len(pair) == 2 else pair[0] for pair in pairs]
    return parts[0]


def _drawn(result: tuple, seed: int, layout: _Layout) -> Sample:
    keys, values, groups, index, count = result
    order = np.argsort(keys)  # the keys of one cube are distinct (a bijection of the pixel index): one order
    values, keys, index = values[order], keys[order], index[order]
    witness = (int(index[0]), row_digest(values[0])) if len(keys) else None
    return Sample(values, keys, groups[order], index, count, PixelSample(seed, int(keys.max(initial=0)), len(keys), layout.shape, witness))


@dataclass(frozen=True)
class Pooled:
    """A sample of several cubes: the rows (n, d), their spatial blocks (``groups``, distinct per cube), the
    record of each cube's share (``sample``), each row's cube and flat pixel index, and the results of the
    reductions computed in the same pass (``along``)."""

    values: np.ndarray
    groups: np.ndarray
    sample: FitSample
    cube: np.ndarray
    index: np.ndarray
    along: Any = None

    def weights(self, cubes: list[xr.DataArray], dim: Hashable, weights: xr.DataArray | Sequence[xr.DataArray]) -> np.ndarray:
        """Each row's weight, read from ``weights`` (a DataArray over some of the pixel dimensions, e.g.
        ``cos(lat)``, broadcast to each cube; or one per cube) at the row's pixel, matched by label
        (:func:`weights_at`): only the chunks of the sampled pixels are computed."""
        per_cube = [weights] * len(cubes) if isinstance(weights, xr.DataArray) else list(weights) if isinstance(weights, (list, tuple)) else [weights]
        if not all(isinstance(w, xr.DataArray) for w in per_cube):
            raise ValueError(f"weights must be a DataArray over the cube's pixel dimensions, e.g. np.cos(np.deg2rad(cube.lat)) "
                             f"(a DataArray, not its .values), or one such DataArray per cube; got {type(weights).__name__}")
        if len(per_cube) != len(cubes):
            raise ValueError(f"weights: give one DataArray for every cube, or one for all; got {len(per_cube)} for {len(cubes)} cubes")
        parts = [weights_at(da, dim, w, self.index[self.cube == i], checked=False) for i, (da, w) in enumerate(zip(cubes, per_cube))]
        parts = [part if part.dtype.kind in "biuf" else checks.row_weights(part, len(part), "weights") for part in parts]
        out = np.empty(len(self.index), dtype=np.result_type(*parts))
        for i, part in enumerate(parts):
            out[self.cube == i] = part
        return checks.row_weights(out, len(out), "weights at the sampled pixels")


def weights_at(da: xr.DataArray, dim: Hashable, weights: xr.DataArray, index: np.ndarray, checked: bool = True) -> np.ndarray:
    """``weights`` at the pixels of ``da`` with these flat indices (over its pixel dims, C order), matched by label
    as xarray aligns: along a dimension both index, the weights' labels of the cube's pixels (pixels the weights
    lack are refused, their extra labels ignored); along one without labels, by position where the sizes agree.
    Only the sampled pixels' weights are read (a lazy DataArray computes only their chunks); ``checked``: through
    :func:`~ppa_xr.core.checks.row_weights`, else as read (their own dtype)."""
    pixel_dims = [d for d in da.dims if d != dim]
    if not isinstance(weights, xr.DataArray) or not set(weights.dims) <= set(pixel_dims):
        raise ValueError(f"weights must be a DataArray over the cube's pixel dimensions {pixel_dims} (e.g. np.cos(np.deg2rad(cube.lat))), "
                         f"got {type(weights).__name__} with dims {getattr(weights, 'dims', None)}")
    position = np.unravel_index(index, [da.sizes[d] for d in pixel_dims])
    where = {d: xr.DataArray(_label_positions(da, weights, d)[p], dims="pixel") for d, p in zip(pixel_dims, position) if d in weights.dims}
    values = np.asarray(weights.isel(where).broadcast_like(xr.DataArray(np.empty(len(index)), dims="pixel")).values)
    return checks.row_weights(values, len(index), "weights at the sampled pixels") if checked else values


def over_features(da: xr.DataArray, dim: Hashable, weights: Any) -> bool:
    """Whether ``weights`` weigh the features of ``da``: a DataArray over ``dim`` or over per-feature coordinates
    along it (the levels of a stacked dimension, e.g. ``lat`` of ``cell = (lat, lon)``), not over its pixels."""
    if not isinstance(weights, xr.DataArray) or not weights.dims:
        return False
    along = {dim} | {name for name, coord in da.coords.items() if coord.dims == (dim,)}
    return set(weights.dims) <= along and not set(weights.dims) & (set(da.dims) - {dim})


def feature_weights_at(da: xr.DataArray, dim: Hashable, weights: xr.DataArray) -> np.ndarray:
    """``weights`` (:func:`over_features`) at each feature of ``da``, (d,), matched by label as xarray aligns (along a
    stacked ``dim``, by its levels' labels: ``cos(lat)`` over ``lat`` weighs every cell of that latitude); checked by
    :func:`~ppa_xr.core.checks.row_weights`."""
    where = {}
    for d in weights.dims:
        labels = da[d].values if d in da.coords else np.arange(da.sizes[dim])
        if d in weights.indexes:
            found = np.asarray(weights.indexes[d].get_indexer(labels))
            if (missing := found < 0).any():
                raise ValueError(f"feature weights lack {int(missing.sum())} of the cube's {d!r} labels (e.g. "
                                 f"{', '.join(map(str, np.asarray(labels)[missing][:3]))}): weights are matched by label, as xarray "
                                 f"aligns; give a weight for every feature, e.g. np.cos(np.deg2rad(cube.{d}))")
        elif weights.sizes[d] == da.sizes[dim]:
            found = np.arange(da.sizes[dim])
        else:
            raise ValueError(f"feature weights along {d!r} have {weights.sizes[d]} entries and the cube {da.sizes[dim]} features along "
                             f"{dim!r}, without labels to match: give weights with {d!r} coordinates")
        where[d] = xr.DataArray(found, dims="feature")
    values = np.asarray(weights.isel(where).broadcast_like(xr.DataArray(np.empty(da.sizes[dim]), dims="feature")).values)
    return checks.row_weights(values, da.sizes[dim], "feature weights")


def _label_positions(da: xr.DataArray, weights: xr.DataArray, d: Hashable) -> np.ndarray:
    """Where each of the cube's positions along ``d`` lies in ``weights``: by label where both have an index
    along ``d`` (xarray's alignment), else by position, for equal sizes only."""
    if d not in da.indexes or d not in weights.indexes:
        if weights.sizes[d] != da.sizes[d]:
            raise ValueError(f"weights along {d!r} have {weights.sizes[d]} entries and the cube {da.sizes[d]}, and they cannot "
                             f"be matched by label ({'the cube' if d not in da.indexes else 'the weights'} have no {d!r} coordinate): "
                             f"give weights over the cube's own {d!r}, e.g. computed from its coordinates")
        return np.arange(da.sizes[d])
    ours, theirs = da.indexes[d], weights.indexes[d]
    if not theirs.is_unique:
        raise ValueError(f"the weights' {d!r} labels repeat (e.g. {', '.join(map(str, theirs[theirs.duplicated()][:3]))}): each "
                         f"pixel needs one weight; drop the repeats, e.g. weights.drop_duplicates({d!r})")
    found = np.asarray(theirs.get_indexer(ours))
    if (missing := found < 0).any():
        raise ValueError(f"weights lack {int(missing.sum())} of the cube's {len(ours)} {d!r} labels (e.g. "
                         f"{', '.join(map(str, ours[missing][:3]))}): weights are matched to pixels by label, as xarray aligns. "
                         f"Give weights at every pixel of the cube, e.g. np.cos(np.deg2rad(cube.lat)) from its own coordinates, "
                         f"or weights.reindex({d}=cube.{d}, method='nearest') where the labels differ by rounding")
    return found


def sample_cubes(
    cubes: list[xr.DataArray], dim: Hashable, n_samples: int | None, random_state: int | None, along: Any = None,
) -> Pooled:
    """One uniform sample of the valid pixels of several cubes (any grids), as a :class:`Pooled`.

    Each cube's pixels get keys under their own seed (the first cube's is the
    seed a single-cube fit draws, so one cube gives :func:`sample_features`'s
    sample); the ``n_samples`` smallest keys of the union are kept, so each
    cube contributes in proportion to its valid pixels. A cube's share is
    recorded as its pixels with keys up to the largest key kept from it.
    Groups are the spatial blocks, distinct per cube. ``along``: other lazy
    reductions over the same cubes (e.g. the noise estimate's), computed in
    the same pass over their chunks.

    ``n_samples=None`` keeps up to :data:`DEFAULT_SAMPLES` pixels, and no more
    than :data:`FIT_SHARE` of the valid pixels where they number at least
    twice :data:`MIN_HELD_OUT`: the others stay held out for ``evaluate``, the
    shift check and the report. The smallest keys are a uniform sample, so
    keeping fewer of them is still one.
    """
    n = _checked_count(n_samples)
    seed = _seed(np.random.default_rng(random_state))
    seeds = [seed] + [_seed(np.random.default_rng([seed, i])) for i in range(1, len(cubes))]
    results, along = dask.compute([_lazy_draw(da, dim, n, s, (), None, None) for da, s in zip(cubes, seeds)], along)
    samples = [_drawn(result, s, _Layout.of(da, dim)) for result, s, da in zip(results, seeds, cubes)]
    valid = sum(sample.n_valid for sample in samples)
    _check_found(valid, n_samples, "cubes have" if len(cubes) > 1 else "cube has")
    if n_samples is None and valid >= 2 * MIN_HELD_OUT:
        n = min(n, int(FIT_SHARE * valid))
    keys = np.concatenate([sample.keys for sample in samples])
    cube = np.repeat(np.arange(len(cubes)), [len(sample.keys) for sample in samples])
    kept = np.argsort(keys, kind="stable")[:n]
    block_span = 1 + max(int(sample.groups.max(initial=0)) for sample in samples)
    groups = cube * block_span + np.concatenate([sample.groups for sample in samples])
    values = np.concatenate([sample.values for sample in samples])[kept]
    index = np.concatenate([sample.index for sample in samples])[kept]
    return Pooled(values, groups[kept], _shares(samples, keys[kept], cube[kept]), cube[kept], index, along)


def _shares(samples: list[Sample], kept_keys: np.ndarray, kept_cube: np.ndarray) -> FitSample:
    """Each cube's share of a pooled sample: its pixels with keys up to the largest key kept from it."""
    shares = []
    for i, sample in enumerate(samples):
        mine = kept_keys[kept_cube == i]
        witness = sample.drawn.witness if len(mine) else None  # its first row, the smallest key, is kept when any is
        shares.append(PixelSample(sample.drawn.seed, int(mine.max(initial=0)), len(mine), sample.drawn.shape, witness))
    return FitSample(tuple(shares))
