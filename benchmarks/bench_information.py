"""Entropy and multi-information estimates against known truth.

1. Marginal entropies (bits) of Gaussian, uniform, lognormal, Student-t(3) and
   x^3-of-Gaussian samples, whose true entropies are known in closed form or by
   change of variables, with both estimators: the error per marginal, mean
   over ``--seeds`` samples and the one farthest from 0.
2. Gaussian data with a known covariance ``C``: PCA removes exactly the total
   correlation ``TC = 1/2 (sum log diag C - log det C)``. The PCA fitted on
   ``n`` samples is measured on the same samples (in sample) and on ``n``
   others (held out); the table gives the estimate minus TC, in bits, mean
   over ``--seeds`` covariances and the one farthest from 0.
3. Quantized bands: the Gaussian of 2. (d = 10) and the same dependence with
   uniform marginals (a Gaussian copula), each band quantized to L equal cells
   over its range, n = 50,000 to fit a PCA and 50,000 held out: the
   dequantized estimate against the true TC (Gaussian, percent) or the
   estimate before quantization (uniform, bits: its total can be near 0), mean
   and worst of 5 covariances.
4. The cost of ``information_report`` (computed: totals, per-component curves
   and the four per-pixel maps) against one forward transform of the same
   cube, interleaved: a 198-band cube of 10,000 pixels fitted on 5,000 of them,
   the bundled Landsat scene's six reflective bands tiled to 960 x 960 (uint16),
   a 36-band float32 cube of 768 x 768 (``bench_fit.curved_cube``), and
   ``bench_parallel``'s 36 x 1536 x 1536 float32 cube in 512^2 chunks
   (``--no-large`` leaves it out). The machine line comes first.
   ``--only sampling``: the sampling pass of a fit (``sample_valid_pixels``,
   100,000 pixels of that 1536^2 cube) against one ``.sum().compute()`` of it.
   ``--only compile``: the compiled loops' one-time costs, in fresh processes
   with an empty numba cache and then with the cache it left.
   ``--only chunk [--cube CUBE.zarr]``: where a report's maps spend their time,
   thread CPU time of one chunk of each cube above (and of a ``big_cube.py``
   cube): the maps' kernel, its parts, and the 3-component transform.
   ``--only stages``: where a computed report's CPU time goes, stage by stage
   (sample pass, sample statistics, grids, maps), on the three smaller cubes
   above, and the arithmetic no report of this design skips, against one
   forward transform.
   ``--only lookup``: nanoseconds (thread CPU time) per density look-up on
   columns that suit the grid and on columns with a spike (a share of the
   sample on one value), and the most breakpoints in one cell: the step
   function and the maps' uniform grid.
   ``--only grid [--cube CUBE.zarr]``: how far the maps' uniform grids move
   the per-pixel values from the step functions', on one chunk of each cube.
   ``--only bigcube --cube CUBE.zarr [--side 4096]``: a ``big_cube.py`` cube
   (12 uint16 bands, curved mixtures of smooth latent fields, clipped at 1),
   cropped to ``--side``: the whole report dataset written with ``to_zarr``
   against the 3-component transform written the same way, interleaved in
   one process, in wall and in process CPU time (which the machine's other
   load sways less), with the peak resident memory of each run.

5. The per-pixel maps against the totals: the mean of each map minus the
   total, per dimension, on the three bundled scenes, each fitted on at most
   half its pixels and reported on the others.

Run by hand: ``python benchmarks/bench_information.py [--max-n 1000000] [--dims 10 36 100 198] [--seeds 5] [--repeat 3]
[--no-large] [--only report,sampling,compile,chunk,stages,lookup,maps,quantized,truth,bigcube] [--cube CUBE.zarr --side 4096]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import betaln, digamma

from ppa_xr import PPA
from ppa_xr.information import ESTIMATORS, information_report, marginal_entropy, multi_information_reduction

LN2 = np.log(2)
GAUSS = 0.5 * np.log2(2 * np.pi * np.e)
TRUTH = {
    "Gaussian": GAUSS,
    "uniform": 0.0,
    "lognormal": GAUSS,
    "Student-t(3)": (2 * (digamma(2) - digamma(1.5)) + np.log(np.sqrt(3)) + betaln(1.5, 0.5)) / LN2,
    "x^3 of Gaussian": GAUSS + (np.log(3) - (np.euler_gamma + np.log(2))) / LN2,
}


def _cell(values: list[float], digits: int = 3) -> str:
    """``mean (worst)``: the mean over seeds and the value farthest from zero."""
    return f"{np.mean(values):+.{digits}f} ({max(values, key=abs):+.{digits}f})"


def marginal_table(sizes: list[int], seeds: int) -> None:
    print(f"Marginal entropy error (estimate - truth, bits): mean over {seeds} samples (the one farthest from 0)")
    print("| n | estimator | " + " | ".join(TRUTH) + " |")
    print("|---|---|" + "---|" * len(TRUTH))
    for n in sizes:
        errors = {e: [] for e in ESTIMATORS}
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            z = rng.normal(size=(n, 5))
            X = np.column_stack([z[:, 0], rng.uniform(size=n), np.exp(z[:, 2]), rng.standard_t(3, size=n), z[:, 4] ** 3])
            for e in ESTIMATORS:
                errors[e].append(marginal_entropy(X, e) - np.array(list(TRUTH.values())))
        for e, values in errors.items():
            print(f"| {n:.0e} | {e} | " + " | ".join(_cell(list(column)) for column in np.array(values).T) + " |", flush=True)


def gaussian(d: int, n: int, seed: int) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)
    cov = A @ A.T
    tc = 0.5 * (np.sum(np.log(np.diag(cov))) - np.linalg.slogdet(cov)[1]) / LN2
    return rng.standard_normal((n, d)) @ np.linalg.cholesky(cov).T, tc


def total_correlation_table(dims: list[int], sizes: list[int], seeds: int) -> None:
    print(f"\nGaussian total correlation TC removed by PCA: estimate - TC in bits (spacing estimator), mean over {seeds}")
    print("covariances (the one farthest from 0); bias formula d (d - 1) / (4 n ln 2) for the in-sample excess")
    print("| d | n | TC (bits), mean | in sample | held out | held out % of TC | formula | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for d in dims:
        for n in sizes:
            start = time.perf_counter()
            inside, held, percent, tcs = [], [], [], []
            for seed in range(seeds):
                X, tc = gaussian(d, 2 * n, 1000 * d + seed)
                pca = PPA(degree=1).fit(X[:n])
                inside.append(multi_information_reduction(X[:n], pca.transform(X[:n])).total - tc)
                held.append(multi_information_reduction(X[n:], pca.transform(X[n:])).total - tc)
                percent.append(100 * held[-1] / tc)
                tcs.append(tc)
            formula = d * (d - 1) / (4 * n * LN2)
            print(f"| {d} | {n:.0e} | {np.mean(tcs):.2f} | {_cell(inside)} | {_cell(held)} | {_cell(percent, 2)} "
                  f"| {formula:.3f} | {time.perf_counter() - start:.0f} |", flush=True)


def quantized_table(levels=(4096, 256, 64, 16), seeds: int = 5) -> None:
    from scipy.stats import norm

    print("\nQuantized bands, d = 10: dequantized estimate minus reference (mean over 5 covariances; worst)")
    print("| marginals | reference | " + " | ".join(f"L = {L}" for L in levels) + " |")
    print("|---|---|" + "---|" * len(levels))
    for name in ("Gaussian", "uniform"):
        errors = {L: [] for L in levels}
        for seed in range(seeds):
            X, tc = gaussian(10, 100_000, seed)
            if name == "uniform":
                X = norm.cdf(X / X.std(axis=0))
                tc = multi_information_reduction(X[50_000:], PPA(degree=1).fit(X[:50_000])).total
            low, high = X.min(axis=0), X.max(axis=0)
            for L in levels:
                Q = np.minimum(np.floor((X - low) / (high - low) * L), L - 1)
                estimate = multi_information_reduction(Q[50_000:], PPA(degree=1).fit(Q[:50_000])).total
                errors[L].append(100 * (estimate / tc - 1) if name == "Gaussian" else estimate - tc)
        reference = "true TC, % of it" if name == "Gaussian" else "estimate unquantized, bits (total)"
        digits = 1 if name == "Gaussian" else 3
        cells = [_cell(e, digits) for e in errors.values()]
        print(f"| {name} | {reference} | " + " | ".join(cells) + " |", flush=True)


def _report_cubes(large: bool = True):
    """The configurations of the report's cost: (name, cube, model)."""
    import xarray as xr
    from bench_fit import curved_cube
    from bench_parallel import curved_cube as parallel_cube

    import ppa_xr

    hyper = xr.DataArray(curved_cube(10_000, 198).reshape(100, 100, 198), dims=("y", "x", "band")).chunk({"y": 50})
    landsat = ppa_xr.datasets.open_landsat8_sample().isel(band=slice(1, 7))  # B2..B7, uint16
    landsat = xr.concat([xr.concat([landsat] * 3, "x")] * 3, "y")
    landsat = landsat.assign_coords(y=np.arange(landsat.sizes["y"]), x=np.arange(landsat.sizes["x"])).chunk({"y": 480, "x": 480})
    multi = xr.DataArray(curved_cube(768 * 768, 36, dtype=np.float32).reshape(768, 768, 36), dims=("y", "x", "band")).chunk({"y": 384, "x": 384})
    cubes = [
        ("10,000 px x 198 bands, fit on 5,000, report on the other 5,000", hyper, hyper.ppa.fit(n_samples=5000, random_state=0)),
        ("Landsat B2-B7 uint16, 960 x 960 px (6 bands), default fit and report", landsat, landsat.ppa.fit(random_state=0)),
        ("768 x 768 px x 36 bands float32, default fit and report", multi, multi.ppa.fit(random_state=0)),
    ]
    if large:
        big = parallel_cube(1536).chunk({"y": 512, "x": 512})
        cubes.append(("36 x 1536 x 1536 float32, 512^2 chunks (bench_parallel's cube), fit on 50,000, default report", big,
                      big.ppa.fit(n_samples=50_000, random_state=0)))
    return cubes


