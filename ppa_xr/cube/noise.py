"""The noise of a cube from differences of neighbouring pixels (the estimate MNF starts from).

Where the signal varies slowly from a pixel to the next, the difference of
two neighbours is mostly noise: ``x_i - x_j = n_i - n_j`` with covariance
``2 N`` for independent noise of covariance ``N``. So

    N ~ cov(x_i - x_j) / 2

over every pair of horizontally and vertically adjacent pixels (Green et al.
1988; Spectral Python's ``noise_from_diffs`` takes one direction), each
direction about its own mean difference (a smooth trend shifts it), pairs
with a NaN or nodata pixel skipped. The sums are a dask reduction: one pass
over the chunks (shared with the pixel sample in ``cube.ppa.fit``), any
chunking (the result agrees to rounding), the same bit for bit under any scheduler, for a given chunking. Where the
scene has sharp edges the differences also hold signal, and ``N`` is too
large there (measured in docs/hyperspectral.md): give a noise covariance
from a dark frame or a uniform area instead (``PPA(noise_cov=...)``, or
``cube.ppa.fit(noise_cov=<that area as a cube>)``: :func:`sample_covariance`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import dask
import dask.array as dsa
import numpy as np
import xarray as xr

from .inputs import spatial_dims, warn_guessed_space

def _spatial_axes(da: xr.DataArray, dim: Hashable) -> list[int]:
    chosen = spatial_dims(da, dim)
    if all(da.sizes[d] < 2 for d in chosen):
        sizes = ", ".join(f"{d}: {da.sizes[d]}" for d in chosen)
        raise ValueError(f"shift differences need neighbouring pixels along spatial dims, 2 or more along one of them, and this "
                         f"cube has {sizes} (pixel dims {[d for d in da.dims if d != dim]}): give a noise covariance instead "
                         "(noise_cov=<(d, d) array>, or a cube of noise samples), or, in fit_pooled, leave this cube out")
    warn_guessed_space(da, dim, f"the noise is estimated from differences of neighbours along {chosen}")
    return [da.get_axis_num(d) for d in chosen if da.sizes[d] >= 2]


def noise_moments(da: xr.DataArray, dim: Hashable) -> list[tuple]:
    """Lazy ``(sum d d^T, sum d, count)`` of the neighbour differences ``d / sqrt(2)`` along each spatial axis of one cube."""
    da = da.transpose(*[d for d in da.dims if d != dim], dim)
    data = da.data if isinstance(da.data, dsa.Array) else dsa.from_array(np.asarray(da.data))
    # every chunk whole along the features and C-contiguous: numpy's sums follow the memory layout, which a chunk sent
    # between workers changes (a transposed view arrives as a C copy), so the sums would differ by rounding on a cluster
    data = data.astype(np.float64).rechunk({data.ndim - 1: -1}).map_blocks(np.ascontiguousarray)
    lead = tuple(range(data.ndim - 1))
    out = []
    for axis in _spatial_axes(da, dim):
        upper = tuple(slice(1, None) if i == axis else slice(None) for i in range(data.ndim))
        lower = tuple(slice(None, -1) if i == axis else slice(None) for i in range(data.ndim))
        diff = (data[upper] - data[lower]) / np.sqrt(2)
        valid = dsa.isfinite(diff).all(axis=-1)
        diff = dsa.where(valid[..., None], diff, 0.0)
        out.append((dsa.tensordot(diff, diff, axes=(lead, lead)), diff.sum(axis=lead), valid.sum()))
    return out


def shift_difference_covariance(cubes: xr.DataArray | Sequence[xr.DataArray], dim: Hashable = "band") -> np.ndarray:
    """The noise covariance ``N`` (d x d) of one cube, or pooled over several, from neighbour differences (module docstring).

    ``cubes``: DataArrays with the features along ``dim``, prepared by
    ``ppa_xr.cube.inputs.feature_array`` (floats, nodata as NaN), all in
    the same feature order. Computed now, in one pass over their chunks
    (``cube.ppa.fit(noise_cov="shift")`` computes it in the sampling's pass).

    Parameters
    ----------
    cubes : xr.DataArray or sequence of xr.DataArray
        The cube(s).
    dim : hashable
        The feature dimension.

    Returns
    -------
    np.ndarray
        (d, d) noise covariance.

    Raises
    ------
    ValueError
        Fewer valid neighbour pairs than features.
    """
    cubes = [cubes] if isinstance(cubes, xr.DataArray) else list(cubes)
    return noise_covariance(dask.compute([noise_moments(da, dim) for da in cubes])[0], cubes[0].sizes[dim])


def noise_covariance(moments: list[list[tuple]], d: int) -> np.ndarray:
    """``N`` from the computed :func:`noise_moments` of each cube: the pooled covariance of the differences."""
    scatter, count = np.zeros((d, d)), 0
    for second, first, n in (m for per_cube in moments for m in per_cube):
        if n > 1:
            scatter += second - np.outer(first, first) / n
            count += int(n) - 1
    if count < d:
        raise ValueError(
            f"only {count} neighbour pairs with every feature valid, fewer than the {d} features: the noise covariance "
            "cannot be estimated; give one (noise_cov=...) from a dark frame or a uniform area"
        )
    return scatter / count


def sample_covariance(noise: xr.DataArray, dim: Hashable = "band") -> np.ndarray:
    """The covariance (d x d, ``n - 1``) of the valid pixels of a noise sample: a dark frame, or a uniform
    area where the signal is constant, prepared by ``ppa_xr.cube.inputs.feature_array``. Computed now.

    Parameters
    ----------
    noise : xr.DataArray
        The noise sample, features along ``dim``.
    dim : hashable
        The feature dimension.

    Returns
    -------
    np.ndarray
        (d, d) covariance.

    Raises
    ------
    ValueError
        No more valid pixels than bands.
    """
    values = np.asarray(noise.transpose(..., dim).values, dtype=np.float64).reshape(-1, noise.sizes[dim])
    values = values[np.isfinite(values).all(axis=1)]
    if len(values) <= noise.sizes[dim]:
        raise ValueError(
            f"the noise sample has {len(values)} valid pixels for {noise.sizes[dim]} bands: its covariance would be "
            "singular; give a larger dark frame or uniform area (more pixels than bands)"
        )
    return np.cov(values, rowvar=False)
