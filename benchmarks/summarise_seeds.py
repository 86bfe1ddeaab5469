"""The shares of signal on and off over many seeds: tables of ``bench_scenes.py --variants base,noshares --seeds ...`` lines.

Per scene or table and variant: the worst kept k and worst any k (max over the splits, their mean in brackets), the mean
over kept k (mean over the splits, the worst split's in brackets) and the splits over the bounds; then the paired
differences (``base`` minus ``noshares``, per split), and the random halves whose excess at the worst k sits in a few
anomalous unseen rows (the 3 rows of most excess carry at least half of it, the top row's PCA error is at least 50 times
the mean one; ``bench_scenes.edge_rows``).

Run by hand: ``python benchmarks/summarise_seeds.py benchmarks/results/scenes/uci_seeds10.jsonl 3,4,5,6,7,8,9``.
"""
from __future__ import annotations

import json
import sys

import numpy as np


def edge_driven(r: dict) -> bool:
    return r.get("share_of_top", [None, None])[1] is not None and r["share_of_top"][1] >= 0.5 and r["top_pca_error_over_mean"] >= 50


def main() -> None:
    rows = [json.loads(line) for line in open(sys.argv[1])]
    seeds = {int(s) for s in sys.argv[2].split(",")}
    rows = [r for r in rows if r["seed"] in seeds]
    cells: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        cells.setdefault((r["scene"], r["variant"]), []).append(r)
    print(f"seeds {sys.argv[2]}\n\n| scene | variant | splits | worst kept k: max (mean) | worst any k: max (mean) | mean over kept k: mean (worst) "
          "| splits with kept > 102 / any > 106 / any > 101 | halves over 101 driven by edge rows |\n|---|---|---|---|---|---|---|---|")
    for (scene, v), rs in cells.items():
        wk, wa, mk = (np.array([r[f] for r in rs]) for f in ("worst_kept", "worst_any", "mean_kept"))
        edges = ", ".join(f"{r['seed']}: {r['worst_any']:.1f}{' (kept k)' if r['k_kept'] else ''} -> {r['without_top3']:.1f} without 3 rows"
                          for r in rs if r["split"] == "halves" and r["worst_any"] > 101 and edge_driven(r))
        print(f"| {scene} | {v} | {len(rs)} | {wk.max():.1f} ({wk.mean():.1f}) | {wa.max():.1f} ({wa.mean():.1f}) | {mk.mean():.2f} ({mk.max():.2f}) "
              f"| {(wk > 102).sum()} / {(wa > 106).sum()} / {(wa > 101).sum()} | {edges or '-'} |")
    for v in dict.fromkeys(v for _, v in cells):
        rs = [r for (_, vv), part in cells.items() if vv == v for r in part]
        means = [np.mean([r["mean_kept"] for r in part]) for (_, vv), part in cells.items() if vv == v]
        print(f"\n{v}: worst kept k {max(r['worst_kept'] for r in rs):.1f}, worst any k {max(r['worst_any'] for r in rs):.1f}, "
              f"mean over kept k averaged over {len(means)} scenes {np.mean(means):.2f}; means over splits of the worst kept k "
              f"{np.mean([r['worst_kept'] for r in rs]):.2f}, of the worst any k {np.mean([r['worst_any'] for r in rs]):.2f}")
    paired(rows)


def paired(rows: list[dict]) -> None:
    """Per scene, ``base`` minus ``noshares`` split by split: mean (min, max), and the splits better / worse by over 0.1."""
    by = {(r["scene"], r["split"], r["seed"], r["variant"]): r for r in rows}
    print("\n| scene | splits | worst any k, on - off: mean (min, max); better / worse | worst kept k | mean over kept k |\n|---|---|---|---|---|")
    total: dict[str, list[float]] = {"worst_any": [], "worst_kept": [], "mean_kept": []}
    for scene in dict.fromkeys(k[0] for k in by):
        keys = [k for k in by if k[0] == scene and k[3] == "base" and k[:3] + ("noshares",) in by]
        cols = []
        for f in total:
            diff = np.array([by[k][f] - by[k[:3] + ("noshares",)][f] for k in keys])
            total[f] += list(diff)
            cols.append(f"{diff.mean():+.2f} ({diff.min():+.1f}, {diff.max():+.1f}); {(diff < -0.1).sum()} / {(diff > 0.1).sum()}")
        print(f"| {scene} | {len(keys)} | " + " | ".join(cols) + " |")
    cols = [f"{np.mean(d):+.2f} ({np.min(d):+.1f}, {np.max(d):+.1f}); {(np.array(d) < -0.1).sum()} / {(np.array(d) > 0.1).sum()}" for d in total.values()]
    print(f"| all | {len(total['worst_any'])} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main()