def report_cost(repeat: int = 3, large: bool = True) -> None:
    """``information_report`` computed (sample, densities, totals, per-k curves and the four per-pixel maps)
    against one forward transform of the same cube, interleaved, every run listed; threaded scheduler."""
    from common import interleaved, machine, ratio, runs

    from ppa_xr.cube.sampling import fitted_shares, sample_features
    from ppa_xr.information import REPORT_SAMPLES

    print(f"\n{machine()}")
    print("Report cost: seconds of each interleaved run (one warm-up each, then rounds): forward transform; report computed;")
    print("the report with its maps left lazy (sample pass, sample statistics, totals, curves); that held-out sample pass alone")
    print("| cube | forward (s) | report (s) | report, maps lazy (s) | sample pass (s) | report / forward: best (worst round) "
          "| the same in process CPU time (s; s; ratio) |")
    print("|---|---|---|---|---|---|---|")
    for name, cube, model in _report_cubes(large):
        exclude = fitted_shares(cube.transpose(..., "band"), "band", model.sample_)
        cpu: dict[str, list[float]] = {}
        times = interleaved({
            "forward": lambda: cube.ppa.transform(model, check=False).compute(),
            "report": lambda: information_report(cube, model).compute(),
            "lazy": lambda: information_report(cube, model),
            "sample": lambda: sample_features(cube.transpose(..., "band"), "band", None, 0, exclude=exclude, default=REPORT_SAMPLES),
        }, repeat, cpu)
        cells = " | ".join(runs(t) for t in times.values())
        print(f"| {name} | {cells} | {ratio(times['report'], times['forward'])} "
              f"| {runs(cpu['forward'])}; {runs(cpu['report'])}; {ratio(cpu['report'], cpu['forward'])} |", flush=True)


