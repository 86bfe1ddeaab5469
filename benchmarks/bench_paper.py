"""The paper protocol's reconstruction error alone, per table, with the default's rules switched on or off.

The protocol of ``examples/paper_tables.py`` (10 random halves of each table normalised to [0, 1], ``degree=(1, 2, 3, 4,
5)``, ``random_state`` the split's seed, PCA of the same training half): 100 x e_PPA(k) / e_PCA(k) on the test (and the
training) half, averaged over the splits, then its mean over every k = 1..d-1, without the multi-information part.
One JSON line per table: the means, the mean curve's worst k, each split's test mean and the configuration chosen.

Switches are ``module.NAME=value`` assignments made before any fit, e.g. ``ppa_xr.core.shrink.SHRINK=False``,
``ppa_xr.core.candidates.COUNT=False``, ``ppa_xr.core.candidates.LOOK=False`` (the default's steps 5, 6 and 7 off).

Run by hand: ``PYTHONPATH=. python benchmarks/bench_paper.py Pageblocks Segmentation [--set ppa_xr.core.shrink.SHRINK=False]``
(another commit: a detached worktree of it on ``PYTHONPATH``; the switches that commit lacks are refused).
"""
from __future__ import annotations

import argparse
import ast
import importlib
import json

import numpy as np

from ppa_xr import PPA
from ppa_xr.datasets import UCI_TABLES, load_table


def switch(assignment: str) -> None:
    key, value = assignment.split("=", 1)
    module, name = key.rsplit(".", 1)
    try:
        target = importlib.import_module(module)
    except ModuleNotFoundError:
        raise SystemExit(f"no module {module} at this commit") from None
    if not hasattr(target, name):
        raise SystemExit(f"{module} has no {name} at this commit")
    setattr(target, name, ast.literal_eval(value))


def table(name: str, splits: int) -> dict:
    test, train, configurations = [], [], []
    X = load_table(name).normalised()
    for seed in range(splits):
        fitted = np.random.default_rng(seed).permutation(len(X)) < len(X) // 2
        model = PPA(degree=(1, 2, 3, 4, 5), random_state=seed).fit(X[fitted])
        test.append(model.evaluate(X[~fitted]).relative)
        train.append(model.evaluate(X[fitted]).relative)
        configurations.append(getattr(model, "configuration_", None))
    curve = np.mean(test, axis=0)
    return {"table": name, "test": round(float(curve.mean()), 3), "train": round(float(np.mean(train, axis=0).mean()), 3),
            "worst_k": round(float(curve.max()), 2), "test_per_split": [round(float(c.mean()), 2) for c in test],
            "configurations": configurations}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("tables", nargs="*", default=list(UCI_TABLES))
    parser.add_argument("--set", action="append", default=[], help="module.NAME=value, before any fit")
    parser.add_argument("--splits", type=int, default=10)
    args = parser.parse_args()
    for assignment in args.set:
        switch(assignment)
    for name in args.tables:
        print(json.dumps(table(name, args.splits) | {"set": args.set}), flush=True)


if __name__ == "__main__":
    main()
