"""Uniform samples of a cube's valid pixels: bottom-k by pixel key, one pass over the chunks, any chunking.

A pixel is valid when every feature is finite and not nodata. Every pixel
gets a uniform key, a hash of the seed and its global index
(``ppa_xr.core.keys.pixel_keys``), and the ``n`` smallest keys are kept, merged
in a tree over the chunks: the same cube and seed give the same sample under
any chunking and scheduler. Pooled over several cubes (:func:`sample_cubes`),
the smallest keys of the union are a uniform sample of all their pixels.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dask
import numpy as np
import xarray as xr
from dask.base import get_scheduler, tokenize
from dask.callbacks import Callback
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph

from ..core import checks, compiled
from ..core.checks import warn_user
from ..core.spec import RANDOM_STATE
from ..core.keys import FitSample, PixelSample, exclusion, row_digest, row_digests, same_row
from ..model.labels import in_levels
from .inputs import feature_array, spatial_dims

if TYPE_CHECKING:
    from ..model import PPA

#: pixels a fit samples when ``n_samples`` is not given, at most :data:`FIT_SHARE` of the valid pixels
DEFAULT_SAMPLES = 200_000
#: the share of a cube's valid pixels a fit samples at most by default: the others stay held out, so
#: ``evaluate``, the shift check and the report estimate on pixels the fit never saw on every scene
FIT_SHARE = 0.5
#: fewer held-out pixels than this give no stable estimate of an error curve or of a marginal density:
#: ``evaluate`` refuses, the shift check stays silent and the report falls back to the fitting sample
MIN_HELD_OUT = 1000
#: held-out samples an S-mode model needs instead: its samples are time steps, few by nature, and two give an
#: estimate (its bounds say how loose)
MIN_HELD_OUT_S_MODE = 2


def min_held_out(s_mode: bool) -> int:
    """The held-out pixels (samples) an estimate needs: :data:`MIN_HELD_OUT`, or :data:`MIN_HELD_OUT_S_MODE` for an S-mode model."""
    return MIN_HELD_OUT_S_MODE if s_mode else MIN_HELD_OUT
#: which pixels a sample takes: those with every feature finite (the default), or with any (a fit with gaps,
#: ``missing="fill"``: the rows keep their gaps, NaN)
ALL_OBSERVED, ANY_OBSERVED = "all", "any"


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


def _warn_reversed(da: xr.DataArray, dim: Hashable, sample: FitSample | None, held: tuple[PixelSample, ...]) -> None:
    """Warn where a share of the fitting sample not recognised on this cube (:func:`fitted_shares`) has its witness pixel
    mirrored along some pixel dims (:func:`_witness_reversed`): the fitting cube reversed since the fit (``sortby('y')``),
    whose fitting pixels a T-mode draw would count as held out, silently (its draw finds the witness by chance only:
    :func:`witnessed`)."""
    pixel_dims = [d for d in da.dims if d != dim]
    for share in sample.of_shape(tuple(da.sizes[d] for d in pixel_dims)) if sample is not None else ():
        if share not in held and (reversed_dims := _witness_reversed(da, dim, pixel_dims, share.witness)):
            flip = ", ".join(f"{d}=slice(None, None, -1)" for d in reversed_dims)
            named = " and ".join(repr(str(d)) for d in reversed_dims)
            warn_user(f"this cube is the model's fitting cube with {named} reversed since the fit (a sortby, or a file "
                      "read the other way up): the record of its fitting pixels is by position, so they would count as held "
                      f"out and the estimate lean towards the fit. Pass it as fitted: cube.isel({flip})", UserWarning)


def _witness_holds(da: xr.DataArray, dim: Hashable, pixel_dims: list, witness: tuple[int, str], reverse: tuple[bool, ...] = ()) -> bool:
    """Whether the pixel at the witness's place (counted from the end along the dims ``reverse`` marks) holds its values."""
    sizes = [da.sizes[d] for d in pixel_dims]
    position = [n - 1 - i if back else i for i, n, back in zip(np.unravel_index(witness[0], sizes), sizes, reverse or (False,) * len(sizes))]
    values = np.asarray(da.isel(dict(zip(pixel_dims, map(int, position)))).transpose(dim).values)
    return same_row(values, witness[1])  # gaps and all: a sample with gaps (missing="fill") has witnesses with NaN


