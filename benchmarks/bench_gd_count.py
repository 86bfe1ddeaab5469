"""PPA-GD's count of curved steps: which validation of it holds on unseen rows (UCI tables, random halves).

The default PPA-GD fit (``PPA(leading="gd")``) is validated by the PCA-led half-size fit's truncations, and its
count of curved steps is not capped (``ppa_xr.core.candidates.fit_selected``). Variants, monkeypatched here, nothing
in the library:

* ``now``: the library as it is;
* ``pcacount``: the PCA-led half fit's count caps the GD fit (``select(..., count=True)``: the rule tried earlier);
* ``gdhalf``: the half-size fits GD-led (``leading="gd"``: GD's own curved steps are judged, their truncations
  and their count), and the count caps the GD fit;
* ``gdstep``: as ``gdhalf``, the count the first ``c`` whose next truncation's held-out mean is higher by
  ``candidates.SWITCH`` paired standard errors (a curve kept only while it does not harm the held-out mean);
* ``halvings``: the ``now`` fit, its count chosen on four random halvings of its fitted rows' groups
  (:data:`~ppa_xr.core.degrees.PSEUDO_GROUPS` random ones): on each, every curved step's coefficients refitted on one
  half (the fit's axes, degrees and scaling kept, in order) and every truncation read on the other against the PCA
  of the fitted half, at the kept k; the rule of ``ppa_xr.core.shrink._chosen`` over the truncations (the lowest mean
  over the halvings among those whose median worst kept k is within 101; the uncapped fit kept while within unless
  another lowers the mean by a paired standard error), then refitted with ``max_curved`` that count;
* ``halvings_curved``: as ``halvings``, PCA not offered (as the check where users look,
  ``candidates._where_users_look``), and where no curved truncation's median worst kept k is within 101, the fit stands.

Splits and cells as ``bench_defaults.py`` (``100 e_PPA(k) / e_PCA(k)`` on the unseen half, every k; seeds 0..2,
``random_state`` the seed). One JSON line per fit: table, seed, variant, mean and worst over k, the worst's k, the
configuration, the curved steps, the half fit's count, CPU seconds.

Run by hand: ``PYTHONPATH=. python benchmarks/bench_gd_count.py [--variants now,gdhalf] [--tables Pageblocks] [--seeds 3] [--first 0] [--halves 4]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import numpy as np
from bench_defaults import held_out_curve, random_halves

from ppa_xr import PPA
from ppa_xr.core import candidates
from ppa_xr.core.candidates import _basis, judge, truncation_errors
from ppa_xr.core.degrees import PSEUDO_GROUPS
from ppa_xr.core.errors import ALLOWANCE
from ppa_xr.core.params import PPAParams
from ppa_xr.core.shrink import _chosen
from ppa_xr.datasets import UCI_TABLES, load_table

VARIANTS = ("now", "pcacount", "gdhalf", "gdstep", "halvings", "halvings_curved")
SELECT, FIT_PARAMS = candidates.select, candidates.fit_params
#: the halvings of the ``halvings`` variants (``--halves``)
HALVES = 4


def stepwise(selection: candidates.Selection) -> candidates.Selection:
    """The first count ``c`` whose next truncation's held-out mean is beaten by ``c``'s (by SWITCH paired se)."""
    verdicts, top = selection.verdicts, selection.curved[False]
    keys = [(False, c) for c in range(top)] + [(False, None)]
    c = 0
    while c < top and not verdicts[keys[c]].beats(verdicts[keys[c + 1]]):
        c += 1
    return candidates.Selection({"robust": False, "max_curved": c}, verdicts, selection.curved)


@contextlib.contextmanager
def variant(name: str, seen: dict):
    def select(*args, **kwargs):
        if name in ("pcacount", "gdhalf", "gdstep"):
            kwargs["count"] = True
        found = SELECT(*args, **kwargs)
        seen["selection"] = found
        return stepwise(found) if name == "gdstep" and found is not None and found.verdicts else found

    def fit_params(rows, spec, begun=None):  # the validation's half fits: GD-led like the final fit
        return FIT_PARAMS(rows, spec.replace(leading="gd") if name in ("gdhalf", "gdstep") else spec, begun=begun)

    candidates.select, candidates.fit_params = select, fit_params
    try:
        yield
    finally:
        candidates.select, candidates.fit_params = SELECT, FIT_PARAMS


def refitted(params: PPAParams, rows: np.ndarray, rescale: bool = True) -> PPAParams:
    """``params`` with every curved step's coefficients refitted on ``rows`` in order (axes and degrees kept; with
    ``rescale``, each step's centre and scale those of ``rows``' projections, as a fit of them would have, so the
    other half's rows beyond them take the fit's tails instead of the polynomial's extrapolation)."""
    states = params.to_fit_space(rows) @ params.rotation.T
    arrays = params.arrays()
    forward, bias = arrays["forward"].copy(), arrays["forward_bias"].copy()
    center, scale = arrays["center"].copy(), arrays["scale"].copy()
    for p in params.curved_steps():
        if rescale:
            lo, hi = states[:, p].min(), states[:, p].max()
            center[p], scale[p] = (hi + lo) / 2, max((hi - lo) / 2, np.finfo(float).tiny)
            params = PPAParams(**params.arrays() | {"center": center, "scale": scale}, tails=params.tails)
        design = _basis(params, p, states[:, p])
        coef = np.linalg.lstsq(design, states[:, p + 1:], rcond=None)[0]
        bias[p, p + 1:], forward[p, : len(design.T) - 1, p + 1:] = coef[0], coef[1:]
        states[:, p + 1:] -= design @ coef
    return PPAParams(**params.arrays() | {"forward": forward, "forward_bias": bias}, tails=params.tails)


