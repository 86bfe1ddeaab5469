"""The PCA-led default with the shares of signal on and off on one random half of a UCI table, over the fit's random states.

``states``: per ``random_state`` 0..7, worst kept k / worst any k / mean over kept k on the unseen half
(``scenes.user_k_metrics``), the last curve's factor (``configuration_["shrink"]``, :mod:`ppa_xr.core.shrink`) and the
curved steps kept (``max_curved``), shares on | off. ``halvings``: at one random state, the halvings the factor is chosen
on (median worst and mean ratio per factor of ``shrink.GRID``), the factor chosen and the unseen ratio per k.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_shrink_flip.py states|halvings Pageblocks 7 [random_state]``.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.environ.get("PPA_SCENES", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench")))
import scenes  # noqa: E402

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core import candidates, shrink  # noqa: E402
from ppa_xr.datasets import load_table  # noqa: E402

CHOSEN = shrink._chosen


def spy(worst: np.ndarray, mean: np.ndarray) -> int:
    i = CHOSEN(worst, mean)
    print(f"  factors {shrink.GRID}\n  median worst {np.round(np.median(worst, 0), 1)}\n  mean {np.round(mean.mean(0), 1)}\n  chosen {shrink.GRID[i]}")
    return i


def main() -> None:
    warnings.simplefilter("ignore")
    mode, name, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fit, unseen = scenes.random_halves(load_table(name).normalised(), seed)
    if mode == "halvings":
        shrink._chosen = spy
    for state in range(8) if mode == "states" else [int(sys.argv[4]) if len(sys.argv) > 4 else 0]:
        out = []
        for shares in (True, False):
            candidates.SHARES = shares
            if mode == "halvings":
                print(f"shares {shares}")
            model = PPA(random_state=state).fit(fit)
            worst_kept, worst_any, mean_kept, _ = scenes.user_k_metrics(model, unseen)
            if mode == "halvings":
                ratio = np.asarray(model.reconstruction_mse(unseen))[:-1] / np.asarray(model.pca_.reconstruction_mse(unseen))[:-1]
                print(f"  unseen {np.round(100 * ratio, 1)}")
            out.append(f"{worst_kept:6.1f} {worst_any:6.1f} {mean_kept:5.1f} factor {model.configuration_.get('shrink')} "
                       f"max_curved {model.configuration_['max_curved']}")
        print(f"{name} seed {seed} random_state {state}: " + " | ".join(out), flush=True)
    candidates.SHARES = True


if __name__ == "__main__":
    main()