def _witness_reversed(da: xr.DataArray, dim: Hashable, pixel_dims: list, witness: tuple[int, str] | None) -> list[Hashable]:
    """The pixel dims along which the cube holds the witness pixel mirrored (a flip of ``y``, of ``x``, or both; at most
    3 dims, 7 pixels read), or none: the fitting cube reversed since the fit, whose fitting pixels a record by position
    would not find."""
    if witness is None or not 0 < len(pixel_dims) <= 3:
        return []
    position = np.unravel_index(witness[0], [da.sizes[d] for d in pixel_dims])
    movable = [i != da.sizes[d] - 1 - i for i, d in zip(position, pixel_dims)]  # a middle pixel stays put
    for reverse in itertools.product((False, True), repeat=len(pixel_dims)):
        if any(reverse) and all(m or not r for m, r in zip(movable, reverse)) and _witness_holds(da, dim, pixel_dims, witness, reverse):
            return [d for d, r in zip(pixel_dims, reverse) if r]
    return []


def _smallest(keys: np.ndarray, n: int) -> np.ndarray:
    """Positions of the ``n`` smallest ``keys`` (all of them when there are fewer), ascending."""
    return np.sort(np.argpartition(keys, n)[:n]) if len(keys) > n else np.arange(len(keys))


def _block_sample(block: np.ndarray, seed: int, offsets: tuple[int, ...], layout: _Layout, n: int, exclude: tuple[PixelSample, ...],
                  valid: str = ALL_OBSERVED) -> tuple:
    """The ``n`` valid pixels of one chunk with the smallest keys (none of ``exclude``): keys, values, blocks, flat indices,
    valid count. Keys do not depend on values: the ``n``-th smallest of the chunk's free pixels bounds the sample when
    they are all valid, and one compiled pass tests, keys and copies them (:func:`ppa_xr.core.compiled.sample_candidates`);
    where some are not, the kept rows are copied in a second pass. ``valid``: :data:`ALL_OBSERVED` or :data:`ANY_OBSERVED`."""
    pixel_shape = block.shape[:-1]
    width = pixel_shape[-1] if pixel_shape else 1
    lines = int(np.prod(pixel_shape[:-1], dtype=np.int64))
    bands = np.moveaxis(block, -1, 0).reshape(block.shape[-1], lines, width)  # a view, but where leading pixel dims do not merge
    (starts, line_blocks, last), excluded = layout.lines(offsets, pixel_shape), exclusion(exclude)
    keys, free = compiled.chunk_keys(starts, width, seed, *excluded)
    free_keys = keys[free]
    bound = np.partition(free_keys, n - 1)[n - 1] if len(free_keys) > n else np.uint64(2**64 - 1)
    rows, keys, values, copied = compiled.sample_candidates(bands, keys, free, bound, min(n, len(free_keys)), valid == ANY_OBSERVED)
    if copied == min(n, len(keys)):  # the n smallest free keys are all valid pixels: those copied
        kept = np.flatnonzero(keys <= bound)
        values = values[:copied]
    else:
        kept = _smallest(keys, n)
        values = compiled.gather_pixels(bands, rows[kept])
    index, blocks = compiled.pixel_index(rows[kept], width, starts, line_blocks, *last)
    return keys[kept], values, blocks, index, len(keys)


