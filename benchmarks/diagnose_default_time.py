"""Where the default fit's time goes against the fixed fit's: a wall-clock and CPU timeline of their stages.

The default ``PPA()`` (``configuration="validated"``) and ``PPA(configuration="fixed")`` are timed on the curved mixtures
of ``bench_defaults.py`` (``make_curved_mixture(n, n_bands=d, random_state=0)``), one warm-up each, then ``--repeat``
rounds in turn. Each stage is a function of the fit, wrapped here with ``time.perf_counter`` and ``time.process_time``
(nothing in the package changes); a stage's time includes the stages under it, and each is listed under the path of
stages that called it, summed over its calls in one fit, the median over the rounds. The stages:

* the validation (``candidates.select``): each family's half-size fit (``half fit, plain``; ``half fit, robust``
  where the validation escalates): the halves gathered (``gather``), the start (``start``: centring, covariance,
  eigendecomposition; the robust fit takes the plain one's and centres the rows again) and steps (``loop``); each
  family's truncations (``truncations, plain`` / ``robust``): the held-out rows' second moments
  (``Groups``, made once), the truncation moments (``Moments``: the bases' pass over the rows, ``products``), the
  training side's from the half fit's carried covariances (``Carried``, ``carried``) and their PCA and held-out
  errors (``measure``);
* the final fit (``fit``: ``begin``, ``loop``), the last curve's factor (``shrink.choose``) and shrunk refit
  (``shrink.shrunk``), the outputs' marginals (``with_marginals``); the fixed fit's the same, less the validation
  and the shrinkage.

Inside each loop: ``fit_step`` (all steps), ``curve`` (a curved step's least squares on every row),
``advance`` (the residual's update), ``principal`` (the eigenbasis after a curved step: an eigendecomposition
and the selection rows turned), ``degrees`` (each block's per-group Gram matrices), ``rotation`` (a capped fit's
plain rotation).

Where the validation runs its held-out measurement on two threads (``core/blas.py``'s ``product_threads``: a core
that the load leaves idle), the second thread's stages are listed under ``(beside)``, their wall time overlapping the
main thread's stages, and every CPU time is the process's (both threads'): the main thread's stages read their wall
time as it runs alongside.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_default_time.py [--sizes 200000x198,200000x36] [--repeat 3]
[--threads 2]`` (``--threads``: the validation's threads forced, whatever the load).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import threading
import time

import numpy as np
from common import machine

from ppa_xr import PPA
from ppa_xr.core import candidates, ppa, shrink, steps, ties
from ppa_xr.datasets.synthetic import make_curved_mixture
from ppa_xr.model import estimator

FAMILY = {False: "plain", True: "robust"}
#: (module or class, attribute, stage name or a function of the call's arguments giving it)
STAGES = [
    (candidates, "select", "validation"), (candidates._Validation, "_rows", "gather"), (candidates._Starts, "of", "start"),
    (candidates._Validation, "_fit", lambda args: f"half fit, {FAMILY[args[2]]}"),
    (candidates._Validation, "_errors", lambda args: f"truncations, {FAMILY[args[3]]}"),
    (candidates.Groups, "__init__", "Groups"), (candidates._Moments, "__init__", "Moments"),
    (candidates._Moments, "_products", "products"), (candidates, "_measure", "measure"), (candidates, "judge", "judge"),
    *([(candidates._Carried, "__init__", "Carried"), (candidates._Carried, "correct", "carried")] if hasattr(candidates, "_Carried") else []),
    (candidates, "fit", "fit"), (ppa, "begin", "begin"), (ppa, "_centred", "centring"), (ppa, "_covariance", "covariance"),
    (ppa, "eigenbasis", "eigh"), (ppa._Loop, "run", "loop"), (ppa, "fit_step", "fit_step"), (steps, "_polynomial", "curve"),
    (steps.Residual, "advance", "advance"), (steps.Residual, "to_principal_axes", "principal"),
    (ppa, "_degree_choices", "degrees"), (ppa._Loop, "_rotation", "rotation"), (ppa, "_compose", "compose"),
    (shrink, "choose", "shrink.choose"), (shrink, "shrunk", "shrink.shrunk"), (shrink, "with_marginals", "with_marginals"),
    (shrink, "tied", "tied"), (ties, "_squares", "tie squares"), (ties, "tied_runs", "tied runs"),
    (candidates, "fit_selected", "candidates.fit_selected"), (estimator, "fit_selected", "shrink.fit_selected"),
]


class Timeline:
    """Each stage's wall and CPU seconds, keyed by the path of stages that called it, summed over the calls."""

    def __init__(self) -> None:
        self.local = threading.local()  # each thread's own path: the validation's second thread starts its own
        self.times: dict[tuple[str, ...], list[float]] = {}
        self.lock = threading.Lock()

    @property
    def path(self) -> list[str]:
        """The calling thread's path of stages; a second thread's starts at ``(beside)``."""
        if not hasattr(self.local, "path"):
            self.local.path = [] if threading.current_thread() is threading.main_thread() else ["(beside)"]
        return self.local.path

    def wrap(self, owner: object, attribute: str, name) -> None:
        inner = getattr(owner, attribute)

        @functools.wraps(inner)
        def timed(*args, **kwargs):
            self.path.append(name if isinstance(name, str) else name(args))
            key, wall, cpu = tuple(self.path), time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                with self.lock:
                    spent = self.times.setdefault(key, [0.0, 0.0, 0])
                    spent[0] += time.perf_counter() - wall
                    spent[1] += time.process_time() - cpu  # the process's: both threads' CPU while they overlap
                    spent[2] += 1
                self.path.pop()

        setattr(owner, attribute, timed)

    def run(self, fn) -> tuple[dict[tuple[str, ...], list[float]], float, float, object]:
        self.times = {}
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        return self.times, time.perf_counter() - wall, time.process_time() - cpu, out