def sampling_cost(repeat: int = 5) -> None:
    """The sampling pass of a fit (:func:`ppa_xr.cube.sampling.sample_valid_pixels`, 100,000 pixels) against one
    ``.sum().compute()`` of the same cube (36 x 1536^2 float32 in memory, 512^2 chunks, threaded scheduler), interleaved."""
    from bench_parallel import curved_cube as parallel_cube
    from common import interleaved, machine, ratio, runs

    from ppa_xr.cube.sampling import sample_valid_pixels

    cube = parallel_cube(1536).chunk({"y": 512, "x": 512})
    print(f"\n{machine()}")
    print("Sampling pass: seconds of each interleaved run (one warm-up each); 36 x 1536 x 1536 float32, 512^2 chunks, threads")
    print("| case | sum().compute() (s) | sample_valid_pixels, 100,000 (s) | sample / sum: best (worst round) |\n|---|---|---|---|")
    times = interleaved({"sum": lambda: cube.sum().compute(), "sample": lambda: sample_valid_pixels(cube, "band", 100_000, 0)}, repeat)
    print(f"| in memory (.chunk) | {runs(times['sum'])} | {runs(times['sample'])} | {ratio(times['sample'], times['sum'])} |", flush=True)


def _thread_seconds(fn, repeat: int = 5, clock=time.thread_time) -> float:
    """Best thread CPU time of ``repeat`` calls (the machine's other load counts less than in wall time); ``clock``:
    ``time.process_time`` for that of the whole process (all its threads)."""
    best = np.inf
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


