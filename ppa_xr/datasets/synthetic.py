"""Synthetic hyperspectral tables whose truth is known: curved materials in many bands.

:func:`make_curved_mixture` draws pixels of ``n_materials`` materials in
``n_bands`` smooth bands. Each material ``m`` has a mean spectrum ``mu_m``
and two latent factors ``t1, t2 ~ U(-1, 1)`` that move it along a curve,

    x = w_m (mu_m + sum_j (t_j u_mj + t_j^2 v_mj + t_j^3 s_mj)) + noise,

with ``w_m`` a brightness (illumination) factor around 1, so the spread of a
material is curved (quadratic and cubic in its factors) and scaled along its
mean spectrum. What real airborne scenes add on top, and what breaks
least-squares curves at hundreds of bands, can be switched on:

* ``noise="gaussian"``: band-dependent Gaussian noise (its standard
  deviation varies ``noise_range`` times across the bands);
* ``noise="student"``: the same scale with Student-t (2 degrees of freedom)
  noise, i.e. heavy tails;
* ``anomalies``: that fraction of the pixels replaced by rare foreign spectra
  (targets of anomaly-detection scenes), far from the materials.

The clean signal is returned too (``signal``), for denoising benchmarks.

:func:`make_noisy_scene` lays such curved signal out on a raster: a few
spatially smooth latent factors (so neighbouring pixels differ mostly by
noise, as MNF's shift-difference noise estimate assumes), or with
``edges=True`` piecewise-constant regions with sharp boundaries (where that
assumption fails), and band-dependent noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xarray as xr


@dataclass(frozen=True)
class SyntheticCube:
    """Pixels (n x bands), their noise-free signal, the material of each pixel (-1: anomaly), the noise's std per band.

    Parameters
    ----------
    data : np.ndarray
        (n, bands) noisy pixels.
    signal : np.ndarray
        (n, bands) their noise-free signal.
    material : np.ndarray
        (n,) material of each pixel (-1: anomaly).
    noise_std : np.ndarray
        (bands,) the noise's standard deviation.
    """

    data: np.ndarray
    signal: np.ndarray
    material: np.ndarray
    noise_std: np.ndarray


def _smooth_spectra(rng: np.random.Generator, count: int, wavelengths: np.ndarray, bumps: int = 6) -> np.ndarray:
    """``count`` smooth random spectra (count x bands): sums of Gaussian bumps of random centre, width and sign."""
    centres = rng.uniform(0, 1, (count, bumps, 1))
    widths = rng.uniform(0.03, 0.25, (count, bumps, 1))
    heights = rng.normal(size=(count, bumps, 1))
    return np.sum(heights * np.exp(-0.5 * ((wavelengths - centres) / widths) ** 2), axis=1)


def make_curved_mixture(
    n_samples: int = 10_000,
    n_bands: int = 200,
    n_materials: int = 8,
    noise: str = "gaussian",
    noise_level: float = 0.05,
    noise_range: float = 10.0,
    anomalies: float = 0.0,
    random_state: int | None = 0,
) -> SyntheticCube:
    """Draw a curved mixture (see the module docstring); ``noise_level`` is the noise's mean standard deviation
    relative to the materials' mean spectra (about 1).

    Parameters
    ----------
    n_samples, n_bands, n_materials : int
        Pixels, bands and materials.
    noise : {"gaussian", "student"}
        Gaussian, or Student-t with 2 degrees of freedom (heavy tails).
    noise_level : float
        Mean noise standard deviation.
    noise_range : float
        Ratio of the largest to the smallest band's noise.
    anomalies : float
        Fraction of pixels replaced by foreign spectra.
    random_state : int, optional
        Seed.

    Returns
    -------
    SyntheticCube
        The pixels, their signal, materials and noise level.
    """
    if noise not in ("gaussian", "student"):
        raise ValueError(f"noise must be 'gaussian' or 'student', got {noise!r}")
    if not 0 <= anomalies < 1:
        raise ValueError(f"anomalies is a fraction of the pixels in [0, 1), got {anomalies!r}")
    rng = np.random.default_rng(random_state)
    wavelengths = np.linspace(0, 1, n_bands)
    means = 1.0 + 0.5 * _smooth_spectra(rng, n_materials, wavelengths)
    shapes = 0.15 * _smooth_spectra(rng, n_materials * 6, wavelengths).reshape(n_materials, 2, 3, n_bands)
    material = rng.choice(n_materials, n_samples, p=rng.dirichlet(np.full(n_materials, 2.0)))
    t = rng.uniform(-1, 1, (n_samples, 2, 1))
    powers = np.stack([t, t**2, t**3], axis=2)  # (n, 2, 3, 1)
    variation = np.sum(powers * shapes[material], axis=(1, 2))
    brightness = rng.uniform(0.7, 1.3, (n_samples, 1))
    signal = brightness * (means[material] + variation)
    foreign = rng.random(n_samples) < anomalies
    if foreign.any():
        signal[foreign] = 1.0 + 3.0 * _smooth_spectra(rng, int(foreign.sum()), wavelengths)
        material = np.where(foreign, -1, material)
    std = noise_level * np.geomspace(1, noise_range, n_bands)[rng.permutation(n_bands)]
    std *= noise_level / std.mean()
    draws = rng.standard_normal((n_samples, n_bands)) if noise == "gaussian" else rng.standard_t(2, (n_samples, n_bands))
    return SyntheticCube(signal + draws * std, signal, material, std)


@dataclass(frozen=True)
class SyntheticScene:
    """A noisy raster (``cube``: band x y x), its noise-free ``signal`` (same layout) and the noise's std per band.

    Parameters
    ----------
    cube : xr.DataArray
        (band, y, x) noisy scene.
    signal : xr.DataArray
        Its noise-free signal.
    noise_std : np.ndarray
        (band,) the noise's standard deviation.
    """

    cube: xr.DataArray
    signal: xr.DataArray
    noise_std: np.ndarray


def _smooth_fields(rng: np.random.Generator, count: int, shape: tuple[int, int], sigma: float) -> np.ndarray:
    """``count`` spatially smooth random fields (count x height x width) in [-1, 1]."""
    from scipy.ndimage import gaussian_filter

    fields = np.stack([gaussian_filter(rng.standard_normal(shape), sigma, mode="wrap") for _ in range(count)])
    return fields / np.abs(fields).max(axis=(1, 2), keepdims=True)


def make_noisy_scene(
    height: int = 64,
    width: int = 64,
    n_bands: int = 150,
    n_factors: int = 3,
    noise_level: float = 0.05,
    noise_range: float = 10.0,
    edges: bool = False,
    random_state: int | None = 0,
) -> SyntheticScene:
    """A raster whose clean signal is known: ``x = mu + sum_j (t_j u_j + t_j^2 v_j)`` over ``n_factors``
    latent fields ``t_j`` (spatially smooth, or with ``edges`` piecewise constant in four levels),
    smooth spectra ``mu, u_j, v_j``, plus Gaussian noise whose standard deviation varies ``noise_range``
    times across the bands (mean ``noise_level``).

    Parameters
    ----------
    height, width, n_bands, n_factors : int
        Raster size, bands and latent factors.
    noise_level, noise_range : float
        Mean noise standard deviation, and the ratio of the largest to the smallest band's.
    edges : bool
        Piecewise-constant factors with sharp boundaries.
    random_state : int, optional
        Seed.

    Returns
    -------
    SyntheticScene
        The noisy cube, its signal and the noise level per band.
    """
    rng = np.random.default_rng(random_state)
    wavelengths = np.linspace(0, 1, n_bands)
    t = _smooth_fields(rng, n_factors, (height, width), sigma=min(height, width) / 8)
    if edges:
        t = np.round(1.5 * t) / 1.5  # four levels with sharp boundaries between them
    mean = 1.0 + 0.5 * _smooth_spectra(rng, 1, wavelengths)[0]
    linear, quadratic = 0.3 * _smooth_spectra(rng, n_factors, wavelengths), 0.2 * _smooth_spectra(rng, n_factors, wavelengths)
    signal = mean[:, None, None] + np.tensordot(linear, t, axes=(0, 0)) + np.tensordot(quadratic, t**2, axes=(0, 0))
    std = np.geomspace(1, noise_range, n_bands)[rng.permutation(n_bands)]
    std *= noise_level / std.mean()
    noisy = signal + rng.standard_normal(signal.shape) * std[:, None, None]
    coords = {"band": np.arange(1, n_bands + 1), "y": np.arange(height, dtype=float), "x": np.arange(width, dtype=float)}
    make = lambda values, name: xr.DataArray(values, dims=("band", "y", "x"), coords=coords, name=name)  # noqa: E731
    return SyntheticScene(make(noisy, "radiance"), make(signal, "signal"), std)
