"""The ppa-xr command line on the bundled rasters."""

import numpy as np
import pytest

import ppa_xr
from ppa_xr import load_model
from ppa_xr.cli import main
from ppa_xr.datasets import rgb_byte_path


def test_demo_prints_ppa_beating_pca(capsys, tmp_path):
    assert main(["demo", "--n-samples", "20000", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit() and len(line.split()) == 4]
    assert [int(r[0]) for r in rows] == list(range(1, 10))
    assert all(float(r[1]) <= float(r[2]) for r in rows)  # PPA error below PCA's at every k
    assert "configuration (how many curved steps to keep, plain or robust): robust=" in out and "(validated on held-out groups)" in out
    assert (tmp_path / "landsat8_ppa.nc").exists() and (tmp_path / "landsat8_ppa_components.tif").exists()


def test_fit_transform_inverse_round_trip(tmp_path, capsys):
    rioxarray = pytest.importorskip("rioxarray")
    model, comps, back = tmp_path / "m.nc", tmp_path / "c.tif", tmp_path / "b.tif"
    assert main(["fit", rgb_byte_path(), str(model), "--n-samples", "20000", "--chunks", "256", "--degree", "3"]) == 0
    assert main(["transform", rgb_byte_path(), str(model), str(comps), "--chunks", "256"]) == 0
    assert main(["inverse", str(comps), str(model), str(back), "--chunks", "256"]) == 0
    assert main(["report", rgb_byte_path(), str(model), str(tmp_path / "report"), "--n-components", "2"]) == 0
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["report.md", "report.png", "report_maps.nc"]
    original = rioxarray.open_rasterio(rgb_byte_path(), masked=True).values
    restored = rioxarray.open_rasterio(back, masked=True).values
    complete = np.isfinite(original).all(axis=0)
    np.testing.assert_allclose(restored[:, complete], original[:, complete], atol=1e-3)
    assert np.isnan(restored[:, ~complete]).all()


def test_errors_exit_2_with_a_message(tmp_path, capsys):
    assert main(["transform", rgb_byte_path(), str(tmp_path / "absent.nc"), str(tmp_path / "o.tif")]) == 2
    assert "no model at" in capsys.readouterr().err


def test_fit_on_a_stack_of_band_files(tmp_path, capsys):
    from ppa_xr.datasets import open_landsat8_sample

    from .test_io import write_band_files

    paths = [str(p) for p in write_band_files(open_landsat8_sample(), tmp_path)]
    assert main(["fit", *paths, str(tmp_path / "m.nc"), "--n-samples", "5000", "--chunks", "160", "--selection-samples", "3000"]) == 0
    assert "x 10 features along 'band'" in capsys.readouterr().out
    assert load_model(tmp_path / "m.nc").selection_samples == 3000
    assert main(["transform", *paths, str(tmp_path / "m.nc"), str(tmp_path / "c.tif"), "--n-components", "2"]) == 0
    assert "'component': 2" in capsys.readouterr().out


def test_progress_on_stderr_and_a_cluster_by_address(tmp_path, capsys, cluster):
    model = tmp_path / "m.nc"
    assert main(["fit", rgb_byte_path(), str(model), "--n-samples", "5000", "--degree", "2"]) == 0
    err = capsys.readouterr().err
    assert "PPA fit: 100%" in err and "2/2" in err and "[########################################] | 100%" in err  # steps, dask's bar
    out = tmp_path / "c.tif"
    assert main(["transform", rgb_byte_path(), str(model), str(out), "--scheduler", cluster.scheduler_address]) == 0
    assert f"running on {cluster.scheduler_address}" in capsys.readouterr().err
    local = tmp_path / "local.tif"
    assert main(["transform", rgb_byte_path(), str(model), str(local), "--scheduler", "processes"]) == 0
    import rioxarray

    np.testing.assert_array_equal(rioxarray.open_rasterio(out).values, rioxarray.open_rasterio(local).values)
    assert main(["transform", rgb_byte_path(), str(model), str(tmp_path / "x.tif"), "--scheduler", "tcp://127.0.0.1:9"]) == 2
    assert "cannot reach a dask scheduler at tcp://127.0.0.1:9" in capsys.readouterr().err


def test_report_without_matplotlib_says_so_before_computing(tmp_path):
    """Without the plot extra (matplotlib blocked from importing, as where it is not installed), ``ppa-xr report``
    exits 2 with the install line alone, before it reads the cube: no traceback, no report, no folder."""
    import subprocess
    import sys

    from ppa_xr.datasets import rgb_byte_path

    model = tmp_path / "m.nc"
    assert main(["fit", rgb_byte_path(), str(model), "--degree", "1", "--n-samples", "2000"]) == 0
    blocked = ("import sys; sys.modules['matplotlib'] = None; from ppa_xr.cli import main; "
               f"sys.exit(main(['report', {rgb_byte_path()!r}, {str(model)!r}, {str(tmp_path / 'report')!r}]))")
    run = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "pip install 'ppa_xr[plot]'" in run.stderr and "Traceback" not in run.stderr
    assert "report on" not in run.stderr and not (tmp_path / "report").exists()


def test_transform_keeps_a_share_of_the_variance(tmp_path):
    """``--n-components 0.95`` writes the fewest leading components that explain 95% of the variance, as
    ``n_components=0.95`` keeps them in Python; a share outside (0, 1) is a usage error."""
    import rioxarray  # noqa: F401

    from ppa_xr import load_model
    from ppa_xr.datasets import rgb_byte_path

    model = tmp_path / "m.nc"
    assert main(["fit", rgb_byte_path(), str(model), "--degree", "1", "--n-samples", "2000"]) == 0
    for share in ("0.5", "0.999999"):
        out = tmp_path / f"c{share}.tif"
        assert main(["transform", rgb_byte_path(), str(model), str(out), "--n-components", share]) == 0
        with rioxarray.open_rasterio(out) as written:
            assert written.sizes["band"] == load_model(model).kept(float(share))
    with pytest.raises(SystemExit):
        main(["transform", rgb_byte_path(), str(model), str(tmp_path / "x.tif"), "--n-components", "1.5"])


def test_a_file_of_one_variable_is_that_variable_as_write_cube_writes_a_dataarray(tmp_path):
    """A netCDF or zarr file of one variable (what write_cube and `transform` write for a DataArray) is read as that
    variable by every command: as a Dataset, its one variable would be one feature, no model's input."""
    rioxarray = pytest.importorskip("rioxarray")
    from ppa_xr import write_cube
    cube = rioxarray.open_rasterio(rgb_byte_path(), masked=True, chunks={"x": 256, "y": 256})
    model = tmp_path / "m.nc"
    assert main(["fit", rgb_byte_path(), str(model), "--n-samples", "5000", "--degree", "2", "--seed", "0"]) == 0
    for suffix in (".nc", ".zarr"):
        scene = write_cube(cube.rename(None), tmp_path / f"scene{suffix}")  # a DataArray without a name: one variable, 'data'
        assert main(["fit", str(scene), str(tmp_path / f"m{suffix}.nc"), "--n-samples", "5000", "--degree", "2", "--seed", "0"]) == 0
        assert main(["transform", str(scene), str(model), str(tmp_path / f"c{suffix}")]) == 0
        assert main(["inverse", str(tmp_path / f"c{suffix}"), str(model), str(tmp_path / f"b{suffix}.tif")]) == 0
    tif = tmp_path / "c.tif"
    assert main(["transform", rgb_byte_path(), str(model), str(tif)]) == 0
    expected = rioxarray.open_rasterio(tif, masked=True).values
    for suffix in (".nc", ".zarr"):  # the uint8 scene read back with its scale_factor 1.0 as float64: float32 rounding apart
        np.testing.assert_allclose(ppa_xr.open_cube(tmp_path / f"c{suffix}").values, expected, rtol=1e-5, atol=1e-4)