def digest(model: PPA) -> str:
    """The fitted parameters' SHA-256 (16 hex digits): the same map bit for bit."""
    h = hashlib.sha256()
    for name, value in sorted(model.params_.arrays().items()):
        h.update(name.encode())
        h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()[:16]


def report(name: str, rounds: list[tuple[dict, float, float, object]], minimum: float) -> None:
    walls, cpus = [r[1] for r in rounds], [r[2] for r in rounds]
    model = rounds[-1][3]
    print(f"\n{name}: wall {', '.join(f'{w:.3f}' for w in walls)} s, CPU {', '.join(f'{c:.3f}' for c in cpus)} s; "
          f"{getattr(model, 'configuration_', None)}; params {digest(model)}")
    print("| stage | calls | wall (s) | CPU (s) |\n|---|---|---|---|")
    keys = {k for r in rounds for k in r[0]}
    order: dict[tuple[str, ...], int] = {}
    for r in rounds:  # first-seen order of the paths, as they were called
        for k in r[0]:
            order.setdefault(k, len(order))
    for key in sorted(keys, key=lambda k: _first_call(k, order)):
        wall = float(np.median([r[0].get(key, [0.0, 0.0, 0])[0] for r in rounds]))
        cpu = float(np.median([r[0].get(key, [0.0, 0.0, 0])[1] for r in rounds]))
        calls = rounds[-1][0].get(key, [0, 0, 0])[2]
        if cpu >= minimum or wall >= minimum:
            print(f"| {'  ' * (len(key) - 1)}{key[-1]} | {calls} | {wall:.3f} | {cpu:.3f} |")


def _first_call(key: tuple[str, ...], order: dict) -> tuple:
    """Paths sorted as a tree: each prefix's position, then the path's own."""
    return tuple(order.get(key[:i], 0) for i in range(1, len(key) + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200000x198,200000x36")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, help="the validation's threads, in place of product_threads' rule (the load)")
    parser.add_argument("--minimum", type=float, default=0.005, help="stages below this many seconds are left out")
    args = parser.parse_args()
    print(machine())
    if args.threads is not None:  # before the timeline wraps it: the forced count reaches the real select
        real = candidates.select
        candidates.select = functools.wraps(real)(lambda *a, **k: real(*a, **{**k, "threads": args.threads}))
    timeline = Timeline()
    for owner, attribute, name in STAGES:
        timeline.wrap(owner, attribute, name)
    for size in args.sizes.split(","):
        n, d = (int(v) for v in size.split("x"))
        X = make_curved_mixture(n, n_bands=d, random_state=0).data
        cases = {"default": lambda: PPA(random_state=0).fit(X), "fixed": lambda: PPA(random_state=0, configuration="fixed").fit(X)}
        for fn in cases.values():
            fn()
        rounds: dict[str, list] = {name: [] for name in cases}
        for _ in range(args.repeat):
            for name, fn in cases.items():
                rounds[name].append(timeline.run(fn))
        print(f"\n## curved mixture {n} x {d}, load {os.getloadavg()[0]:.2f}; default / fixed: "
              f"wall {min(r[1] for r in rounds['default']) / min(r[1] for r in rounds['fixed']):.2f}x, "
              f"CPU {min(r[2] for r in rounds['default']) / min(r[2] for r in rounds['fixed']):.2f}x (best runs)")
        for name, runs_ in rounds.items():
            report(name, runs_, args.minimum)


if __name__ == "__main__":
    main()
