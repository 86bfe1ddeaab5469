"""A ``big_cube.py`` cube on a ``distributed.LocalCluster`` with worker memory limits: the fit, the 3-component
transform and the whole information report, each written or computed end to end, against one plain pass
(``cube.mean().compute()``).

The cube is opened lazily from zarr in its own chunks. After a warm-up (every step on 2 chunks, not
counted: the workers' imports and compiled loops), each step runs once, in this order: the pass of
``cube.mean()``, the fit with the default configuration (its sampling pass reads the whole cube), the
3-component transform written with ``to_zarr``, the whole report written with ``to_zarr``, and the fit with
``configuration="fixed"``. For each step: wall time, CPU time of this process and of every worker (``psutil``,
so other load on the machine shows as wall time beyond the CPU time), the load average before and after, the
peak resident memory of each worker and of this process (sampled every ``--interval`` seconds), the bytes the
workers spilled to disk, and the workers restarted. Ratios are to the transform. The worker logs' warnings
(memory, pauses, spilling) are printed at the end.

Run by hand::

    python benchmarks/bench_cluster.py --cube CUBE.zarr [--side 4096] [--rows START:STOP] [--workers 2] [--threads 1]
        [--memory-limit 3GB] [--scratch DIR] [--skip fixed,report] [--interval 0.5] [--no-warm-up]

Outputs go to a fresh folder under ``--scratch`` (default: next to the cube), removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable

import psutil

STEPS = ("mean", "fit", "transform", "report", "fixed")


class _Sampler:
    """Peak RSS of each worker process (by worker name, through its nanny's pid) and of this process,
    and the CPU times of both, sampled every ``interval`` seconds in a background thread."""

    def __init__(self, cluster, interval: float) -> None:
        self._cluster, self._interval = cluster, interval
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.peaks: dict[str, int] = {}
        self.client_peak = 0
        self.pids: dict[str, set[int]] = {}

    def _procs(self) -> dict[str, psutil.Process]:
        procs = {}
        for name, nanny in list(self._cluster.workers.items()):
            pid = getattr(nanny, "pid", None)  # the nanny's worker process
            if pid is not None:
                try:
                    procs[str(name)] = psutil.Process(pid)
                except psutil.NoSuchProcess:
                    pass
        return procs

    def cpu(self) -> tuple[float, dict[str, float]]:
        """CPU seconds (user + system) of this process and of each live worker process."""
        own = psutil.Process().cpu_times()
        workers = {}
        for name, proc in self._procs().items():
            try:
                t = proc.cpu_times()
                workers[name] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return own.user + own.system, workers

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._done.is_set():
            self.client_peak = max(self.client_peak, me.memory_info().rss)
            for name, proc in self._procs().items():
                try:
                    self.peaks[name] = max(self.peaks.get(name, 0), proc.memory_info().rss)
                    self.pids.setdefault(name, set()).add(proc.pid)
                except psutil.NoSuchProcess:
                    pass
            self._done.wait(self._interval)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def _spilled(dask_worker) -> float:
    """Bytes this worker has written to disk so far (its spill metrics)."""
    return float(sum(v for k, v in dask_worker.digests_total.items() if "disk-write" in str(k) and "bytes" in str(k)))


def _step(name: str, fn: Callable[[], object], cluster, client, interval: float) -> dict:
    """Run one step and measure it."""
    spilled_before = client.run(_spilled)
    load_before = os.getloadavg()[0]
    with _Sampler(cluster, interval) as sampler:
        cpu0, wcpu0 = sampler.cpu()
        start = time.perf_counter()
        error = None
        try:
            fn()
        except Exception as exc:  # a killed worker or a memory error: recorded, the other steps still run
            error = f"{type(exc).__name__}: {exc}"
        wall = time.perf_counter() - start
        cpu1, wcpu1 = sampler.cpu()
    spilled_after = client.run(_spilled)
    restarted = [w for w, pids in sampler.pids.items() if len(pids) > 1] + [w for w in wcpu0 if w not in wcpu1]
    return {
        "step": name, "wall": wall, "client_cpu": cpu1 - cpu0,
        "worker_cpu": sum(wcpu1[w] - wcpu0.get(w, 0.0) for w in wcpu1 if w in wcpu0),
        "load": (load_before, os.getloadavg()[0]), "peaks": dict(sampler.peaks), "client_peak": sampler.client_peak,
        "spilled": sum(spilled_after.values()) - sum(spilled_before.get(w, 0.0) for w in spilled_after),
        "restarted": restarted, "error": error,
    }


def _print_row(r: dict, transform: dict | None) -> None:
    cpu = r["client_cpu"] + r["worker_cpu"]
    if transform and not r["error"] and not transform["error"]:
        ratio = f"{r['wall'] / transform['wall']:.2f} | {cpu / (transform['client_cpu'] + transform['worker_cpu']):.2f}"
    else:
        ratio = "- | -"
    peaks = ", ".join(f"{v / 2**30:.2f}" for _, v in sorted(r["peaks"].items()))
    note = r["error"] or (f"workers restarted: {r['restarted']}" if r["restarted"] else "")
    print(f"| {r['step']} | {r['wall']:.1f} | {r['client_cpu']:.1f} + {r['worker_cpu']:.1f} | {ratio} | {peaks} "
          f"| {r['client_peak'] / 2**30:.2f} | {r['spilled'] / 2**30:.2f} | {r['load'][0]:.1f} -> {r['load'][1]:.1f} | {note} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cube", required=True, help="a zarr cube written by big_cube.py (a 'reflectance' variable)")
    parser.add_argument("--side", type=int, help="crop to the first SIDE x SIDE pixels")
    parser.add_argument("--rows", help="START:STOP, only these rows (y) of the cube")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per worker")
    parser.add_argument("--memory-limit", default="3GB", help="per worker, as distributed reads it")
    parser.add_argument("--scratch", help="folder for the outputs and the workers' spill space (default: next to the cube)")
    parser.add_argument("--skip", default="", help=f"comma-separated steps to leave out, of {','.join(STEPS)}")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false", help="leave out the warm-up on 2 chunks")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between memory samples")
    args = parser.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(STEPS):
        parser.error(f"--skip takes {','.join(STEPS)}")

    import dask
    import distributed
    import numpy as np
    import xarray as xr
    from common import machine
    from distributed import Client, LocalCluster

    import ppa_xr  # noqa: F401  (the .ppa accessor)

    cube = xr.open_zarr(args.cube)["reflectance"]
    if args.side:
        cube = cube.isel(y=slice(0, args.side), x=slice(0, args.side))
    if args.rows:
        cube = cube.isel(y=slice(*(int(v) for v in args.rows.split(":"))))
    scratch = tempfile.mkdtemp(prefix="bench_cluster_", dir=args.scratch or os.path.dirname(os.path.abspath(args.cube)))
    print(machine())
    print(f"memory {psutil.virtual_memory().total / 2**30:.1f} GiB, {psutil.virtual_memory().available / 2**30:.1f} GiB available; "
          f"dask {dask.__version__}, distributed {distributed.__version__}, xarray {xr.__version__}, numpy {np.__version__}")
    print(f"cube {args.cube}: {dict(cube.sizes)}, chunks {cube.data.chunksize}, {cube.dtype}, "
          f"{cube.nbytes / 1e9:.2f} GB uncompressed, {cube.data.npartitions} chunks")
    print(f"LocalCluster(n_workers={args.workers}, threads_per_worker={args.threads}, memory_limit={args.memory_limit!r}, processes=True); "
          f"worker memory thresholds target/spill/pause/terminate: "
          + "/".join(str(dask.config.get(f"distributed.worker.memory.{k}")) for k in ("target", "spill", "pause", "terminate")), flush=True)

    results: dict[str, dict] = {}
    try:
        with LocalCluster(n_workers=args.workers, threads_per_worker=args.threads, memory_limit=args.memory_limit, processes=True,
                          dashboard_address=":0", local_directory=scratch) as cluster, Client(cluster) as client:
            models: dict[str, object] = {}

            def out(name: str) -> str:
                return os.path.join(scratch, f"{name}.zarr")

            def steps_on(cube, out):
                return {
                    "mean": lambda: cube.mean().compute(),
                    "fit": lambda: models.update(default=cube.ppa.fit(dim="band", random_state=0)),
                    "transform": lambda: cube.ppa.transform(models["default"], n_components=3).to_dataset(name="components").to_zarr(out("transform")),
                    "report": lambda: cube.ppa.information_report(models["default"], n_components=3).to_zarr(out("report")),
                    "fixed": lambda: models.update(fixed=cube.ppa.fit(dim="band", random_state=0, configuration="fixed")),
                }

            if args.warm_up:
                start = time.perf_counter()
                cy, cx = cube.data.chunksize[-2:]
                for fn in steps_on(cube.isel(y=slice(0, cy), x=slice(0, 2 * cx)), lambda name: os.path.join(scratch, f"warm_{name}.zarr")).values():
                    fn()
                models.clear()
                print(f"warm-up (every step on 2 chunks, not counted: the workers' imports and compiled loops): {time.perf_counter() - start:.1f} s")
            steps = steps_on(cube, out)
            print("\n| step | wall (s) | CPU (s): this process + workers | / transform, wall | / transform, CPU "
                  "| peak RSS per worker (GiB) | peak RSS this process (GiB) | spilled to disk (GiB) | load average before -> after | note |")
            print("|---|---|---|---|---|---|---|---|---|---|", flush=True)
            for name, fn in steps.items():
                if name in skip or (name in ("transform", "report") and "default" not in models):
                    continue
                results[name] = _step(name, fn, cluster, client, args.interval)
                _print_row(results[name], results.get("transform"))
                if name in ("fit", "fixed") and name.replace("fit", "default") in models:
                    model = models[name.replace("fit", "default")]
                    print(f"  ({name}: degrees {model.degrees_.tolist()}, {getattr(model, 'configuration_', '')}, "
                          f"{model.sample_.size} pixels sampled)", flush=True)
            if "transform" in results:
                print("\nratios to the transform, every step (wall | CPU):")
                for r in results.values():
                    _print_row(r, results["transform"])
            warnings = sorted({line for logs in client.get_worker_logs().values() for level, line in logs if level in ("WARNING", "ERROR", "CRITICAL")})
            print(f"\nworker log warnings and errors: {len(warnings)}")
            for line in warnings:
                print(f"  {line[:300]}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