def halved_count(params: PPAParams, X: np.ndarray, rng: np.random.Generator, curved_only: bool = False) -> int:
    """The ``halvings`` variant's count of curved steps (module docstring)."""
    groups = min(PSEUDO_GROUPS, len(X))
    labels = rng.permutation(len(X)) % groups
    worst, mean = [], []
    for _ in range(HALVES):
        side = (rng.permutation(groups) % 2 == 0)[labels]
        order = np.argsort(labels[~side], kind="stable")
        held, held_labels = X[~side][order], labels[~side][order]
        bounds = np.concatenate([[0], np.flatnonzero(np.diff(held_labels)) + 1, [len(held)]])
        fitted = refitted(params, X[side])
        errors = truncation_errors(fitted, X[side], held, bounds, moments=False)
        total = float(np.sum(fitted.to_fit_space(held) ** 2))
        verdicts = [judge(e, errors[0], total) for e in errors[::-1]]  # the uncapped fit first, as shrink's GRID
        worst.append([v.worst for v in verdicts])
        mean.append([v.mean for v in verdicts])
    worst, mean = np.array(worst), np.array(mean)
    if curved_only:  # PCA (the last column) is not offered, and where no curved truncation is within, the fit stands
        worst, mean = worst[:, :-1], mean[:, :-1]
        if not (np.median(worst, axis=0) <= 100 * (1 + ALLOWANCE)).any():
            return len(params.curved_steps())
    return len(params.curved_steps()) - _chosen(worst, mean)


def run(name: str, seed: int, fit: np.ndarray, unseen: np.ndarray, which: str) -> dict:
    seen: dict = {}
    start = time.process_time()
    with variant(which, seen):
        model = PPA(leading="gd", random_state=seed).fit(fit)
    if which.startswith("halvings"):
        count = halved_count(model.params_, fit, np.random.default_rng(seed), which == "halvings_curved")
        if count < len(model.params_.curved_steps()):
            model = PPA(leading="gd", random_state=seed, configuration="fixed", max_curved=count).fit(fit)
    seconds = time.process_time() - start
    curve = held_out_curve(model, unseen)
    selection = seen.get("selection")
    return {"table": name, "seed": seed, "variant": which, "mean": round(float(curve.mean()), 2), "worst": round(float(curve.max()), 2),
            "at": int(curve.argmax()) + 1, "max_curved": model.configuration_["max_curved"],
            "curved": [int(p) for p in model.params_.curved_steps()],
            "half": None if selection is None else selection.curved.get(False), "cpu": round(seconds, 2)}


def main() -> None:
    global HALVES
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--tables", default=",".join(UCI_TABLES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--halves", type=int, default=HALVES, help="the halvings of the halvings variants")
    args = parser.parse_args()
    HALVES = args.halves
    for name in args.tables.split(","):
        for seed, fit, unseen in random_halves(load_table(name).normalised(), args.first + args.seeds):
            if seed < args.first:
                continue
            for which in args.variants.split(","):
                print(json.dumps(run(name, seed, fit, unseen, which)), flush=True)


if __name__ == "__main__":
    main()