def _merge_samples(parts: list[tuple], n: int) -> tuple:
    """The ``n`` smallest keys of several chunk samples (keys are distinct: those up to the ``n``-th smallest), each
    part's rows in their order, parts in their order; the valid counts summed. Only the kept rows are copied, once,
    into the outputs (no temporaries of the parts' rows)."""
    keys = np.concatenate([part[0] for part in parts])
    if len(keys) <= n:  # every row kept
        return keys, *(np.concatenate([part[i] for part in parts]) for i in (1, 2, 3)), sum(part[4] for part in parts)
    bound = np.partition(keys, n - 1)[n - 1]
    kept = [part[0] <= bound for part in parts]
    ends = np.cumsum([0] + [int(mask.sum()) for mask in kept])
    out = [np.empty((ends[-1], *field.shape[1:]), field.dtype) for field in parts[0][:4]]
    for part, mask, start, stop in zip(parts, kept, ends[:-1], ends[1:]):
        for field, into in zip(part[:4], out):
            np.compress(mask, field, axis=0, out=into[start:stop])
    return *out, sum(part[4] for part in parts)


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
    max_chunks: int | None = None, default: int = DEFAULT_SAMPLES, fitted: FitSample | None = None,
) -> Sample:
    """The one held-out sampler (``evaluate``, the shift check, the report): up to ``n_samples`` valid pixels of
    a cube outside the shares of a model's fitting sample drawn from it (``exclude``: :func:`fitted_shares`),
    from every chunk or from ``max_chunks`` random ones. Whether they are enough is :func:`shortfall`'s to say.
    ``fitted``: the model's whole fitting sample, whose other shares' witness pixels are looked for among the
    drawn ones (:func:`_warn_moved`)."""
    if max_chunks is not None:
        max_chunks = checks.integer(max_chunks, "max_chunks (chunks to read, or None for every chunk)", 1)
    if n_samples is not None:
        n_samples = checks.integer(n_samples, f"n_samples (held-out pixels; at least {MIN_HELD_OUT} for a stable estimate)", MIN_HELD_OUT)
    sample = sample_features(da, dim, n_samples, random_state, exclude=exclude, max_chunks=max_chunks, empty_ok=True, default=default, warn=False)
    _warn_moved(sample.values, fitted, exclude)
    if n_samples is not None and max_chunks is None and MIN_HELD_OUT <= sample.n_valid < n_samples:  # enough, but fewer than asked
        warn_user(f"only {sample.n_valid} valid pixels lie outside the model's fitting sample, fewer than n_samples={n_samples}; "
                  "using all of them", UserWarning)
    return sample


@dataclass(frozen=True)
class Fitted:
    """What a model's record of its fitting sample says on one cube, for a held-out draw from it: the shares drawn
    from this cube (``shares``, :func:`fitted_shares`, left out) and the sample whose other shares' witness pixels
    are looked for among the drawn ones (``witnessed``, :func:`witnessed`)."""

    shares: tuple[PixelSample, ...]
    witnessed: FitSample | None

    @classmethod
    def of(cls, da: xr.DataArray, dim: Hashable, model: PPA) -> Fitted:
        """The record of ``model``'s fitting sample on the cube ``da`` (features along ``dim``); the shares' witness pixels
        are read now."""
        shares = fitted_shares(da, dim, model.sample_)
        if not model.params_.s_mode:  # an S-mode draw holds every sample, witnesses too (_warn_moved)
            _warn_reversed(da, dim, model.sample_, shares)
        return cls(shares, witnessed(model.sample_, model.params_.s_mode))

    def held_out(self, da: xr.DataArray, dim: Hashable, n_samples: int | None, random_state: int | None, max_chunks: int | None = None,
                 default: int = DEFAULT_SAMPLES) -> Sample:
        """:func:`held_out` of the cube outside these shares."""
        return held_out(da, dim, self.shares, n_samples, random_state, max_chunks, default, fitted=self.witnessed)

    def without_complete_pixels(self, da: xr.DataArray, dim: Hashable, sample: Sample, random_state: int | None,
                                max_chunks: int | None = None) -> str | None:
        """Where a :meth:`held_out` draw found no pixel, whether the cube (or the chunks it read: the same ones, drawn
        again under ``random_state`` without these shares) holds no complete pixel at all, fitted ones included: then
        what its pixels get and what to do, else None (its complete pixels were all fitted: :func:`shortfall`'s to say)."""
        if sample.n_valid or (any(share.size for share in self.shares) and
                              sample_features(da, dim, 1, random_state, max_chunks=max_chunks, empty_ok=True, warn=False).n_valid):
            return None
        return (f"no pixel of this cube{' in the chunks read' if max_chunks else ''} is complete (every band the model reads "
                "observed: no NaN or nodata): their components are NaN, and a held-out estimate measures complete pixels only. "
                "Fill the gaps first, cube.ppa.fill(model) (command line: ppa-xr fill), to transform the filled cube; measure "
                "the model on a scene with complete pixels (filled values agree with the model by construction)")