def chunk_cost(path: str | None) -> None:
    """The report's per-pixel maps on one chunk (:func:`ppa_xr.cube.report._pixel_block`, one thread) and their parts,
    against the 3-component transform of the chunk: thread CPU time, best of 5, milliseconds."""
    import xarray as xr
    from common import machine

    from ppa_xr.core import kernels
    from ppa_xr.core.entropy import MapDensities
    from ppa_xr.cube.inputs import model_features
    from ppa_xr.cube.report import _pixel_block, _report_sample, _statistics

    names = ("10,000 px x 198", "Landsat B2-B7", "768^2 x 36")
    cubes = [(short, cube, model) for short, (_, cube, model) in zip(names, _report_cubes(large=False))]
    if path:
        big = xr.open_zarr(path)["reflectance"].isel(y=slice(0, 2048), x=slice(0, 2048))
        cubes.append(("big_cube.py, 512^2 x 12 uint16", big, big.ppa.fit(n_samples=50_000, random_state=0)))
    print(f"\n{machine()}")
    print("Where a report's maps spend their time: thread CPU time of one chunk (ms, best of 5), k = 3")
    print("| chunk | report's maps | PPA forward + its error | PCA forward + its error | the 3 sets of look-ups "
          "| the rest | the transform, 3 components |\n|---|---|---|---|---|---|---|")
    for name, cube, model in cubes:
        da, dim = model_features(cube, model, "band")
        sample, _, _ = _report_sample(da, dim, model, None, 0, True)
        _, discrete, _, measures, _, _ = _statistics(model.params_, sample, "spacing", 0)
        ppa, pca = measures["ppa"], measures["pca"]
        densities = MapDensities.of(ppa, pca, discrete)
        chunk = np.moveaxis(da.data.blocks[(0,) * da.ndim].compute(), da.get_axis_num(dim), -1)  # as map_blocks hands it over
        x = np.ascontiguousarray(chunk.reshape(-1, chunk.shape[-1]).T, dtype=kernels.computed_dtype(chunk.dtype))
        (r_ppa, _), (r_pca, _) = kernels.forward_error(x, ppa.params, 3), kernels.forward_error(x, pca.params, 3)
        parts = {
            "maps": lambda: _pixel_block(chunk, ppa, pca, 3, 1, densities),
            "ppa": lambda: kernels.forward_error(x, ppa.params, 3),
            "pca": lambda: kernels.forward_error(x, pca.params, 3),
            "lookups": lambda: densities.gains(x, r_ppa, r_pca),
            "transform": lambda: kernels.forward(chunk, model.params_, n_components=3, threads=1),
        }
        ms = {key: 1e3 * _thread_seconds(fn) for key, fn in parts.items()}
        rest = ms["maps"] - ms["ppa"] - ms["pca"] - ms["lookups"]
        shape = " x ".join(str(n) for n in chunk.shape)
        print(f"| {name}: {shape} {chunk.dtype} | {ms['maps']:.0f} | {ms['ppa']:.0f} | {ms['pca']:.0f} | {ms['lookups']:.0f} "
              f"| {rest:.0f} | {ms['transform']:.0f} |", flush=True)


def _warm_process_seconds(fn) -> float:
    """Best process CPU time (all threads) of 5 calls, after one warm-up."""
    fn()
    return _thread_seconds(fn, clock=time.process_time)


