"""A user's first session with the installed package, end to end: fit, transform, the information report
and a gap fill (the compiled loops), a model saved as ``.nc`` and as ``.zarr`` and loaded back. Prints where ppa_xr and
its dependencies came from, and exits non-zero on any failure.

    python .ci/smoke.py SCRATCH_DIR

Run by ``.ci/run`` in an environment pinned to pyproject's lower bounds (``.ci/lower_bounds.py``), and by
``tests/test_install.py`` as another user of a read-only install. Needs only the package's own dependencies
(no test extras), and writes only under ``SCRATCH_DIR``."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

import ppa_xr


def main(scratch: Path) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    names = ("numpy", "scipy", "numba", "scikit-learn", "threadpoolctl", "pandas", "xarray", "dask", "zarr", "h5py")
    print("ppa_xr from", ppa_xr.__file__)
    print(", ".join(f"{name} {version(name)}" for name in names))
    cube = ppa_xr.datasets.open_landsat8_sample(chunks={"x": 160, "y": 160})
    model = cube.ppa.fit(dim="band", n_samples=4_000, random_state=0)
    scores = cube.ppa.transform(model, n_components=3).compute()
    assert scores.dims == ("component", "y", "x") and np.isfinite(scores.values).any()
    report = cube.ppa.information_report(model, n_components=3).compute()
    assert report.data_vars, "the report is empty"
    gappy = cube.where(cube.band != cube.band[1])  # one band lost in every pixel, filled by the model
    filled = gappy.ppa.fill(model, dim="band").compute()
    observed = np.isfinite(gappy.values)
    np.testing.assert_array_equal(filled.values[observed], gappy.values[observed])
    assert np.isfinite(filled.isel(band=1).values).any(), "nothing was filled"
    for name in ("model.nc", "model.zarr"):
        path = model.save(scratch / name)
        again = ppa_xr.load_model(path)
        back = cube.ppa.transform(again, n_components=3).compute()
        np.testing.assert_array_equal(back.values, scores.values)
        print("saved and loaded", path.name)
    print("smoke: ok")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python .ci/smoke.py SCRATCH_DIR")
    main(Path(sys.argv[1]))
