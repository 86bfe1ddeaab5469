"""The log-likelihood of samples under the fitted map: PPA's ``score``, as probabilistic PCA's.

PPA is a bijection ``x <-> r`` whose Jacobian determinant is constant,
``|det dr/dx| = |det W|`` (1 unless the model standardizes or whitens the
noise: ``ppa_xr.core.params``), so by the change of variables the density of
``x`` is that of its outputs ``r = PPA(W (x - mean))`` times ``|det W|``. With
independent Gaussian outputs ``r_p ~ N(0, Lambda_p)``:

    log p(x) = sum_p log N(r_p; 0, Lambda_p) + log |det W|
             = -1/2 sum_p (r_p^2 / Lambda_p + log(2 pi Lambda_p)) + log |det W|

``Lambda_p`` are the outputs' variances on the fitting sample
(``explained_variance``, which divides by ``n``) times ``n / (n - 1)``, the
unbiased variances as scikit-learn's PCA reports them (``n``: the effective
size, Kish's ``(sum w)^2 / sum w^2``, of a weighted sample). Keeping ``k < d``
components, the ``d - k`` dropped outputs share one noise variance, their
mean ``sigma^2 = sum_{p >= k} Lambda_p / (d - k)``, as in probabilistic PCA
(Tipping and Bishop, 1999). PCA is PPA with every degree 1, so for
``degree=1`` this is scikit-learn's ``PCA.score_samples``: the Gaussian
``N(mean, U diag(Lambda) U^T)``, with the trailing variances pooled.

The outputs of curved data are not Gaussian, and the recorded marginals of
a curved fit (``ppa_xr.core.fill.with_marginals``) would describe them
better; they are read off the fitting sample's outputs, kept only for some,
and never for a PCA, so scores of different degrees would compare different
families of densities. The Gaussian is the same family for every degree:
a curve scores higher only as far as it shrinks the outputs' variances
(``sum_p log Lambda_p``, the volume the data fill), which is what
cross-validation over ``degree`` then measures.
"""

from __future__ import annotations

import numpy as np

from .checks import check_components
from .kernels import forward
from .linalg import floored
from .params import PPAParams


def output_variances(params: PPAParams, n_components: int | None = None, n_effective: float | None = None) -> np.ndarray:
    """``Lambda`` of the Gaussian outputs: the kept ones' variances, the dropped ones' pooled (module docstring).

    Parameters
    ----------
    params : PPAParams
        The fitted parameters.
    n_components : int, optional
        Components kept, 1..d (default d: every output its own variance).
    n_effective : float, optional
        The fitting sample's (effective) size ``n``: the variances are multiplied by ``n / (n - 1)``; None leaves
        them as recorded (divided by ``n``).

    Returns
    -------
    np.ndarray
        (d,) float64 variances, each at least ``FLAT_VARIANCE`` of the largest (``ppa_xr.core.linalg.floored``).
    """
    variance = params.explained_variance.astype(np.float64)
    d = len(variance)
    k = d if n_components is None else check_components(n_components, d)
    if k < d:
        variance = np.concatenate([variance[:k], np.full(d - k, variance[k:].mean())])
    if n_effective is not None and n_effective > 1:
        variance = variance * (n_effective / (n_effective - 1))
    return floored(variance, float(variance.max()))


def log_likelihood(x: np.ndarray, params: PPAParams, n_components: int | None = None, n_effective: float | None = None,
                   threads: int | None = None) -> np.ndarray:
    """``log p(x)`` of each point ``x`` (``...`` x d) under the Gaussian outputs of the fitted map (module docstring).

    Parameters
    ----------
    x : np.ndarray
        (``...``, d) points in input space.
    params : PPAParams
        The fitted parameters (a model fitted in the span of its samples has no density of its inputs: refused).
    n_components : int, optional
        Components kept, 1..d; the others share one noise variance (:func:`output_variances`).
    n_effective : float, optional
        The fitting sample's (effective) size (:func:`output_variances`).
    threads : int, optional
        Threads of the forward map (:func:`~ppa_xr.core.kernels.forward`).

    Returns
    -------
    np.ndarray
        (``...``) log densities in nats, float32 for float32 points (summed in float64); NaN where a point has a NaN
        or inf.

    Raises
    ------
    ValueError
        A reduced model (fitted in the span of its samples, or with feature weights).
    """
    check_density(params)
    variance = output_variances(params, n_components, n_effective)
    r = forward(x, params, threads=threads)
    constant = -0.5 * float(np.sum(np.log(2 * np.pi * variance))) + params.log2_det_jacobian() * np.log(2)
    squares = np.square(r, dtype=np.float64)
    return (constant - 0.5 * np.einsum("...p,p->...", squares, 1.0 / variance)).astype(r.dtype, copy=False)


def check_density(params: PPAParams) -> None:
    """Refuse a reduced model (``ppa_xr.core.params``): fitted in the span of its samples, or with feature weights, it maps
    its ``d`` inputs onto ``r`` dimensions of its own, and has no density of the inputs.

    Parameters
    ----------
    params : PPAParams
        The fitted parameters.

    Raises
    ------
    ValueError
        A reduced model, saying which data have a density.
    """
    if params.reduced:
        raise ValueError("a model fitted in the span of its samples (fewer samples than features, or feature weights) maps "
                         f"its {params.n_inputs} inputs onto {params.n_features} dimensions, and has no density of the inputs: "
                         "a model fitted on more samples than features, without feature_weight, has one")