def stage_cost() -> None:
    """Where a computed report's CPU time goes, stage by stage, against one forward transform (process CPU time, best
    of 5, threaded scheduler), and the part of it that is arithmetic the report cannot skip: the error curves' passes
    over the sample (a forward map each, PPA and PCA), the sorts of its three sets of columns (inputs, PPA's and PCA's
    outputs), and over the cube the maps' forward passes and density look-ups (one thread a chunk, summed)."""
    from common import machine

    from ppa_xr.core import kernels
    from ppa_xr.core.entropy import MapDensities, column_sorts
    from ppa_xr.cube.inputs import model_features
    from ppa_xr.cube.report import SampleMaps, _reused, _report_sample, _sample_maps, _statistics

    names = ("10,000 px x 198", "Landsat B2-B7", "768^2 x 36")
    print(f"\n{machine()}")
    print("Where a report's CPU time goes: process CPU time (ms, best of 5) of the forward transform, the computed report, and its")
    print("stages; 'floor': the error curves' two passes over the sample, its three column sorts, and the maps' forward passes and")
    print("look-ups over every chunk (thread CPU time summed; the pixels the maps compute: without the sample's own where they")
    print("reuse its outputs), the arithmetic any report of this design does")
    print("| cube | forward | report | sample pass | statistics (of which error curves; sorts) | grids | the rest, lazy | maps "
          "(of which forward passes; look-ups) | floor | report / forward | floor / forward |\n|---|---|---|---|---|---|---|---|---|---|---|")
    for name, (_, cube, model) in zip(names, _report_cubes(large=False)):
        da, dim = model_features(cube, model, "band")
        params = model.params_
        sample, index, _ = _report_sample(da, dim, model, None, 0, True)
        reused = _reused(da, params.n_features, 3)
        _, discrete, _, measures, _, outputs = _statistics(params, sample, "spacing", 0, for_maps=reused)
        R = {m: kernels.forward(sample, measures[m].params) for m in ("ppa", "pca")}
        densities = MapDensities.of(measures["ppa"], measures["pca"], discrete)
        dtype = kernels.computed_dtype(da.dtype)
        known = None if outputs is None else SampleMaps.of(da, dim, index, _sample_maps(outputs, densities, dtype))
        ms = {key: 1e3 * _warm_process_seconds(fn) for key, fn in {
            "forward": lambda: cube.ppa.transform(model, check=False).compute(),
            "report": lambda: information_report(cube, model).compute(),
            "lazy": lambda: information_report(cube, model),
            "sample": lambda: _report_sample(da, dim, model, None, 0, True),
            "statistics": lambda: _statistics(params, sample, "spacing", 0, for_maps=reused),
            "curves": lambda: [kernels.error_curve(sample, measures[m].params, with_forward=True) for m in ("ppa", "pca")],
            "sorts": lambda: [column_sorts(a) for a in (sample, R["ppa"], R["pca"])],
            "grids": lambda: MapDensities.of(measures["ppa"], measures["pca"], discrete),
        }.items()}
        forward_passes = lookups = 0.0
        if outputs is not None:  # the sample's own pixels: their look-ups, on the outputs of the statistics' passes
            lookups += _thread_seconds(lambda: densities.gains(outputs[0], outputs[1].T, outputs[2].T))
        axis = da.get_axis_num(dim)
        for place in np.ndindex(da.data.numblocks):
            rows = np.moveaxis(da.data.blocks[place].compute(), axis, -1).reshape(-1, da.shape[axis])
            positions, _ = (None, None) if known is None else known.at(place[:axis] + place[axis + 1:])
            x = np.ascontiguousarray((rows if positions is None else np.delete(rows, positions, axis=0)).T, dtype=dtype)
            (r_ppa, _), (r_pca, _) = kernels.forward_error(x, measures["ppa"].params, 3), kernels.forward_error(x, measures["pca"].params, 3)
            forward_passes += _thread_seconds(lambda: [kernels.forward_error(x, measures[m].params, 3) for m in ("ppa", "pca")])
            lookups += _thread_seconds(lambda: densities.gains(x, r_ppa, r_pca))
        maps = ms["report"] - ms["lazy"]
        rest = ms["lazy"] - ms["sample"] - ms["statistics"] - ms["grids"]
        floor = ms["curves"] + ms["sorts"] + 1e3 * (forward_passes + lookups)
        print(f"| {name} | {ms['forward']:.1f} | {ms['report']:.1f} | {ms['sample']:.1f} | {ms['statistics']:.1f} ({ms['curves']:.1f}; "
              f"{ms['sorts']:.1f}) | {ms['grids']:.1f} | {rest:.1f} | {maps:.1f} ({1e3 * forward_passes:.1f}; {1e3 * lookups:.1f}) "
              f"| {floor:.1f} | {ms['report'] / ms['forward']:.2f} | {floor / ms['forward']:.2f} |", flush=True)


