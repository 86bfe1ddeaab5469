"""Choice rules of the whole-fit validation, replayed offline on the evidence ``collect_verdicts.py`` stored.

Each rule sees what ``ppa_xr.core.candidates.select`` could see (the held-out verdicts of every truncation of the half
fits, plain / robust / fenced, on one or both held-out halves) and picks a configuration; its outcome is read from the
unseen pixels' errors of the same truncation of the whole-sample fit (``max_curved=c`` fitted on the whole sample is
that truncation exactly). ``by_mean`` is the library's rule before the check where users look: its choices reproduce
``bench_scenes.py``'s lines of that rule (``nolook``, or ``base`` in the files measured before it; ``--check``), and
``look`` the library's check where users look (``ppa_xr.core.candidates._where_users_look``), and ``look_count`` the library's rule now (with ``_counted``). Cells: worst kept k / worst any k / mean over the kept k over the splits, as ``bench_scenes.py
--summary`` (kept k: the held-out PCA error >= 0.1% of the held-out energy; the unseen errors here are in the fit's
space, from float32 projections, so a ratio at k with errors near 1e-7 of the energy may differ from
``bench_scenes.py``'s).

Rules (``harm(z, a)``: a candidate shows harm where users look when ``R(k) - z se(k) > 100 + a`` at a kept k of the
held-out half):

* ``by_mean``: the choice by the held-out mean (uncapped plain fit unless refused or beaten by a truncation, then the
  robust family).
* ``look``: ``by_mean``, checked where users look: where the choice reads above 101 at a kept k, the robust family joins
  and the admitted curved candidate of the lowest mean within 101 at every kept k replaces it if it gives up no more
  mean than the excess.
* ``harm_zZ``: base, but the uncapped fit also escalates where it shows harm(Z, 1), and a candidate that shows harm is
  not admitted (PCA always is).
* ``harm_zZ_fenced``: the same, the fenced plain family (polynomials fitted within Tukey fences) joining the robust one.
* ``harm_zZ_halves``: the same on both held-out halves pooled (each held-out group judged by the fit that did not see it).
* ``kept_mean``: base, the choice by the mean over the kept k instead of every k.
* ``harm_z1.0_vs_pca``: as ``harm_z1.0`` with no allowance: harm is ``R(k) - se(k) > 100`` at a kept k.
* ``prefer_z0.0_count``: base, but where the chosen candidate shows harm(0, 1) the admitted curved candidate of the
  lowest mean that shows none replaces it (if there is one), and ``count``.
* ``safe_zZ``: only candidates whose upper bound ``R(k) + Z se_tot(k)`` stays within 102 at every kept k are admitted,
  ``se_tot^2 = se^2 + (R_A(k) - R_B(k))^2 / 4`` adding the two half fits' disagreement; lowest pooled mean wins.
* ``count``: base, but where it keeps the uncapped fit the whole-sample fit keeps as many curved steps as the judged
  half fit had (``max_curved = C``), not every curved step the whole sample supports.
* ``look_count``: ``look``, then ``count`` (the default now: ``bench_scenes.py``'s ``base`` since ``COUNT``).
* ``oracle``: per split, the candidate of the lowest unseen mean among those within the bounds (worst kept k <= 102,
  worst any k <= 106) on the unseen pixels themselves: what the candidates allow, not a rule.

Run by hand: ``PYTHONPATH=. python benchmarks/choice_rules.py FOLDER [--check JSONL ...]``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os

import numpy as np

from ppa_xr.core.candidates import Verdict, judge

Key = tuple[str, "int | None"]


def load(path: str) -> dict:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def outcome(S: dict, key: Key) -> tuple[float, float, float]:
    """The whole-sample fit's truncation ``key`` on the unseen pixels: worst kept k, worst any k, mean over kept k."""
    family, c = key
    t = S[f"test_{family}"]
    e = t[-1] if c is None else t[min(c, len(t) - 1)]
    pca, total = S["test_plain"][0], float(S["test_total"])
    r = 100 * np.maximum(e, 1e-9 * total) / np.maximum(pca, 1e-9 * total)
    kept = pca >= 1e-3 * total
    return (float(r[kept].max()), float(r.max()), float(r[kept].mean())) if kept.any() else (100.0, float(r.max()), 100.0)