def witnessed(sample: FitSample | None, s_mode: bool) -> FitSample | None:
    """The fitting sample whose witness pixels a held-out draw is checked against (:func:`held_out`'s ``fitted``):
    an S-mode model's, whose few samples (time steps) are all drawn, so a moved fitting sample's witness always is.
    A T-mode draw of 100,000 of a scene's pixels holds the witness by chance (about 5% at 100,000 of 2 million), and
    fingerprinting every drawn row costs 0.07 s per 100,000 x 36 (a sixth of the report of a 768^2 cube): None."""
    return sample if s_mode else None


def _warn_moved(rows: np.ndarray, fitted: FitSample | None, exclude: tuple[PixelSample, ...]) -> None:
    """Warn where a drawn row is the witness pixel of a share of the fitting sample not recognised on this cube
    (:func:`fitted_shares`): the fitting cube cropped, reordered, flipped or transposed since, whose fitting pixels
    the record no longer finds, so they would count as held out (S-mode: 24 fitting months of 36 reversed lowered
    ``evaluate``'s error by 20%). A warning, not an error: another scene may hold a pixel equal in every feature."""
    witnesses = {share.witness[1] for share in (fitted.cubes if fitted else ()) if share.witness and share.size and share not in exclude}
    if witnesses and len(rows) and witnesses & row_digests(rows):
        warn_user("this cube holds a pixel of the model's fitting sample, but not where the model's record of that sample "
                  "places it: the fitting cube cropped, reordered, flipped or transposed since the fit? Its fitting pixels "
                  "then count as held out, and the estimate is biased towards the fit. Pass the cube as it was fitted "
                  "(same pixels in the same order, e.g. without .isel or .sortby) or a scene the fit never saw", UserWarning)


def shortfall(sample: Sample, chunks: int | None = None, s_mode: bool = False) -> str | None:
    """Why ``sample`` is too small for a held-out estimate (fewer than :func:`min_held_out` pixels, or samples of an
    ``s_mode`` model: its maps, e.g. time steps), or None."""
    minimum = min_held_out(s_mode)
    if sample.n_valid >= minimum:
        return None
    what = "samples (maps)" if s_mode else "valid pixels"
    where = f" in the {chunks} chunks read" if chunks else ""
    advice = ("fit on fewer maps (n_samples smaller than the record) to leave some held out, or evaluate on another period"
              if s_mode else "fit on fewer pixels (n_samples) to leave more held out, or evaluate on another scene")
    return (f"only {sample.n_valid} {what} of this cube lie outside the model's fitting sample{where}, fewer than the "
            f"{minimum} a held-out estimate needs; " + ("read more chunks (max_chunks=None)" if chunks else advice))


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


#: most chunk samples one merge of the sampling's reduction tree takes
FAN_IN = 16
#: the bytes of the chunk samples one merge may take (fewer parts where ``n x d`` is large, at least two)
MERGE_BYTES = 64 * 2**20


