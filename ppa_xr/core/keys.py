"""Pixels by key: a counter-based hash of each pixel's global index, and the record of a sample drawn by it.

A sample of a cube is its ``n`` valid pixels with the smallest keys, so the
same cube and seed give the same sample under any chunking, and a recorded
``(seed, largest key)`` tells whether any pixel belonged to it. Pooled over
several cubes (each with its own seed), the ``n`` smallest keys of the union
are a uniform sample of all their valid pixels: each cube contributes in
proportion to its valid pixels.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from . import compiled


def pixel_keys(seed: int, index: np.ndarray) -> np.ndarray:
    """Uniform uint64 key of each pixel: SplitMix64 of ``seed + (index + 1) * golden`` (compiled:
    :func:`ppa_xr.core.compiled.pixel_keys`).

    A counter-based hash of the global pixel index, so a pixel's key does not
    depend on the chunk it sits in, the chunking or the scheduler.
    """
    index = np.asarray(index, dtype=np.int64)
    out = np.empty(index.shape, np.uint64)
    compiled.pixel_keys(seed, index.ravel(), out.reshape(-1))
    return out


def row_digest(values: np.ndarray) -> str:
    """A short fingerprint of one pixel's feature values: SHA-256 of them rounded to float32 (little-endian), so
    the same scene read as float32, float64 or in either byte order has one fingerprint, and another scene another."""
    return next(iter(row_digests(np.reshape(values, (1, -1)))))


def row_digests(rows: np.ndarray) -> set[str]:
    """The :func:`row_digest` of every row of ``rows`` (n, d), in one pass over their float32 bytes."""
    with np.errstate(over="ignore"):  # beyond float32's range: inf, still one fingerprint per value
        data = memoryview(np.ascontiguousarray(rows, dtype="<f4").tobytes())
    width = 4 * rows.shape[1]
    return {hashlib.sha256(data[start:start + width]).hexdigest()[:32] for start in range(0, len(data), width)}


def same_row(values: np.ndarray, digest: str) -> bool:
    """Whether ``values`` are the pixel whose :func:`row_digest` is ``digest``, or whose float64 fingerprint
    it is (the record of a model saved by an earlier development version, matched by its float64 values)."""
    return row_digest(values) == digest or _sha(np.ascontiguousarray(values, dtype="<f8")) == digest


def _sha(values: np.ndarray) -> str:
    return hashlib.sha256(values.tobytes()).hexdigest()[:32]


@dataclass(frozen=True)
class PixelSample:
    """Which pixels a sample holds: those of a cube of ``shape`` (pixel dims) whose key under
    ``seed`` is at most ``key_max`` (and valid); ``size`` of them, and a ``witness`` pixel."""

    seed: int
    key_max: int
    size: int
    shape: tuple[int, ...]
    #: (flat index, :func:`row_digest`) of its pixel with the smallest key: tells the cube it was drawn from
    witness: tuple[int, str] | None = None


@dataclass(frozen=True)
class FitSample:
    """The pixels a model was fitted on: one :class:`PixelSample` per cube, in the order the cubes
    were given (several for a fit pooled over scenes, :func:`ppa_xr.fit_pooled`). Kept as ``sample_``."""

    cubes: tuple[PixelSample, ...]

    @property
    def size(self) -> int:
        """Pixels in the sample, over all cubes."""
        return sum(cube.size for cube in self.cubes)

    def of_shape(self, shape: tuple[int, ...]) -> tuple[PixelSample, ...]:
        """The samples of the cubes with these pixel dims (a cube of another shape held none of its pixels)."""
        return tuple(cube for cube in self.cubes if cube.shape == tuple(shape))


def exclusion(samples: tuple[PixelSample, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``(seeds, largest keys)`` (uint64) of the non-empty ``samples``: what the compiled tests of :func:`held_by` take."""
    kept = [sample for sample in samples if sample.size]
    return np.array([s.seed for s in kept], np.uint64), np.array([s.key_max for s in kept], np.uint64)


def held_by(samples: tuple[PixelSample, ...], index: np.ndarray) -> np.ndarray:
    """Whether each pixel (global flat index) belongs to any of ``samples``."""
    index = np.asarray(index, dtype=np.int64)
    held = np.empty(index.shape, bool)
    compiled.held(index.ravel(), *exclusion(samples), held.reshape(-1))
    return held