def verdicts(S: dict, family: str, rounds: tuple[int, ...] = (0,)) -> tuple[dict[Key, Verdict], int]:
    """Every truncation's verdict of ``family`` on the held-out halves ``rounds`` pooled, as select keys them."""
    errors = [S[f"{family}_r{r}"] for r in rounds]
    top = max(len(e) - 1 for e in errors)
    pca = np.concatenate([S[f"pca_r{r}"] for r in rounds])
    total = sum(float(S[f"total_r{r}"]) for r in rounds)
    out = {}
    for c in range(0 if family == "plain" else 1, top + 1):
        held = np.concatenate([e[min(c, len(e) - 1)] for e in errors])
        out[(family, None if c == top else c)] = judge(held, pca, total)
    return out, top


def kept(S: dict, rounds: tuple[int, ...] = (0,)) -> np.ndarray:
    pca = sum(S[f"pca_r{r}"].sum(0) for r in rounds)
    return pca >= 1e-3 * sum(float(S[f"total_r{r}"]) for r in rounds)


def _lowest(admitted: dict[Key, Verdict], score=lambda v: v.mean) -> Key:
    return min(admitted, key=lambda k: (score(admitted[k]), k[1] is None, k[1] or 0, k[0]))


def base(S: dict) -> Key:
    v, top = verdicts(S, "plain")
    if top == 0:
        return ("plain", None)
    uncapped = v[("plain", None)]
    admitted = {k: x for k, x in v.items() if x.admitted or k[1] == 0}
    if uncapped.admitted and not any(x.beats(uncapped) for x in admitted.values()):
        return ("plain", None)
    v.update(verdicts(S, "robust")[0])
    return _lowest({k: x for k, x in v.items() if x.admitted or k[1] == 0})


def look(S: dict) -> Key:
    choice = base(S)
    v, top = verdicts(S, "plain")
    if not top:
        return choice
    v.update(verdicts(S, "robust")[0])
    chosen = v[choice]
    if chosen.worst > 101:
        safe = {k: x for k, x in v.items() if x.admitted and k[1] != 0 and x.worst <= 101 and x.mean - chosen.mean <= chosen.worst - 100}
        choice = _lowest(safe) if safe else choice
    return choice


def harm_rule(z: float, allowance: float = 1.0, families: tuple[str, ...] = ("robust",), rounds: tuple[int, ...] = (0,), by_kept: bool = False):
    def rule(S: dict) -> Key:
        where = kept(S, rounds)

        def harms(x: Verdict) -> bool:
            return z is not None and bool(np.any((x.relative - z * x.se)[where] > 100 + allowance))

        v, top = verdicts(S, "plain", rounds)
        if top == 0:
            return ("plain", None)
        uncapped = v[("plain", None)]
        admitted = {k: x for k, x in v.items() if x.admitted or k[1] == 0}
        if uncapped.admitted and not any(x.beats(uncapped) for x in admitted.values()) and not harms(uncapped):
            return ("plain", None)
        for family in families:
            v.update(verdicts(S, family, rounds)[0])
        admitted = {k: x for k, x in v.items() if (x.admitted and not harms(x)) or k[1] == 0}
        return _lowest(admitted, (lambda x: float(x.relative[where].mean())) if by_kept else (lambda x: x.mean))
    return rule


def count(rule):
    def counted(S: dict) -> Key:
        family, c = rule(S)
        return (family, verdicts(S, family)[1]) if c is None else (family, c)
    return counted


def prefer_rule(z: float, allowance: float):
    def rule(S: dict) -> Key:
        where = kept(S)

        def harms(x: Verdict) -> bool:
            return bool(np.any((x.relative - z * x.se)[where] > 100 + allowance))

        choice = base(S)
        v, top = verdicts(S, "plain")
        if top and (harms(v[("plain", None)]) or choice != ("plain", None)):
            v.update(verdicts(S, "robust")[0])
            if choice == ("plain", None) or harms(v[choice]):
                safe = {k: x for k, x in v.items() if x.admitted and k[1] != 0 and not harms(x)}
                choice = _lowest(safe) if safe else choice
        return choice
    return rule


def oracle(S: dict) -> Key:
    keys = [(f, c) for f in ("plain", "robust", "fenced") for c in range(0 if f == "plain" else 1, len(S[f"test_{f}"]))]
    outs = {k: outcome(S, k) for k in keys}
    within = {k: o for k, o in outs.items() if o[0] <= 102 and o[1] <= 106}
    return min(within, key=lambda k: within[k][2]) if within else min(outs, key=lambda k: outs[k][0])