def lookup_cost(repeat: int = 5) -> None:
    """Thread CPU time per density look-up over 2^20 values, 12 columns of the 316 equal-mass bins of a 100,000
    sample: Gaussian columns, and a spike (a share of the sample within 1e-4 of one value) on 4 of the 12 columns,
    the rest Gaussian. The step function by its grid and search (``StepLookup.row_sums``: quantized inputs), and
    the uniform grid of the maps (``UniformGrid.sums``, feature-major)."""
    from common import machine

    from ppa_xr.core.entropy import EqualMassBins

    rng = np.random.default_rng(0)
    n, d = 100_000, 12
    print(f"\n{machine()}")
    print("Density look-ups: ns a value (thread CPU time, best of 5), 12 columns, 316 bins each")
    print("| columns | most breakpoints in one cell | comparisons after the grid, per column | step function, ns a value "
          "| uniform grid (the maps), ns a value |\n|---|---|---|---|---|")
    for share in (0.0, 0.05, 0.2, 0.5):
        X = rng.normal(size=(n, d))
        spike = rng.uniform(size=n) < share
        X[spike, :4] = 1.0 + rng.uniform(size=(spike.sum(), 4)) * 1e-4
        bins = EqualMassBins.fit(X)
        lookup, grid = bins.lookup, bins.grid()
        values = np.ascontiguousarray(X[rng.integers(0, n, 2**20 // d)])
        columns = np.ascontiguousarray(values.T)
        lookup.row_sums(values), grid.sums(columns)
        best = _thread_seconds(lambda: lookup.row_sums(values), repeat)
        gridded = _thread_seconds(lambda: grid.sums(columns), repeat)
        label = "Gaussian" if share == 0 else f"a spike holding {share:.0%} of 4 columns"
        print(f"| {label} | {lookup.steps} | {lookup.depth} | {best / values.size * 1e9:.2f} | {gridded / values.size * 1e9:.2f} |", flush=True)


class _PeakRSS:
    """The largest resident memory of this process while in the block, sampled every 20 ms (psutil)."""

    def __enter__(self):
        import threading

        import psutil

        self.peak, self._done, process = 0, threading.Event(), psutil.Process()

        def watch():
            while not self._done.is_set():
                self.peak = max(self.peak, process.memory_info().rss)
                self._done.wait(0.02)

        self._thread = threading.Thread(target=watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


def big_cube_cost(path: str, side: int | None, repeat: int) -> None:
    """The whole report written with ``to_zarr`` against the 3-component transform written the same way, on a
    ``big_cube.py`` cube (its own chunks), interleaved after a warm-up, threaded scheduler; peak RSS of each run."""
    import os
    import shutil
    import tempfile

    import xarray as xr
    from common import interleaved, machine, ratio, runs

    cube = xr.open_zarr(path)["reflectance"]
    if side:
        cube = cube.isel(y=slice(0, side), x=slice(0, side))
    work = tempfile.mkdtemp(prefix="ppa_xr_report_")
    print(f"\n{machine()}")
    start = time.perf_counter()
    model = cube.ppa.fit(n_samples=50_000, random_state=0)
    print(f"big_cube.py cube {dict(cube.sizes)}, chunks {cube.data.chunksize}, dtype {cube.dtype}; fit (n_samples=50,000, default "
          f"configuration) {time.perf_counter() - start:.1f} s, degrees {model.degrees_.tolist()}")

    def write(what):
        out = os.path.join(work, "out.zarr")
        shutil.rmtree(out, ignore_errors=True)
        cpu = time.process_time()
        with _PeakRSS() as rss:
            if what == "transform":
                cube.ppa.transform(model, n_components=3).to_dataset(name="components").to_zarr(out)
            else:
                cube.ppa.information_report(model, n_components=3).to_zarr(out)
        peaks[what].append(rss.peak / 2**30)
        cpus[what].append(time.process_time() - cpu)

    peaks: dict[str, list[float]] = {"transform": [], "report": []}
    cpus: dict[str, list[float]] = {"transform": [], "report": []}
    try:
        times = interleaved({"transform": lambda: write("transform"), "report": lambda: write("report")}, repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cpu = {what: values[1:] for what, values in cpus.items()}  # the warm-up's left out, as interleaved leaves it out
    print("| transform, 3 components, to_zarr (s) | whole report, to_zarr (s) | report / transform: best (worst repetition) "
          "| the same in process CPU time (s, s, ratio) | peak RSS transform / report (GiB), max over runs | load average after |")
    print("|---|---|---|---|---|---|")
    print(f"| {runs(times['transform'])} | {runs(times['report'])} | {ratio(times['report'], times['transform'])} "
          f"| {runs(cpu['transform'])}; {runs(cpu['report'])}; {ratio(cpu['report'], cpu['transform'])} "
          f"| {max(peaks['transform']):.2f} / {max(peaks['report']):.2f} | {os.getloadavg()[0]:.1f} |", flush=True)


_COMPILE_SCRIPT = """
import time
start = time.perf_counter()
import numpy as np, xarray as xr
import ppa_xr
imported = time.perf_counter()
X = np.random.default_rng(0).normal(size=(40000, 5)).astype(np.float32)
X[:, 1] += X[:, 0] ** 2
cube = xr.DataArray(X.reshape(200, 200, 5), dims=("y", "x", "band")).chunk({"y": 100})
model = cube.ppa.fit(n_samples=5000, random_state=0, degree=2)
fitted = time.perf_counter()
cube.ppa.information_report(model).compute()
first = time.perf_counter()
cube.ppa.information_report(model).compute()
second = time.perf_counter()
print(imported - start, fitted - imported, first - fitted, second - first)
"""


def compile_cost(repeat: int = 2) -> None:
    """The compiled loops' one-time costs, each in a fresh process: with an empty numba cache (every function
    compiled on its first call) and with the cache that run left (loaded from disk): import, a fit of a small
    float32 cube (the sampling loops), its first report (the look-ups) and a second report (steady state)."""
    import os
    import subprocess
    import sys
    import tempfile

    from common import machine

    print(f"\n{machine()}")
    print("Compiled loops, one-time costs (s): import ppa_xr; fit of a 200 x 200 x 5 float32 cube (sampling loops);")
    print("its first report (look-ups); a second report. Each row a fresh process; NUMBA_CACHE_DIR empty, then as left")
    print("| cache | import | fit | first report | second report |\n|---|---|---|---|---|")
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            for label in ("empty (compiles)", "warm (from disk)"):
                out = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], env=env, capture_output=True, text=True, check=True)
                cells = " | ".join(f"{float(t):.2f}" for t in out.stdout.split())
                print(f"| {label} | {cells} |", flush=True)


def map_agreement() -> None:
    """Mean of the per-pixel map against the total, per dimension, on the bundled scenes (fitted on at most half their
    pixels, so that the default report holds out the rest)."""
    import ppa_xr

    scenes = {
        "Landsat 8 sample (10 bands, uint16)": ppa_xr.datasets.open_landsat8_sample(),
        "abu-beach-4 (102 bands, float32)": ppa_xr.datasets.open_abu_beach()["reflectance"],
        "RGB.byte.tif (3 bands, uint8)": ppa_xr.datasets.open_rgb_byte(masked=True),
    }
    print("\nPer-pixel maps against the totals: mean of the map minus the total, bits per dimension (held-out default report)")
    print("| scene | PPA | PCA | dequantized bands |\n|---|---|---|---|")
    for name, cube in scenes.items():
        pixels = cube.sizes["x"] * cube.sizes["y"]
        model = cube.ppa.fit(n_samples=min(200_000, pixels // 2), random_state=0)
        report = cube.ppa.information_report(model).compute()
        d = model.n_features_in_
        gaps = [float(report[f"mi_reduction_{m}"].mean()) / d - float(report[f"mi_reduction_per_dim_{m}"]) for m in ("ppa", "pca")]
        print(f"| {name} | {gaps[0]:+.3f} | {gaps[1]:+.3f} | {int(report.attrs['dequantized'].sum())} of {d} |", flush=True)


def grid_moves(path: str | None) -> None:
    """How far the maps' uniform grids move the per-pixel values: each report map of one chunk against the same
    map with every density the step function itself (``PointwiseReduction.gain``, exact), in bits: the mean
    difference, the mean absolute difference, its 99th percentile and the share of pixels that moved."""
    import xarray as xr

    from ppa_xr.core import kernels
    from ppa_xr.core.entropy import MapDensities
    from ppa_xr.cube.inputs import model_features
    from ppa_xr.cube.report import _pixel_block, _report_sample, _statistics

    names = ("10,000 px x 198 float64 (continuous)", "Landsat B2-B7 uint16", "768^2 x 36 float32 (continuous)")
    cubes = [(short, cube, model) for short, (_, cube, model) in zip(names, _report_cubes(large=False))]
    if path:
        big = xr.open_zarr(path)["reflectance"].isel(y=slice(0, 2048), x=slice(0, 2048))
        cubes.append(("big_cube.py 12 x uint16", big, big.ppa.fit(n_samples=50_000, random_state=0)))
    print("\nThe maps' grids against the step functions: redundancy map minus the exact one, one chunk, bits (per pixel, all bands)")
    print("| cube | inputs by | map | mean | mean abs | 99th percentile of abs | pixels moved |\n|---|---|---|---|---|---|---|")
    for name, cube, model in cubes:
        da, dim = model_features(cube, model, "band")
        sample, _, _ = _report_sample(da, dim, model, None, 0, True)
        _, discrete, _, measures, _, _ = _statistics(model.params_, sample, "spacing", 0)
        densities = MapDensities.of(measures["ppa"], measures["pca"], discrete)
        chunk = np.moveaxis(da.data.blocks[(0,) * da.ndim].compute(), da.get_axis_num(dim), -1)
        maps = _pixel_block(chunk, measures["ppa"], measures["pca"], 3, 1, densities).reshape(-1, 4)
        flat = np.ascontiguousarray(chunk.reshape(-1, chunk.shape[-1]), dtype=maps.dtype)
        inputs = "integer table (exact)" if densities.integer is not None else "step function (exact)" if discrete.any() else "grid"
        for column, method in enumerate(("ppa", "pca")):
            r, _ = kernels.forward_error(np.ascontiguousarray(flat.T), measures[method].params, 3)
            exact = measures[method].gain(flat, np.ascontiguousarray(r.T)).astype(np.float64)
            moved = maps[:, column] - exact
            moved = moved[np.isfinite(moved)]
            print(f"| {name} | {inputs} | {method.upper()} | {moved.mean():+.4f} | {np.abs(moved).mean():.4f} | "
                  f"{np.quantile(np.abs(moved), 0.99):.3f} | {np.mean(np.abs(moved) > 1e-5):.0%} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-n", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, nargs="+", default=[10, 36, 100, 198])
    parser.add_argument("--only", default="report,sampling,compile,chunk,lookup,grid,maps,quantized,truth", help="parts to run (comma separated)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the interleaved timings")
    parser.add_argument("--no-large", action="store_true", help="leave the 36 x 1536^2 cube out of the report's cost")
    parser.add_argument("--seeds", type=int, default=5, help="samples per cell of the truth tables")
    parser.add_argument("--cube", help="a big_cube.py zarr cube, for --only bigcube (and a chunk of it in --only chunk)")
    parser.add_argument("--side", type=int, help="crop the --cube to side x side pixels")
    args = parser.parse_args()
    parts = args.only.split(",")
    if "report" in parts:
        report_cost(args.repeat, not args.no_large)
    if "sampling" in parts:
        sampling_cost(max(args.repeat, 5))
    if "compile" in parts:
        compile_cost()
    if "chunk" in parts:
        chunk_cost(args.cube)
    if "stages" in parts:
        stage_cost()
    if "lookup" in parts:
        lookup_cost()
    if "grid" in parts:
        grid_moves(args.cube)
    if "bigcube" in parts:
        if not args.cube:
            parser.error("--only bigcube needs --cube: a zarr cube written by big_cube.py")
        big_cube_cost(args.cube, args.side, args.repeat)
    if "maps" in parts:
        map_agreement()
    if "quantized" in parts:
        quantized_table()
    if "truth" in parts:
        sizes = [n for n in (10_000, 100_000, 1_000_000) if n <= args.max_n]
        marginal_table(sizes, args.seeds)
        total_correlation_table(args.dims, sizes, args.seeds)


if __name__ == "__main__":
    main()
