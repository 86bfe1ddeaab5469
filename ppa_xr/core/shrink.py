"""Shrinking a validated fit's last curve toward the straight step, by the evidence of fits on halves of its groups.

The whole-fit validation (:mod:`ppa_xr.core.candidates`) keeps or drops each
curved step whole, judged on one held-out half. A curve can pass it and still
not transfer: fitted on some regions of a scene, it reads above PCA on others
at a kept ``k`` (checkerboards of the MODIS and Sentinel-2 NDVI series: 102.5 to
103.5 on the unseen tiles), the excess reaching that ``k`` through the later
steps, and one held-out half can miss it (98.6 +- 1.4 where four halves
averaged 111.5; benchmarks/results/scenes/README.md).

The last curved step ``p`` (the correction ``r[p+1:] -= B(alpha_p) F``,
``B = [1, T_p(alpha_p)]``) is scaled by ``lambda`` in ``[0, 1]``,
``r[p+1:] -= lambda B(alpha_p) F``: still a shear, exactly invertible with
``det J = 1``. The forward and inverse polynomials are linear in ``F``, so
``lambda`` is folded into the step's arrays (:func:`shrunk`), and the kernels,
Jacobians and model files are those of any fit. The later steps are refitted:
the PCA of the shrunk residual. ``lambda = 1`` is the fit as it was,
``lambda = 0`` drops the curve (the truncation before it). In sample the
shrunk residual's scatter is ``Y + (1 - lambda)^2 F^T B^T W B F`` (``Y`` the
least-squares residual's, orthogonal to ``B``), at most the straight step's,
so Property 2 holds for every ``lambda``.

``lambda`` is chosen on the fitted rows alone (:func:`choose`): the groups
(spatial blocks, or :data:`~ppa_xr.core.degrees.PSEUDO_GROUPS` random ones)
are halved :data:`HALVES` times at random; on each halving, step ``p``'s
coefficients are refitted on one half (the whole fit's axes, degree and
scaling kept) and the other half is read at its kept ``k > p`` (the smaller
``k`` do not depend on ``lambda``) for every ``lambda`` of :data:`GRID`, against
the PCA of the fitted half, ``100 e(k) / e_PCA(k)``. Over the halvings, the
lowest mean ratio among the ``lambda`` whose median worst ratio is within
``ALLOWANCE`` of PCA's (101) is taken (or the lowest median worst where none
is), with the burden of proof of the whole-fit validation on departing from
the curve as fitted: where it is within, another ``lambda`` must lower the
mean by ``SWITCH`` paired standard errors over the halvings. The median, not
the mean, of the worst: a curve that does not transfer between regions reads
above PCA in most halvings, a handful of edge rows in the one halving that
holds them out (Pageblocks: one halving read 147.5 at its worst kept ``k``,
the others 99.5-101.6, and shrinking for it cost 9 points of mean on the
unseen rows). Everything is read from the second moments of the curved
steps' bases and ``z = W (x - mean)``, summed over the cells of groups that
every halving puts on the same side (``2^HALVES`` cells), on at most ``rows``
rows drawn at random: one ``O(rows d^2)`` product, then ``O(d^3)`` per
halving and ``lambda``; the shrunk refit reads its basis's moments and their
products with the residual in one pass over the rows (:func:`shrunk`,
``O(n d g)``). At 200,000 x 198 (nine curved steps) they cost 0.16 s and
0.11 s of CPU, 0.15 times the fixed fit.

A searched fit (PPA-GD) is not shrunk: its excess comes from earlier curves
than its last (Pageblocks: its fourth of five). It keeps instead the count of
its curved steps that the same halvings support (:func:`counted`), refitted
capped at it.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from . import blas, candidates, ties
from .candidates import EQUAL, KEPT, SWITCH, Choice, _basis, _coefficients, judge, truncation_errors
from .degrees import PSEUDO_GROUPS
from .errors import ALLOWANCE, training_ratio
from .fill import with_drawn_outputs, with_marginals
from .linalg import PANEL, eigenbasis, orientation, power_of_two, unit_mean
from .params import PPAParams
from .ppa import Fit, Progress, fit
from .spec import Spec

#: the random halvings of the groups that ``lambda`` is chosen on: one held-out half read a curve that does not
#: transfer at 98.6 +- 1.4 where four averaged 111.5 (MODIS NDVI, checkerboard seed 1, its worst kept k)
HALVES = 4
#: the factors tried, from 1 (the curve as fitted) to 0 (none): steps of 0.2, each an eigendecomposition per halving
#: (steps of 0.1 cost 0.06 s more CPU at 200,000 x 198, 0.03x the fixed fit)
GRID = np.round(np.linspace(1.0, 0.0, 6), 1)
#: whether a validated fit's last curve is shrunk (off: :func:`~ppa_xr.core.candidates.fit_selected`'s fit as it is)
SHRINK = True
#: whether a validated PPA-GD fit keeps the count of curved steps that halvings of its groups support (:func:`counted`;
#: off: :func:`~ppa_xr.core.candidates.fit_selected`'s fit as it is)
COUNT = True


def fit_selected(X: np.ndarray, declared: Spec, groups: np.ndarray | None, rng: np.random.Generator,
                 progress: Progress | None = None, weights: np.ndarray | None = None, shrink: bool = True,
                 drawn: np.ndarray | None = None) -> tuple[Fit, Choice]:
    """:func:`~ppa_xr.core.candidates.fit_selected`, then, where its choice is a validated plain PCA-led fit with a
    curved step, that fit's last curve shrunk (module docstring). The factor draws from a child of ``rng``. The
    final map's tied straight outputs after its last curve are turned toward PCA's subspace (:mod:`~ppa_xr.core.ties`;
    not where ``drawn`` is given), and it records its outputs' marginal densities where they are not Gaussian
    (:func:`~ppa_xr.core.fill.with_marginals`: the fill's model).

    Parameters
    ----------
    X, declared, groups, rng, progress, weights
        As :func:`~ppa_xr.core.candidates.fit_selected`.
    shrink : bool
        False for rows whose gaps were filled by the model's own curves (``missing="fill"``): halvings of filled
        values read the fill's scatter as curves that do not transfer; the fill's own check guards those curves.
    drawn : np.ndarray, optional
        For gaps filled as it fitted: ``X`` with a posterior draw added at the gaps, which the outputs' variances and
        marginals are read from (:func:`~ppa_xr.core.fill.with_drawn_outputs`) instead of ``X``.

    Returns
    -------
    tuple of Fit and dict
        The fit, and the configuration: ``{"robust", "max_curved", "validated", "shrink", "turned"}`` (``shrink`` the
        factor of the last curve, 1 where it is as fitted; ``turned`` the runs of tied outputs turned, ``[first k, last k]``
        each).
    """
    start = copy.deepcopy(rng)  # the final fit's draws: a searched fit capped at its count is refitted from them
    fitted, choice = candidates.fit_selected(X, declared, groups, rng, progress, weights, shrink_outputs=shrink)
    choice = choice | {"shrink": 1.0, "turned": []}
    chosen = shrink and choice["validated"] and not choice["robust"] and bool(fitted.params.curved_steps())
    kept = declared.n_components if isinstance(declared.n_components, int) else None  # the k the user keeps
    if SHRINK and chosen and declared.leading == "pca":
        with blas.every_blas_on_one_thread():
            choice["shrink"] = choose(fitted.params, X, groups, rng.spawn(1)[0], weights, kept, declared.selection_samples)
            fitted = shrunk(X, fitted, choice["shrink"], weights)
    elif COUNT and chosen and declared.leading == "gd":
        with blas.every_blas_on_one_thread():
            count = counted(fitted.params, X, groups, rng.spawn(1)[0], kept, declared.selection_samples)
        if count < len(fitted.params.curved_steps()):
            choice["max_curved"] = count
            fitted = fit(X, declared.replace(robust=False, max_curved=count), groups=groups, rng=start, weights=weights,
                         shrink_outputs=candidates.SHARES)
    if drawn is None:
        fitted, choice["turned"] = tied(fitted, X, weights)
        params = with_marginals(fitted.params, X, weights)
    else:
        params = with_drawn_outputs(fitted.params, drawn, weights)
    return dataclasses.replace(fitted, params=params), choice


def tied(fitted: Fit, X: np.ndarray, weights: np.ndarray | None = None) -> tuple[Fit, list[list[int]]]:
    """``fitted`` with its tied straight outputs after the last curve turned toward PCA's subspace
    (:func:`~ppa_xr.core.ties.turned`, where :data:`~ppa_xr.core.ties.TIES`).

    Parameters
    ----------
    fitted : Fit
        A fit of ``X``.
    X : np.ndarray
        (n, d) its fitting rows.
    weights : np.ndarray, optional
        (n,) their weights in the fit (None: equal).

    Returns
    -------
    tuple of Fit and list
        The turned map with its training error curve, and the runs turned, ``[first k, last k]`` each.
    """
    if not ties.TIES:
        return fitted, []
    with blas.every_blas_on_one_thread():  # as the shrinkage: the tie test's products are small, one per pair of outputs
        block, runs = ties.turned(fitted.params, X, weights)
    return (fitted if block is None else _sheared(fitted, 1.0, block)), runs


def _suffix(values: np.ndarray) -> np.ndarray:
    return np.cumsum(values[..., ::-1], axis=-1)[..., ::-1]


def _leading(matrix: np.ndarray, count: int | None = None) -> np.ndarray:
    """The ``count`` (None: all) leading eigenvectors of a symmetric matrix, as columns in descending order (the
    whole decomposition, :func:`~ppa_xr.core.linalg.eigenbasis`, LAPACK's ``evd``: 0.7 the time of ``evr`` at
    189 x 189, and no slower than its subsets)."""
    return eigenbasis(matrix)[1][:, :count]


def _beyond(second: np.ndarray, sums: np.ndarray, count: float, centre: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """``e_j = sum_i w_i ||(y_i - centre)||^2 - sum_{l < j} (v_l . (y_i - centre))^2`` for ``j = 0..J`` (the energy beyond
    the first ``j`` of the ``J`` axes ``V``), from the rows' ``sum w y y^T``, ``sum w y`` and ``sum w``."""
    shift = np.outer(sums, centre)
    centred = second - shift - shift.T + count * np.outer(centre, centre)
    along = np.einsum("ij,ij->j", centred @ axes, axes)
    return np.trace(centred) - np.concatenate([[0.0], np.cumsum(along)])


def _bases(params: PPAParams, columns: np.ndarray) -> list[np.ndarray]:
    """Each curved step's basis ``B_q = [1, T_q(alpha_q)]`` (n x g_q+1) from the states' columns of the curved steps
    (n x C, overwritten): ``alpha_q`` is its column corrected by the curved steps before it (``O(n C g)``)."""
    curved = params.curved_steps()
    bases = []
    for j, q in enumerate(curved):
        bases.append(_basis(params, q, columns[:, j]))
        if j + 1 < len(curved):
            columns[:, j + 1:] -= bases[-1] @ _coefficients(params, q)[:, [c - q - 1 for c in curved[j + 1:]]]
    return bases


def _shear(params: PPAParams, lam: float, block: tuple[np.ndarray, np.ndarray]) -> PPAParams:
    """The map with its last curved step ``p`` scaled by ``lam`` and the later outputs turned by ``V`` (m x m, the PCA
    of the shrunk residual in the later outputs' coordinates), with their variances."""
    variances, V = block
    p = params.curved_steps()[-1]
    arrays = params.arrays()
    rotation, forward, forward_bias = arrays["rotation"].copy(), arrays["forward"].copy(), arrays["forward_bias"].copy()
    rotation[p + 1:] = V.T @ rotation[p + 1:]
    forward[:, :, p + 1:] = forward[:, :, p + 1:] @ V
    forward_bias[:, p + 1:] = forward_bias[:, p + 1:] @ V
    forward[p] *= lam
    forward_bias[p] *= lam
    explained = arrays["explained_variance"].copy()
    explained[p + 1:] = variances
    factors = np.where(np.arange(len(forward)) == p, lam, 1.0)  # per step: the inverse's rows of step p scaled
    return PPAParams(**arrays | {"rotation": rotation, "forward": forward, "forward_bias": forward_bias,
                                 "inverse": arrays["inverse"] * factors[:, None, None],
                                 "inverse_bias": arrays["inverse_bias"] * factors[:, None],
                                 "explained_variance": explained}, tails=params.tails)


def shrunk(X: np.ndarray, fitted: Fit, lam: float, weights: np.ndarray | None = None) -> Fit:
    """``fitted`` (a map of ``X``, with curved steps) with its last curve scaled by ``lam`` and the later steps the PCA of
    the shrunk residual on every row of ``X`` (weighted by ``weights``), with its training error curve.

    The fit's residual after the curve, ``y = s - B F``, has its later outputs as principal axes, so the shrunk
    residual ``y + (1 - lam) B F`` has the covariance ``diag(v) + (1 - lam) (K F + F^T K^T) + (1 - lam)^2 F^T (B^T W B / n) F``
    (``v`` the fit's variances of those outputs, ``K = y^T W B / n``, zero where ``F`` is least squares, not where the
    curve kept its axes' shares of signal): ``B^T W B`` and ``K`` from one pass over the rows
    (``O(n d g)``, :func:`_last_moments`); no projection of the later outputs.

    Parameters
    ----------
    X : np.ndarray
        (n, d) the rows the map was fitted on.
    fitted : Fit
        The fit.
    lam : float
        The factor, in ``[0, 1]``.
    weights : np.ndarray, optional
        (n,) the rows' weights.

    Returns
    -------
    Fit
        The shrunk map and its training error curve.
    """
    params = fitted.params
    if lam == 1.0:
        return fitted
    p = params.curved_steps()[-1]
    unit = float(power_of_two(float(np.sqrt(np.sum(params.explained_variance)))))  # squares of data at 1e150 stay finite
    moments, cross = _last_moments(params, X, weights, unit)
    coef = _coefficients(params, p) / unit
    # the residual y = s - B F is orthogonal to B where F is least squares; a curve that kept its axes' shares of
    # signal (ppa.fit's shrink_outputs) leaves y^T B / n = ``cross``, and y + (1 - lam) B F has the cross terms
    shift = (1 - lam) * cross @ coef
    covariance = (np.diag(params.explained_variance[p + 1:] / unit / unit) + shift + shift.T
                  + (1 - lam) ** 2 * coef.T @ moments @ coef)
    values, vectors = eigenbasis(covariance)
    vectors = vectors * orientation(params.rotation[p + 1:].T @ vectors)
    return _sheared(fitted, lam, (np.maximum(values, 0.0) * unit * unit, vectors))


def _sheared(fitted: Fit, lam: float, block: tuple[np.ndarray, np.ndarray]) -> Fit:
    """:func:`_shear` of ``fitted``'s map, with its training error curve from the later outputs' new variances:
    ``e(k) = sum_{j >= k} v_j`` for ``k > p``."""
    params = fitted.params
    p, d = params.curved_steps()[-1], params.n_features
    energies = np.concatenate([np.zeros(p), _suffix(block[0])[: d - 1 - p]])
    ratio = fitted.error_ratio.copy()
    ratio[p:] = training_ratio(energies, params.pca_variance, float(np.sum(params.pca_variance)))[p:]
    return Fit(_shear(params, lam, block), ratio)


def _last_moments(params: PPAParams, X: np.ndarray, weights: np.ndarray | None, unit: float) -> tuple[np.ndarray, np.ndarray]:
    """``B^T W B / n`` of the last curved step's basis and ``y^T W B / n`` of the residual after it, ``y = s - B F`` in
    the later outputs' coordinates (divided by ``unit``): ``s^T W B = A_{p+1:} z^T W B - sum_q F_q^T B_q^T W B``
    over the earlier curved steps ``q``, ``z = W (x - mean)``; ``O(n d g)``, no later output projected."""
    curved = params.curved_steps()
    p, turn = curved[-1], params.rotation[curved].T
    w = None if weights is None else unit_mean(np.asarray(weights, dtype=np.float64))
    degrees = [max(int(params.degrees[q]), 1) + 1 for q in curved]
    moments, inputs = np.zeros((degrees[-1], degrees[-1])), np.zeros((params.n_features, degrees[-1]))
    earlier = [np.zeros((k, degrees[-1])) for k in degrees[:-1]]
    for start in range(0, len(X), PANEL):
        z = params.to_fit_space(X[start:start + PANEL])
        bases = _bases(params, z @ turn)
        z /= unit
        design = bases[-1] if w is None else bases[-1] * w[start:start + PANEL, None]
        moments += design.T @ bases[-1]
        inputs += z.T @ design
        for total, basis in zip(earlier, bases[:-1]):
            total += basis.T @ design
    later = params.rotation[p + 1:] @ inputs - sum((_coefficients(params, q)[:, p - q:] / unit).T @ total
                                                    for q, total in zip(curved[:-1], earlier))
    moments /= len(X)
    return moments, later / len(X) - (_coefficients(params, p) / unit).T @ moments


class _Cells:
    """The weighted second moments of ``u = [B_p, B_e, z]`` per cell of groups (module docstring: ``B_p`` the last curved
    step's basis, ``B_e`` the earlier ones', ``z = W (x - mean)``), and each halving's cells: ``masks[h, c]``, whether
    halving ``h`` fits on cell ``c``. The later block before step ``p``, ``s = z A_{p+1:}^T - B_e F_e``, is read from
    them: no pass turns or corrects the rows."""

    def __init__(self, params: PPAParams, X: np.ndarray, weights: np.ndarray | None, labels: np.ndarray,
                 rng: np.random.Generator) -> None:
        n_groups = int(labels.max()) + 1
        sides = np.stack([rng.permutation(n_groups) % 2 == 0 for _ in range(HALVES)])  # (halvings, groups)
        cell = ((1 << np.arange(HALVES)) @ sides)[labels]
        self.masks = ((np.arange(1 << HALVES)[None, :] >> np.arange(HALVES)[:, None]) & 1).astype(bool)
        curved = params.curved_steps()
        self.p, self.d = curved[-1], params.n_features
        order = np.argsort(cell, kind="stable")  # the rows cell by cell: each cell's moments from one slice
        cell = cell[order]
        z = params.to_fit_space(X[order])  # the states are z A^T: their moments are turned per half, not per row
        bases = _bases(params, z @ params.rotation[curved].T)
        unit = float(power_of_two(float(np.abs(z).max()) or 1.0))  # the squares of data at 1e150 stay finite
        u = np.empty((len(z), sum(b.shape[1] for b in bases) + z.shape[1]))  # [B_p, B_e, z / unit], filled in place
        np.concatenate([bases[-1], *bases[:-1]], axis=1, out=u[:, : u.shape[1] - z.shape[1]])
        np.divide(z, unit, out=u[:, u.shape[1] - z.shape[1]:])
        self.g = bases[-1].shape[1]
        del z, bases
        self.later = params.rotation[self.p + 1:]
        if weights is not None:
            u *= np.sqrt(unit_mean(np.asarray(weights, dtype=np.float64)[order]))[:, None]
        self.k = u.shape[1] - self.g - self.d
        self.earlier = np.vstack([np.zeros((0, self.d - self.p - 1))] + [_coefficients(params, q)[:, self.p - q:] / unit for q in curved[:-1]])
        self.moments = np.zeros((1 << HALVES, u.shape[1], u.shape[1]))
        bounds = np.searchsorted(cell, np.arange((1 << HALVES) + 1))
        for c in range(1 << HALVES):
            part = u[bounds[c]:bounds[c + 1]]
            np.matmul(part.T, part, out=self.moments[c])

    def side(self, h: int, fitted: bool) -> tuple[float, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Halving ``h``'s fitted (or held-out) half: its weight, the sums and second moments of ``z = W (x - mean)`` (PCA's
        are those of the states ``z A^T``, turned), and of the block ``s = z A_{p+1:}^T - B_e F_e``: ``B_p^T W B_p``,
        ``B_p^T W s`` and ``s^T W s``."""
        a = self.moments[self.masks[h] == fitted].sum(axis=0)
        g, k, F, turn = self.g, self.k, self.earlier, self.later
        basis, earlier, inputs = slice(0, g), slice(g, g + k), slice(g + k, None)
        cross = (a[earlier, inputs] @ turn.T).T @ F
        block = (a[basis, basis], a[basis, inputs] @ turn.T - a[basis, earlier] @ F,
                 turn @ a[inputs, inputs] @ turn.T - cross - cross.T + F.T @ a[earlier, earlier] @ F)
        return float(a[0, 0]), a[0, inputs], a[inputs, inputs], block

    def ratios(self, h: int, components: int | None) -> np.ndarray | None:
        """Halving ``h``'s held-out ``100 e(k) / e_PCA(k)`` at its kept ``k > p`` for every ``lambda`` of :data:`GRID`
        (grid, kept); None where no such ``k`` is kept or a half is empty."""
        (n_a, sums, second, a), (n_b, held_sums, held_second, b) = self.side(h, True), self.side(h, False)
        if n_a <= 0 or n_b <= 0:
            return None
        centre = sums / n_a
        pca = _beyond(held_second, held_sums, n_b, centre, _leading(second - n_a * np.outer(centre, centre)))
        ks = np.arange(self.p + 1, self.d)
        kept = pca[ks] >= KEPT * pca[0] if components is None else ks <= components
        if not kept.any():
            return None
        floor = max(EQUAL * pca[0], np.finfo(float).tiny)
        coef = np.linalg.lstsq(a[0], a[1], rcond=None)[0]
        axes = int(np.flatnonzero(kept)[-1])  # the shrunk residual's axes the kept k read
        out = np.empty((len(GRID), int(kept.sum())))
        for i, lam in enumerate(GRID):
            scatter, shrunk_sums = _scaled(a, coef, lam)
            centre = shrunk_sums / n_a
            held = _beyond(*_scaled(b, coef, lam), n_b, centre, _leading(scatter - n_a * np.outer(centre, centre), axes))
            out[i] = 100 * np.maximum(held[np.flatnonzero(kept)], floor) / np.maximum(pca[ks][kept], floor)
        return out


def _scaled(block: tuple[np.ndarray, np.ndarray, np.ndarray], coef: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """``sum w y y^T`` and ``sum w y`` of ``y = s - lam B F`` from ``(B^T W B, B^T W s, s^T W s)`` (``B``'s first column 1)."""
    products, cross, second = block
    shift = cross.T @ coef
    return second - lam * (shift + shift.T) + lam * lam * coef.T @ products @ coef, cross[0] - lam * products[0] @ coef


def choose(params: PPAParams, X: np.ndarray, groups: np.ndarray | None, rng: np.random.Generator,
           weights: np.ndarray | None = None, components: int | None = None, rows: int | None = None) -> float:
    """The factor of ``params``' last curve (module docstring), from fits on halves of the groups of ``X``'s rows.

    Parameters
    ----------
    params : PPAParams
        A map of ``X`` with a curved step.
    X : np.ndarray
        (n, d) its fitting rows.
    groups : np.ndarray, optional
        (n,) their groups (None: random ones).
    rng : np.random.Generator
        The halvings and the rows drawn.
    weights : np.ndarray, optional
        (n,) the rows' weights.
    components : int, optional
        The k users keep are ``1 .. components`` (None: those of ``KEPT``).
    rows : int, optional
        At most this many rows, drawn at random (None: every row).

    Returns
    -------
    float
        ``lambda``, in ``[0, 1]``.
    """
    if not params.curved_steps():
        return 1.0
    X, labels, weights = _drawn(X, groups, rng, rows, weights)
    if len(np.unique(labels)) < 2:
        return 1.0
    cells = _Cells(params, X, weights, np.unique(labels, return_inverse=True)[1], rng)
    read = [ratio for ratio in (cells.ratios(h, components) for h in range(HALVES)) if ratio is not None]
    if not read:
        return 1.0
    return float(GRID[_chosen(np.array([r.max(axis=1) for r in read]), np.array([r.mean(axis=1) for r in read]))])


def _drawn(X: np.ndarray, groups: np.ndarray | None, rng: np.random.Generator, rows: int | None,
           weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The rows the halvings read, their groups' labels (random ones where ``groups`` is None) and weights: at most
    ``rows`` of them, drawn at random."""
    n = len(X)
    labels = rng.permutation(n) % min(PSEUDO_GROUPS, n) if groups is None else np.unique(np.asarray(groups).ravel(), return_inverse=True)[1]
    if rows is not None and n > rows:
        drawn = np.sort(rng.choice(n, rows, replace=False))
        X, labels, weights = X[drawn], labels[drawn], None if weights is None else np.asarray(weights)[drawn]
    return X, labels, weights


def _chosen(worst: np.ndarray, mean: np.ndarray) -> int:
    """The index in :data:`GRID` (``GRID[0] = 1``) from each halving's worst and mean ratio (halvings, grid): the lowest
    mean over the halvings among the factors whose median worst is within ``ALLOWANCE`` of PCA; the curve as fitted
    while it is within and no such factor's mean is below its own by :data:`~ppa_xr.core.candidates.SWITCH` paired
    standard errors (over the halvings); the lowest median worst where none is within."""
    typical = np.median(worst, axis=0)
    within = typical <= 100 * (1 + ALLOWANCE)
    if not within.any():
        return int(np.argmin(typical))
    best = int(np.argmin(np.where(within, mean.mean(axis=0), np.inf)))
    diff = mean[:, best] - mean[:, 0]
    se = float(np.std(diff, ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else np.inf
    return 0 if within[0] and not diff.mean() < -SWITCH * se else best


def _refitted(params: PPAParams, rows: np.ndarray) -> PPAParams:
    """``params`` with each curved step's polynomial refitted on ``rows``, step after step: its axis and degree kept,
    its centre and scale those of the rows' projections (as a fit of them: rows of other halves beyond them take the
    tails, not the polynomial's extrapolation), its coefficients their least squares ``F = argmin ||s - B F||``."""
    states = params.to_fit_space(rows) @ params.rotation.T
    arrays = params.arrays()
    forward, bias, center, scale = (arrays[name].copy() for name in ("forward", "forward_bias", "center", "scale"))
    for p in params.curved_steps():
        lo, hi = states[:, p].min(), states[:, p].max()
        center[p], scale[p] = (hi + lo) / 2, max((hi - lo) / 2, np.finfo(float).tiny)
        scaled = PPAParams(**arrays | {"center": center, "scale": scale}, tails=params.tails)
        design = _basis(scaled, p, states[:, p])
        coef = np.linalg.lstsq(design, states[:, p + 1:], rcond=None)[0]
        bias[p, p + 1:], forward[p, : design.shape[1] - 1, p + 1:] = coef[0], coef[1:]
        states[:, p + 1:] -= design @ coef
    return PPAParams(**arrays | {"forward": forward, "forward_bias": bias, "center": center, "scale": scale}, tails=params.tails)


def counted(params: PPAParams, X: np.ndarray, groups: np.ndarray | None, rng: np.random.Generator,
            components: int | None = None, rows: int | None = None) -> int:
    """How many of a searched fit's (PPA-GD's) curved steps its fitted rows support, by the evidence of halvings.

    PPA-GD searches each leading vector on the rows, so the whole-fit validation's
    PCA-led half fits are not its curves, and a GD-led half fit measured its
    harm on one held-out half as noise (Pageblocks: 5 of 2,737 unseen rows
    carry the excess of 107-110 at a kept ``k``). On :data:`HALVES` random halvings
    of the groups, every curved step's polynomial is refitted on one half
    (:func:`_refitted`) and every truncation ``c = 1..C`` (the first ``c`` curves, then
    the PCA of the residual: what ``max_curved=c`` fits) read on the other at its
    kept ``k`` against the PCA of the fitted half
    (:func:`~ppa_xr.core.candidates.truncation_errors`, :func:`~ppa_xr.core.candidates.judge`).
    :func:`_chosen`'s rule over the truncations, the fit as it is first; as the
    check where users look, PCA is not offered, and where no truncation's median
    worst kept ``k`` is within ``ALLOWANCE`` of PCA, the fit stands (``C``).

    Parameters
    ----------
    params, X, groups, rng, components, rows
        As :func:`choose` (``params`` with curved steps; no weights: PPA-GD weighs every row alike).

    Returns
    -------
    int
        The count ``c`` of curved steps to keep, ``1 <= c <= C``.
    """
    top = len(params.curved_steps())
    X, labels, _ = _drawn(X, groups, rng, rows)
    labels = np.unique(labels, return_inverse=True)[1]
    if labels.max(initial=0) < 3:  # two groups a side at least
        return top
    worst, mean = [], []
    for _ in range(HALVES):
        side = (rng.permutation(int(labels.max()) + 1) % 2 == 0)[labels]
        order = np.argsort(labels[~side], kind="stable")
        held, held_labels = X[~side][order], labels[~side][order]
        bounds = np.concatenate([[0], np.flatnonzero(np.diff(held_labels)) + 1, [len(held)]])
        # squares of data far from unit scale may overflow or vanish: such a halving reads no finite evidence
        with np.errstate(all="ignore"):
            fitted = _refitted(params, X[side])
            errors = truncation_errors(fitted, X[side], held, bounds, moments=False)
            verdicts = [judge(e, errors[0], float(np.sum(fitted.to_fit_space(held) ** 2)), components) for e in errors[:0:-1]]
        worst.append([v.worst for v in verdicts])
        mean.append([v.mean for v in verdicts])
    worst_, mean_ = np.array(worst), np.array(mean)
    if not np.all(np.isfinite(worst_)) or not np.all(np.isfinite(mean_)) or not (np.median(worst_, axis=0) <= 100 * (1 + ALLOWANCE)).any():
        return top
    return top - _chosen(worst_, mean_)
