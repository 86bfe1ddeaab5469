"""What the whole-fit validation's held-out half reads at the k just below the kept line, against the unseen half.

For each random half (``scenes.random_halves``, seeds 0-29, fit random state 0, the default ``PPA()``) of a UCI table
normalised to [0, 1]: the k at which PCA's error on the validation's held-out half is 0.01-0.1% of its energy (within a
decade below the 0.1% line of the kept k), the chosen candidate's held-out ratio there (``candidates.select``'s
verdict), and the final fit's ratio there on the unseen half, with PCA's error share on both halves. One JSON line per
such k. It says whether the held-out half's reading at those k foretells the unseen excess (curves13: it does not).
Numbers only; nothing in the library changes.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_near_line.py Segmentation``.
"""
from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.environ.get("PPA_SCENES", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench")))
import scenes  # noqa: E402

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core import candidates  # noqa: E402
from ppa_xr.datasets import load_table  # noqa: E402

JUDGE, SELECT = candidates.judge, candidates.select
shares: list[np.ndarray] = []
selections: list[candidates.Selection] = []


def judge(errors, pca, total, components=None):
    """The validation's verdict, with its held-out PCA error shares per k recorded."""
    shares.append(pca.sum(axis=0) / total)
    return JUDGE(errors, pca, total, components)


def select(*args, **kwargs):
    """The validation's selection, recorded."""
    found = SELECT(*args, **kwargs)
    selections.append(found)
    return found


def main(table: str) -> None:
    candidates.judge, candidates.select = judge, select
    X = load_table(table).normalised()
    for seed in range(30):
        tr, te = scenes.random_halves(X, seed)
        shares.clear()
        selections.clear()
        model = PPA(random_state=0).fit(tr)
        if not selections or selections[0] is None or not shares:
            continue
        share, found = shares[0], selections[0]
        key = (found.choice["robust"], found.choice["max_curved"])
        verdict = found.verdicts.get(key) or found.verdicts[(key[0], None)]  # an uncapped choice is counted at its half's C
        e = np.asarray(model.reconstruction_mse(te))[:-1]
        ep = np.asarray(model.pca_.reconstruction_mse(te))[:-1]
        total = float(np.mean(np.sum((te - te.mean(0)) ** 2, 1)))
        for k in np.flatnonzero((share >= candidates.KEPT / 10) & (share < candidates.KEPT)):
            print(json.dumps({"table": table, "seed": seed, "k": int(k) + 1, "heldout_share": float(f"{share[k]:.2g}"),
                              "unseen_share": float(f"{ep[k] / total:.2g}"), "chosen": str(key),
                              "heldout_ratio": round(float(verdict.relative[k]), 1),
                              "unseen_ratio": round(float(100 * e[k] / ep[k]), 1)}), flush=True)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    for name in sys.argv[1:]:
        main(name)
