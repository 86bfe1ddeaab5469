"""``ppa-xr`` command line."""

from __future__ import annotations

import argparse
import sys

import numpy as np


def _demo(args: argparse.Namespace) -> int:
    """Fit PPA and PCA on a bundled UCI table and print reconstruction errors side by side."""
    from . import PPA
    from .datasets import load_table

    table = load_table(args.table)
    X = table.data
    X = (X - X.min(0)) / (X.max(0) - X.min(0))  # [0, 1] per feature, as in the paper
    rng = np.random.default_rng(args.seed)
    train = rng.permutation(len(X)) < len(X) // 2
    ppa = PPA(random_state=args.seed).fit(X[train])
    pca = PPA(degree=1).fit(X[train])
    print(f"{table.name}: n={len(X)}, d={X.shape[1]}; fit on a random half, scored on the other half")
    print(f"selected degrees: {' '.join(map(str, ppa.degrees_))}")
    print(f"{'k':>3} {'PCA test MSE':>13} {'PPA test MSE':>13} {'100*PPA/PCA':>12}")
    R_ppa, R_pca = ppa.transform(X[~train]), pca.transform(X[~train])
    for k in range(1, X.shape[1]):
        e_pca = np.mean(np.sum((pca.inverse_transform(R_pca[:, :k]) - X[~train]) ** 2, axis=1))
        e_ppa = np.mean(np.sum((ppa.inverse_transform(R_ppa[:, :k]) - X[~train]) ** 2, axis=1))
        print(f"{k:>3} {e_pca:13.6f} {e_ppa:13.6f} {100 * e_ppa / e_pca:12.1f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ppa-xr", description="Principal Polynomial Analysis for rasters")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="PPA vs PCA on bundled data")
    demo.add_argument("--table", default="Sat", help="bundled UCI table (default: Sat)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
