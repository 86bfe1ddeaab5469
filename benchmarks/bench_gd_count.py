"""PPA-GD's count of curved steps: which validation of it holds on unseen rows (UCI tables, random halves).

The default PPA-GD fit (``PPA(leading="gd")``) is validated by the PCA-led half-size fit's truncations
(``ppa_xr.core.candidates.fit_selected``), and then keeps the count of curved steps that halvings of its groups
support (``ppa_xr.core.shrink.counted``). Variants (monkeypatched here, nothing in the library):

* ``now``: the library as it is;
* ``nocount``: without the halvings' count (``ppa_xr.core.shrink.COUNT = False``: the default before it);
* ``pcacount``: as ``nocount``, the PCA-led half fit's count capping the GD fit (``select(..., count=True)``: the
  rule tried earlier);
* ``gdhalf``: as ``nocount``, the half-size fits GD-led (``leading="gd"``: GD's own curved steps judged, their
  truncations and their count), and the count capping the GD fit;
* ``gdstep``: as ``gdhalf``, the count the first ``c`` whose next truncation's held-out mean is higher by
  ``candidates.SWITCH`` paired standard errors (a curve kept only while it does not harm the held-out mean).

``--halves``: the halvings of the count (``ppa_xr.core.shrink.HALVES``, 4; the PCA-led fits' shrinkage uses them too).
Splits and cells as ``bench_defaults.py`` (``100 e_PPA(k) / e_PCA(k)`` on the unseen half, every k, errors below
1e-9 of its energy equal; ``random_state`` the seed). One JSON line per fit: table, seed, variant, mean and worst over
k, the worst's k, ``max_curved``, the curved steps, the PCA-led (or GD-led) half fit's count, CPU seconds.

Run by hand: ``PYTHONPATH=. python benchmarks/bench_gd_count.py [--variants now,nocount] [--tables Pageblocks] [--seeds 3] [--first 0] [--halves 4]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time

import numpy as np
from bench_defaults import held_out_curve, random_halves

from ppa_xr import PPA
from ppa_xr.core import candidates, shrink
from ppa_xr.datasets import UCI_TABLES, load_table

VARIANTS = ("now", "nocount", "pcacount", "gdhalf", "gdstep")
SELECT, FIT = candidates.select, candidates.fit


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

    def fit(rows, spec, **kwargs):  # the validation's half fits (those that carry their covariances): GD-led like the final fit
        half = kwargs.get("carry", False) and name in ("gdhalf", "gdstep")
        return FIT(rows, spec.replace(leading="gd") if half else spec, **kwargs)

    candidates.select, candidates.fit, shrink.COUNT = select, fit, name == "now"
    try:
        yield
    finally:
        candidates.select, candidates.fit, shrink.COUNT = SELECT, FIT, True


def run(name: str, seed: int, fit: np.ndarray, unseen: np.ndarray, which: str) -> dict:
    seen: dict = {}
    start = time.process_time()
    with variant(which, seen):
        model = PPA(leading="gd", random_state=seed).fit(fit)
    seconds = time.process_time() - start
    curve = held_out_curve(model, unseen)
    selection = seen.get("selection")
    return {"table": name, "seed": seed, "variant": which, "mean": round(float(curve.mean()), 2), "worst": round(float(curve.max()), 2),
            "at": int(curve.argmax()) + 1, "max_curved": model.configuration_["max_curved"],
            "curved": [int(p) for p in model.params_.curved_steps()],
            "half": None if selection is None else selection.curved.get(False), "cpu": round(seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--tables", default=",".join(UCI_TABLES))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--halves", type=int, default=shrink.HALVES, help="the halvings of the count")
    args = parser.parse_args()
    shrink.HALVES = args.halves
    for name in args.tables.split(","):
        for seed, fit, unseen in random_halves(load_table(name).normalised(), args.first + args.seeds):
            if seed < args.first:
                continue
            for which in args.variants.split(","):
                print(json.dumps(run(name, seed, fit, unseen, which)), flush=True)


if __name__ == "__main__":
    main()
