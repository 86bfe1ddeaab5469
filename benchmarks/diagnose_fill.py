"""Where the fill's error beyond a standardized fit comes from, and what a posterior mean would gain (multispectral).

    PYTHONPATH=. python benchmarks/diagnose_fill.py [rows]

The protocol of ``bench_fill.py`` (random halves, seeds 0-2; a random quarter of each held-out pixel's bands
hidden; MSE as a share of ``best_linear_fill``'s) on the first ``rows`` held-out pixels (default 1500) of
Landsat 5 and the BigEarthNet patches. Every hidden pattern there has two gaps, so the posterior of a pixel's gaps
is a 2-D density, integrated on a 41 x 41 grid over +-6 of the Laplace posterior's standard deviations around
the library's fill (the MAP), ``p(x_m | x_o) ~ prod_p f_p(r_p(x))``, with ``f_p``:

* ``gauss``: ``N(0, Lambda_p)``, the fill's model (its grid mode checks that the MAP settled at the global mode);
* ``robust``: ``N(0, (1.4826 MAD_p)^2)`` of the training outputs;
* ``emp``: each output's marginal on the training half (a histogram of 200 bins, smoothed by 2 bins, Gaussian
  tails); ``emp1``/``emp2``/``emp3``: the first 1/2/3 outputs so, the others Gaussian;
* ``emp-lin``: ``emp`` with ``r`` linearized at the MAP (``r* + J_m delta``).

``mean`` is the posterior mean (what minimises the expected squared error), ``mode`` its grid maximum.
``emp-sigma``/``gauss-sigma``: the same mean from ``2m + 1`` points only (the MAP and +-1.5 Laplace standard
deviations along each of the ``m`` Laplace axes, weighted by the prior's density there), a cost that grows with the
gaps rather than exponentially.
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
from scipy.ndimage import gaussian_filter1d

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, "/work/shared/bench")

from bench_fill import bigearthnet, hide_quarter, mse  # noqa: E402

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core import fill as core_fill  # noqa: E402
from ppa_xr.core.kernels import forward  # noqa: E402


def marginal(r: np.ndarray, bins: int = 200):
    """log density of one output: a smoothed histogram of the training values, Gaussian tails beyond it."""
    lo, hi = np.quantile(r, [0.0005, 0.9995])
    pad = 0.1 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    h, edges = np.histogram(r, bins=bins, range=(lo, hi), density=True)
    log_h = np.log(gaussian_filter1d(h, 2.0) + 1e-4 / (hi - lo))
    c, var = (edges[:-1] + edges[1:]) / 2, r.var()
    return lambda v: np.where(v < c[0], log_h[0] - (v - c[0]) ** 2 / (2 * var),
                              np.where(v > c[-1], log_h[-1] - (v - c[-1]) ** 2 / (2 * var), np.interp(v, c, log_h)))


def log_priors(R: np.ndarray, lam: np.ndarray) -> dict:
    mad = (1.4826 * np.median(np.abs(R - np.median(R, 0)), 0)) ** 2
    f = [marginal(R[:, p]) for p in range(R.shape[1])]

    def partly(n):
        return lambda r: sum(f[p](r[:, p]) for p in range(n)) - 0.5 * (r[:, n:] ** 2 / lam[n:]).sum(1)

    return {"gauss": lambda r: -0.5 * (r**2 / lam).sum(1), "robust": lambda r: -0.5 * (r**2 / mad).sum(1),
            "emp1": partly(1), "emp2": partly(2), "emp3": partly(3), "emp": partly(R.shape[1])}


def posterior(params, filled, gaps, priors, linearized=(), width=6.0, points=41):
    """{name-mean, name-mode}: the gaps' posterior mean and grid mode under each prior, on the Laplace grid."""
    precision = core_fill._precisions(params.explained_variance, params.explained_variance.max())
    out = {f"{n}-{w}": filled.copy() for n in list(priors) + [f"{n}-lin" for n in linearized] for w in ("mean", "mode")}
    axis = np.linspace(-width, width, points)
    for m in np.unique(gaps.sum(1)):
        rows = np.flatnonzero(gaps.sum(1) == m)
        if m == 0:
            continue
        idx = np.argsort(~gaps[rows], axis=1, kind="stable")[:, :m]
        r_star = forward(filled[rows], params, threads=1)
        jac = core_fill._tangents(r_star, idx, params)
        hessian = np.einsum("ndm,ndk->nmk", jac * precision[None, :, None], jac)
        lower = np.linalg.cholesky(hessian + core_fill._ridge(hessian))
        grid = np.stack(np.meshgrid(*([axis] * m), indexing="ij"), -1).reshape(-1, m)
        for i, row in enumerate(rows):
            offsets = np.linalg.solve(lower[i].T, grid.T).T
            xs = np.repeat(filled[row][None], len(grid), 0)
            xs[:, idx[i]] += offsets
            r = forward(xs, params, threads=1)
            r_lin = r_star[i] + offsets @ jac[i].T
            cases = [(n, f, r) for n, f in priors.items()] + [(f"{n}-lin", priors[n], r_lin) for n in linearized]
            for name, log_p, values in cases:
                lp = log_p(values)
                w = np.exp(lp - lp.max())
                out[f"{name}-mean"][row, idx[i]] = (w[:, None] * xs[:, idx[i]]).sum(0) / w.sum()
                out[f"{name}-mode"][row, idx[i]] = xs[np.argmax(lp), idx[i]]
    return out


