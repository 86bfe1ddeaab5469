"""PPA-GD's default with and without the curves' shares of signal, with and without the count (UCI tables, random halves).

One JSON line per table and seed: the default ``PPA(leading="gd", random_state=seed)`` on ``bench_defaults.py``'s
split, with ``ppa_xr.core.shrink.COUNT`` on (``count``) and off (``nocount``), each as [mean over every k, worst k,
``max_curved``, curved steps] on the unseen half (``bench_defaults.held_out_curve``). ``SHARES=0`` in the environment
switches the shares off (``ppa_xr.core.candidates.SHARES = False``: the default before them).

Run by hand: ``PYTHONPATH=. [SHARES=0] python benchmarks/bench_gd_shares.py Pageblocks 8``.
"""

from __future__ import annotations

import json
import os
import sys

from bench_defaults import held_out_curve, random_halves

from ppa_xr import PPA
from ppa_xr.core import candidates, shrink
from ppa_xr.datasets import load_table


def main() -> None:
    candidates.SHARES = os.environ.get("SHARES", "1") == "1"
    name, seeds = sys.argv[1], int(sys.argv[2])
    for seed, fit, unseen in random_halves(load_table(name).normalised(), seeds):
        row: dict = {"table": name, "seed": seed}
        for count in (True, False):
            shrink.COUNT = count
            model = PPA(leading="gd", random_state=seed).fit(fit)
            curve = held_out_curve(model, unseen)
            row["count" if count else "nocount"] = [round(float(curve.mean()), 2), round(float(curve.max()), 2),
                                                    model.configuration_["max_curved"], len(model.params_.curved_steps())]
        shrink.COUNT = True
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