def _lazy_draw(da: xr.DataArray, dim: Hashable, n: int, seed: int, exclude: tuple[PixelSample, ...], max_chunks: int | None, rng,
               fuse: bool = True, valid: str = ALL_OBSERVED):
    """:func:`_draw`'s reduction, not yet computed (a delayed tuple, or the tuple itself for an in-memory cube).

    One task per chunk (:func:`_block_sample`, fused with the tasks that make
    the chunk), then a tree of merges of at most :data:`FAN_IN` parts each,
    built as one graph layer: about ``chunks (1 + 1 / (FAN_IN - 1))`` tasks,
    so the cost per chunk does not grow with the chunk count. Not ``fuse``:
    the chunks' own tasks stay apart (culled only), so other reductions of the
    same cube computed with it read each chunk once, in the same pass. ``valid``: which pixels are taken
    (:data:`ALL_OBSERVED` or :data:`ANY_OBSERVED`).
    """
    layout = _Layout.of(da, dim)
    if da.chunks is None:
        return _block_sample(np.asarray(da.transpose(..., dim).values), seed, (0,) * (da.ndim - 1), layout, n, exclude, valid)
    axis = da.get_axis_num(dim)
    data = da.data.rechunk({axis: -1})  # the chunks as they are, features anywhere: no transpose in the graph
    starts = tuple(tuple(int(s) for s in np.cumsum((0,) + c[:-1])) if i != axis else () for i, c in enumerate(data.chunks))
    parts = data.map_blocks(_chunk_sample, seed=seed, starts=starts, axis=axis, layout=layout, n=n, exclude=exclude,
                            valid=valid, meta=np.empty((0,) * data.ndim, object))
    chosen = np.array(list(np.ndindex(data.numblocks)), np.int64).reshape(-1, data.ndim)
    if max_chunks is not None and max_chunks < len(chosen):
        chosen = chosen[np.sort(rng.choice(len(chosen), max_chunks, replace=False))]
    keys = [(parts.name, *map(int, i)) for i in chosen]
    layer = f"sample-chunks-{tokenize(parts.name, chosen)}"
    chunks = parts.__dask_optimize__(parts.__dask_graph__(), keys) if fuse else parts.__dask_graph__().cull(set(keys))
    graph = HighLevelGraph.from_collections(layer, chunks, ())
    rows = min(n, int(np.prod([max(c) for i, c in enumerate(data.chunks) if i != axis], dtype=np.int64)))
    return _merge_tree(graph, layer, keys, n, rows, data.shape[axis] * data.dtype.itemsize)


def _chunk_sample(block: np.ndarray, seed: int, starts: tuple, axis: int, layout: _Layout, n: int, exclude: tuple,
                  valid: str = ALL_OBSERVED, block_id: tuple = ()) -> tuple:
    """:func:`_block_sample` of the chunk ``block_id``, features along ``axis`` (``starts``: each pixel dim's chunk
    offsets; none for the features)."""
    offsets = tuple(s[i] for a, (s, i) in enumerate(zip(starts, block_id)) if a != axis)
    return _block_sample(np.moveaxis(block, axis, -1), seed, offsets, layout, n, exclude, valid)


