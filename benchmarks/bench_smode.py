"""S-mode fit (maps as samples): 21 time steps x 10,512 grid cells, PPA against xeofs' EOF, interleaved.

PPA(degree=1) on the numpy field is the SVD's EOF analysis: its variance fractions are checked against
``np.linalg.svd`` of the centred field (within 1e-8); the default PPA (degree selection on 21 samples) is timed
too, with its peak memory (tracemalloc). xeofs fits the same field as a DataArray (time, lat, lon) with
``dim="time"``, its default solver.

Run: ``PYTHONPATH=. python benchmarks/bench_smode.py``
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import xarray as xr

from common import interleaved, machine, ratio, runs

import ppa_xr


def field(seed: int = 0) -> xr.DataArray:
    """21 x 73 x 144 (10,512 cells): a few large-scale modes with red spectra and noise."""
    rng = np.random.default_rng(seed)
    lat, lon = np.linspace(-90, 90, 73), np.arange(0, 360, 2.5)
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    modes = np.stack([np.cos(k * lo) * np.cos(la) ** k + np.sin((k + 1) * la) for k in range(1, 8)])
    amplitudes = rng.normal(size=(21, 7)) * (1.0 / np.arange(1, 8))
    values = np.einsum("tk,kij->tij", amplitudes, modes) + 0.05 * rng.normal(size=(21, 73, 144))
    return xr.DataArray(values, dims=("time", "lat", "lon"), coords={"time": np.arange(21), "lat": lat, "lon": lon})


def main() -> None:
    import xeofs

    da = field()
    X = da.values.reshape(21, -1)
    print(machine())
    _, s, _ = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    svd_ratio = s**2 / np.sum(s**2)
    model = ppa_xr.PPA(degree=1).fit(X)
    error = float(np.abs(model.explained_variance_ratio_ - svd_ratio[: model.params_.n_features]).max())
    print(f"degree=1: {model.params_.n_features} components, variance fractions within {error:.1e} of the SVD's")
    times = interleaved({
        "ppa_degree1": lambda: ppa_xr.PPA(degree=1).fit(X),
        "xeofs_eof": lambda: xeofs.single.EOF(n_modes=20).fit(da, dim="time"),
        "ppa_default": lambda: ppa_xr.PPA().fit(X),
    }, repeat=5)
    for name, t in times.items():
        print(f"{name}: {runs(t)} s")
    print(f"PPA degree=1 / xeofs EOF: {ratio(times['ppa_degree1'], times['xeofs_eof'])}")
    print(f"PPA default / xeofs EOF: {ratio(times['ppa_default'], times['xeofs_eof'])}")
    tracemalloc.start()
    default = ppa_xr.PPA().fit(X)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(f"default: degrees {default.degrees_.tolist()}, configuration {default.configuration_}, peak {peak / 2**20:.1f} MiB "
          f"(the field: {X.nbytes / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