def safe_rule(z: float, bound: float = 102.0):
    def rule(S: dict) -> Key:
        where = kept(S, (0, 1))
        candidates = {}
        for family in ("plain", "robust"):
            a, b, pooled = verdicts(S, family, (0,))[0], verdicts(S, family, (1,))[0], verdicts(S, family, (0, 1))[0]
            for key, x in pooled.items():
                se2 = x.se ** 2 + ((a[key].relative - b[key].relative) ** 2 / 4 if key in a and key in b else 0)
                if key[1] == 0 or np.all((x.relative + z * np.sqrt(se2))[where] <= bound):
                    candidates[key] = x
        return _lowest(candidates)
    return rule


RULES = {
    "by_mean": base,
    "look": look,
    "kept_mean": harm_rule(None, by_kept=True),
    **{f"harm_z{z}": harm_rule(z) for z in (1.0, 0.5, 0.25, 0.0)},
    "harm_z1.0_vs_pca": harm_rule(1.0, 0.0),
    "harm_z1.0_fenced": harm_rule(1.0, families=("robust", "fenced")),
    "harm_z0.0_fenced": harm_rule(0.0, families=("robust", "fenced")),
    "harm_z0.5_halves": harm_rule(0.5, rounds=(0, 1)),
    "safe_z1.0": safe_rule(1.0),
    "safe_z0.5": safe_rule(0.5),
    "count": count(base),
    "look_count": count(look),
    "prefer_z0.0_count": count(prefer_rule(0.0, 1.0)),
    "oracle": oracle,
}


def scene_of(path: str) -> str:
    return os.path.basename(path).rsplit("_", 2)[0]


def table(folder: str) -> None:
    paths = sorted(glob.glob(os.path.join(folder, "*.npz")))
    evidence = [(scene_of(p), load(p)) for p in paths]
    scenes = list(dict.fromkeys(s for s, _ in evidence))
    cells = {name: {s: [] for s in scenes} for name in RULES}
    for name, rule in RULES.items():
        for s, S in evidence:
            cells[name][s].append(outcome(S, rule(S)))
    for group, members in (("shared scenes", [s for s in scenes if not s[0].isupper()]), ("UCI tables", [s for s in scenes if s[0].isupper()])):
        print(f"\n{group}: worst kept k / worst any k / mean over kept k (over the splits)\n")
        print("| rule | " + " | ".join(members) + " | averaged mean | over a bound |\n|---|" + "---|" * (len(members) + 2))
        for name in RULES:
            row, means, over = [], [], []
            for s in members:
                a = np.array(cells[name][s])
                worst, anyk, mean = a[:, 0].max(), a[:, 1].max(), a[:, 2].mean()
                row.append(f"{worst:.1f} / {anyk:.1f} / {mean:.1f}")
                means.append(mean)
                if worst > 102 or anyk > 106:
                    over.append(s)
            print(f"| {name} | " + " | ".join(row) + f" | {np.mean(means):.2f} | {', '.join(over) or '-'} |")


def check(folder: str, jsonl: list[str], variant: str = "base") -> None:
    """The offline ``by_mean`` against ``bench_scenes.py``'s lines of ``variant``, split by split."""
    for path in jsonl:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r["variant"] != variant:
                    continue
                name = f"{r['scene'].split(' ')[0]}_{r['split']}_{r['seed']}.npz"
                p = os.path.join(folder, name)
                if os.path.exists(p):
                    S = load(p)
                    got = outcome(S, base(S))
                    print(f"{name}: bench {r['worst_kept']:.1f} / {r['worst_any']:.1f} / {r['mean_kept']:.1f}, offline "
                          f"{got[0]:.1f} / {got[1]:.1f} / {got[2]:.1f} ({base(S)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("folder")
    parser.add_argument("--check", nargs="*", default=None, help="bench_scenes.py JSON lines of the choice by the mean")
    parser.add_argument("--variant", default="base", help="their variant name (nolook since the check where users look)")
    args = parser.parse_args()
    if args.check is not None:
        check(args.folder, args.check, args.variant)
    else:
        table(args.folder)


if __name__ == "__main__":
    main()