def _merge_tree(graph: HighLevelGraph, layer: str, keys: list, n: int, rows: int, row_bytes: int) -> Delayed:
    """The chunk samples ``keys`` (layer ``layer`` of ``graph``, at most ``rows`` rows of ``row_bytes`` each)
    merged in a tree (:func:`_merge_samples`), as one delayed tuple. Each level merges as many parts as
    :data:`MERGE_BYTES` holds, between 2 and :data:`FAN_IN`; a part never has more than ``n`` rows."""
    name, level = f"sample-merge-{layer}", 0
    merges: dict[Any, Any] = {}
    while len(keys) > 1:
        fan_in = int(np.clip(MERGE_BYTES // max(rows * row_bytes, 1), 2, FAN_IN))
        level_keys = [(name, level, i) for i in range(-(-len(keys) // fan_in))]
        merges.update({key: (_merge_samples, keys[i * fan_in : (i + 1) * fan_in], n) for i, key in enumerate(level_keys)})
        keys, rows, level = level_keys, min(n, rows * fan_in), level + 1
    if not merges:
        return Delayed(keys[0], graph, layer=layer)
    return Delayed(keys[0], HighLevelGraph({**graph.layers, name: merges}, {**graph.dependencies, name: {layer}}), layer=name)


def _drawn(result: tuple, seed: int, layout: _Layout) -> Sample:
    keys, values, groups, index, count = result
    order = np.argsort(keys)  # the keys of one cube are distinct (a bijection of the pixel index): one order
    values, keys, index = np.take(values, order, axis=0), keys[order], index[order]  # take: rows gathered 3-4x faster than values[order]
    witness = (int(index[0]), row_digest(values[0])) if len(keys) else None
    return Sample(values, keys, groups[order], index, count, PixelSample(seed, int(keys.max(initial=0)), len(keys), layout.shape, witness))


#: what :func:`~ppa_xr.core.checks.row_weights` calls weights read at the sampled pixels, in its refusals
_AT_SAMPLES = "weights at the sampled pixels"


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
        shared = " (the one weights DataArray given for every cube: give one per cube, weights=[w1, w2, ...], where their grids differ)"
        parts = [_of_cube(i, len(cubes), shared if isinstance(weights, xr.DataArray) else "", weights_at, da, dim, w,
                          self.index[self.cube == i], checked=False) for i, (da, w) in enumerate(zip(cubes, per_cube))]
        parts = [part if part.dtype.kind in "biuf" else checks.row_weights(part, len(part), "weights") for part in parts]
        out = np.empty(len(self.index), dtype=np.result_type(*parts))
        for i, part in enumerate(parts):
            out[self.cube == i] = part
        return checks.row_weights(out, len(out), _AT_SAMPLES)


def _of_cube(i: int, n: int, hint: str, read: Any, *args: Any, **kwargs: Any) -> Any:
    """``read(*args, **kwargs)`` for cube ``i`` of ``n`` pooled: a refusal names the cube (its message said "the cube"),
    with ``hint``."""
    try:
        return read(*args, **kwargs)
    except ValueError as err:
        if n == 1:
            raise
        raise ValueError(f"cube {i + 1} of {n}{hint}: {err}") from err


def weights_at(da: xr.DataArray, dim: Hashable, weights: xr.DataArray, index: np.ndarray, checked: bool = True) -> np.ndarray:
    """``weights`` at the pixels of ``da`` with these flat indices (over its pixel dims, C order), matched by label
    as xarray aligns: along a dimension both index, the weights' labels of the cube's pixels (pixels the weights
    lack are refused, their extra labels ignored); along one without labels, by position where the sizes agree.
    Only the sampled pixels' weights are read (a lazy DataArray computes only their chunks); ``checked``: through
    :func:`~ppa_xr.core.checks.row_weights`, else as read (their own dtype)."""
    pixel_dims = [d for d in da.dims if d != dim]
    if not isinstance(weights, xr.DataArray) or not set(weights.dims) <= set(pixel_dims):
        kept = (" Weights over the features weigh them in the fit (cube.ppa.fit(weights=...)), and the model keeps them: "
                "pass none here, or weights over the samples" if over_features(da, dim, weights) else "")
        raise ValueError(f"weights must be a DataArray over the cube's pixel dimensions {pixel_dims} (e.g. np.cos(np.deg2rad(cube.lat))), "
                         f"got {type(weights).__name__} with dims {getattr(weights, 'dims', None)}.{kept}")
    position = np.unravel_index(index, [da.sizes[d] for d in pixel_dims])
    where = {d: xr.DataArray(_label_positions(da, weights, d)[p], dims="pixel") for d, p in zip(pixel_dims, position) if d in weights.dims}
    values = np.asarray(weights.isel(where).broadcast_like(xr.DataArray(np.empty(len(index)), dims="pixel")).values)
    return checks.row_weights(values, len(index), _AT_SAMPLES) if checked else values


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
            found = np.asarray(in_levels(weights.indexes[d], getattr(da.indexes.get(d), "names", None)).get_indexer(labels))
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
    ours = da.indexes[d]
    theirs = in_levels(weights.indexes[d], getattr(ours, "names", None))  # a stacked dim's levels by name
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
    progress: bool = False, observed: str = ALL_OBSERVED,
) -> Pooled:
    """One uniform sample of the valid pixels of several cubes (any grids), as a :class:`Pooled`.

    Each cube's pixels get keys under their own seed (the first cube's is the
    seed a single-cube fit draws, so one cube gives :func:`sample_features`'s
    sample); the ``n_samples`` smallest keys of the union are kept, so each
    cube contributes in proportion to its valid pixels. A cube's share is
    recorded as its pixels with keys up to the largest key kept from it.
    Groups are the spatial blocks, distinct per cube. ``along``: other lazy
    reductions over the same cubes (e.g. the noise estimate's), computed in
    the same pass over their chunks. ``progress``: a progress bar of the
    pass's tasks, on the local schedulers (:func:`_task_bar`) and on a distributed client (:func:`_cluster_bar`). ``observed``: :data:`ANY_OBSERVED` takes the
    pixels with any finite feature, their gaps as they are in the rows (``missing="fill"``).

    ``n_samples=None`` keeps up to :data:`DEFAULT_SAMPLES` pixels, and no more
    than :data:`FIT_SHARE` of the valid pixels where they number at least
    twice :data:`MIN_HELD_OUT`: the others stay held out for ``evaluate``, the
    shift check and the report. The smallest keys are a uniform sample, so
    keeping fewer of them is still one.
    """
    n = _checked_count(n_samples)
    seed = _seed(np.random.default_rng(random_state))
    seeds = [seed] + [_seed(np.random.default_rng([seed, i])) for i in range(1, len(cubes))]
    with _task_bar(progress):
        # with other reductions nothing is fused, so both read each chunk through the same tasks: once
        shared = along is not None
        results, along = _computed([_lazy_draw(da, dim, n, s, (), None, None, not shared, observed) for da, s in zip(cubes, seeds)], along,
                                   optimize=not shared, progress=progress)
    samples = [_drawn(result, s, _Layout.of(da, dim)) for result, s, da in zip(results, seeds, cubes)]
    valid = sum(sample.n_valid for sample in samples)
    _check_found(valid, n_samples, "cubes have" if len(cubes) > 1 else "cube has")
    _warn_empty(samples)
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


def _warn_empty(samples: list) -> None:
    """Warn of a cube without valid pixels among pooled cubes that have some: it adds nothing to the fit, silently."""
    if empty := [i + 1 for i, sample in enumerate(samples) if sample.n_valid == 0]:
        warn_user(f"cube {', '.join(map(str, empty))} of {len(samples)} has no valid pixel (each has a NaN or nodata feature): it "
                  "adds nothing to the fit; check its nodata value and masks, or leave it out")


def _computed(draws: list, along: Any, optimize: bool, progress: bool) -> tuple[list, Any]:
    """``dask.compute(draws, along)``; with ``progress`` on a distributed client, through its futures with a bar of
    their tasks as the cluster runs them (:func:`_cluster_bar`; the local schedulers report to :class:`_TaskBar`).
    The bar draws through distributed's semi-internal hooks: where they fail, the pass goes on without it (a warning)."""
    client: Any = getattr(get_scheduler(), "__self__", None)  # a distributed client's ``get``, bound to it
    if not progress or _local_scheduler() or not hasattr(client, "gather"):
        return dask.compute(draws, along, optimize_graph=optimize)
    futures = client.compute([draws, along], optimize_graph=optimize)
    try:
        _cluster_bar(futures, client.scheduler.address)
    except Exception as err:  # the bar only: the futures run on, and their own errors come from gather
        warn_user(f"no progress bar of the sampling pass on this cluster ({type(err).__name__}: {err}); the pass goes on without it")
    return client.gather(futures)


#: the methods of distributed's ``TextProgressBar`` that :func:`_cluster_bar` draws through (not public API)
_BAR_HOOKS = ("_draw_bar", "_draw_stop")


def _cluster_bar(futures: list, scheduler: str) -> None:
    """A progress bar (``tqdm.auto``, as :class:`_TaskBar`) of every task ``futures`` need, fed by the distributed
    scheduler at ``scheduler`` (the client's, which need not be the default client; its ``Progress`` plugin, as
    ``distributed.progress`` is); returns when they are done or one failed."""
    from distributed.client import futures_of
    from distributed.diagnostics.progressbar import TextProgressBar
    from tqdm.auto import tqdm

    if not all(callable(vars(TextProgressBar).get(name)) for name in _BAR_HOOKS):
        raise AttributeError(f"this version of distributed's TextProgressBar draws through other methods than {_BAR_HOOKS}")

    class Bar(TextProgressBar):
        def _draw_bar(self, remaining: int, all: int, **kwargs: Any) -> None:
            if (bar.total, bar.n) != (all, all - remaining):  # the scheduler reports every 100 ms, done or not
                bar.total, bar.n = all, all - remaining
                bar.refresh()

        def _draw_stop(self, **kwargs: Any) -> None:
            bar.close()

    bar = tqdm(total=0, desc="sampling", unit="task")
    try:
        Bar(futures_of(futures), scheduler=scheduler)
    finally:
        bar.close()  # where the bar's connection failed or closed before the scheduler's last report


class _TaskBar(Callback):
    """A progress bar (``tqdm.auto``) of the tasks of the dask computations run inside it; dask's local schedulers
    (threads, processes, synchronous) report to it, a distributed cluster through :func:`_cluster_bar`."""

    def __init__(self, desc: str) -> None:
        super().__init__()
        self.desc = desc
        self.bar: Any = None

    def _start_state(self, dsk: Any, state: dict) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=sum(len(state[part]) for part in ("ready", "waiting", "running", "finished")), desc=self.desc, unit="task")
        self.bar.update(len(state["finished"]))

    def _posttask(self, key: Any, result: Any, dsk: Any, state: dict, worker_id: Any) -> None:
        self.bar.update(1)

    def _finish(self, dsk: Any, state: dict, errored: bool) -> None:
        self.bar.close()


def _task_bar(progress: bool) -> contextlib.AbstractContextManager:
    """A :class:`_TaskBar` of the sampling pass where ``progress`` asks for one and dask computes here with a local
    scheduler, unless a dask ``ProgressBar`` already shows the tasks (the command line's); else nothing."""
    from dask.diagnostics import ProgressBar

    shown = any(isinstance(getattr(callbacks[0], "__self__", None), ProgressBar) for callbacks in Callback.active)
    return _TaskBar("sampling") if progress and _local_scheduler() and not shown else contextlib.nullcontext()


def _local_scheduler() -> bool:
    """Whether dask computes here with one of its local schedulers (not a distributed client)."""
    scheduler = get_scheduler()
    return scheduler is None or getattr(scheduler, "__module__", "").startswith("dask.")


def _shares(samples: list[Sample], kept_keys: np.ndarray, kept_cube: np.ndarray) -> FitSample:
    """Each cube's share of a pooled sample: its pixels with keys up to the largest key kept from it."""
    shares = []
    for i, sample in enumerate(samples):
        mine = kept_keys[kept_cube == i]
        witness = sample.drawn.witness if len(mine) else None  # its first row, the smallest key, is kept when any is
        shares.append(PixelSample(sample.drawn.seed, int(mine.max(initial=0)), len(mine), sample.drawn.shape, witness))
    return FitSample(tuple(shares))