def sigma_mean(params, filled, gaps, log_p, a=1.5):
    """The posterior mean from the MAP and ``+-a`` Laplace standard deviations along each Laplace axis (``2m + 1``
    points, each weighted by the prior's density at it)."""
    precision = core_fill._precisions(params.explained_variance, params.explained_variance.max())
    out = filled.copy()
    for m in np.unique(gaps.sum(1)):
        rows = np.flatnonzero(gaps.sum(1) == m)
        if m == 0:
            continue
        idx = np.argsort(~gaps[rows], axis=1, kind="stable")[:, :m]
        jac = core_fill._tangents(forward(filled[rows], params, threads=1), idx, params)
        hessian = np.einsum("ndm,ndk->nmk", jac * precision[None, :, None], jac)
        lower = np.linalg.cholesky(hessian + core_fill._ridge(hessian))
        points = np.vstack([np.zeros(m), a * np.eye(m), -a * np.eye(m)])
        for i, row in enumerate(rows):
            xs = np.repeat(filled[row][None], len(points), 0)
            xs[:, idx[i]] += np.linalg.solve(lower[i].T, points.T).T
            lp = log_p(forward(xs, params, threads=1))
            w = np.exp(lp - lp.max())
            out[row, idx[i]] = (w[:, None] * xs[:, idx[i]]).sum(0) / w.sum()
    return out


def main(rows: int) -> None:
    from scenes import SCENES, best_linear_fill, pixels, random_halves

    warnings.simplefilter("ignore")
    summary: dict[str, dict[str, list[float]]] = {}
    for name, X in (("Landsat 5", pixels(SCENES["landsat5 (7)"]())), ("BigEarthNet", bigearthnet())):
        for seed in (0, 1, 2):
            train, test = random_halves(X, seed)
            test = test[:rows]
            observed = hide_quarter(test, seed)
            gappy, hidden = np.where(observed, test, np.nan), ~observed
            linear = best_linear_fill(train, gappy, observed)
            err_lin = (linear - test) ** 2
            base = err_lin[hidden].mean()
            model = PPA(random_state=0).fit(train)
            standardized = PPA(random_state=0, standardize=True).fit(train)
            params = model.params_.cast(np.dtype(np.float64))
            filled = model.fill(gappy).astype(np.float64)
            fell_back = (np.abs(filled - model.pca_.fill(gappy)) <= 1e-9 * np.abs(test).max())[hidden].mean()
            R = forward(train, params, threads=1)
            fills = {"MAP (library)": filled, "standardize=True MAP": standardized.fill(gappy)}
            priors = log_priors(R, params.explained_variance)
            fills.update(posterior(params, filled, hidden, priors, linearized=("emp",)))
            fills.update({f"{n}-sigma": sigma_mean(params, filled, hidden, priors[n]) for n in ("gauss", "emp")})
            top = int(np.argmax([err_lin[hidden[:, j], j].sum() for j in range(X.shape[1])]))
            print(f"{name} seed {seed} ({rows} pixels; band {top} holds {err_lin[hidden[:, top], top].sum() / err_lin[hidden].sum():.0%} "
                  f"of the linear fill's error; {fell_back:.1%} of the hidden values at the PCA fill):", flush=True)
            for key, f in fills.items():
                e = (f - test) ** 2
                summary.setdefault(key, {}).setdefault(name, []).append(e[hidden].mean() / base)
                print(f"   {key:22s} MSE / best linear {e[hidden].mean() / base:.3f}   band {top}: {e[hidden[:, top], top].mean() / err_lin[hidden[:, top], top].mean():.3f}", flush=True)
    print("summary (MSE / best linear, mean over seeds 0-2 [worst]; the average of the two scenes' means):")
    for key, by_scene in summary.items():
        means = [np.mean(v) for v in by_scene.values()]
        print(f"   {key:22s} " + ", ".join(f"{n} {np.mean(v):.3f} [{np.max(v):.3f}]" for n, v in by_scene.items()) + f"; average {np.mean(means):.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1500)
