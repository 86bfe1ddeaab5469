"""The last bad inputs of the hostile trial: each reproduced, with its message and nothing lost or changed."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, geometry, load_model
from ppa_xr.cli import main

from .conftest import as_older_file, curved_sample, resealed


@pytest.fixture(scope="module")
def cube_model(landsat):
    return landsat.ppa.fit(n_samples=5000, random_state=0, degree=(1, 2, 3))


@pytest.mark.parametrize("name", ["m.zarr", "m.nc"])
def test_two_processes_saving_one_model_take_turns(tmp_path, name):
    """Two processes overwriting one model at the same time: each save waits its turn, the last one is whole.
    They start saving together (each waits until the other is ready), and each logs when its saves began and
    ended, so the test checks that the saves really overlapped."""
    sync, out = tmp_path / "sync", tmp_path / "out"
    sync.mkdir(), out.mkdir()
    script = textwrap.dedent(f"""
        import sys, time, numpy as np
        from pathlib import Path
        from ppa_xr import PPA
        X = np.random.default_rng(int(sys.argv[1])).normal(size=(400, 4))
        model = PPA(degree=2, random_state=0).fit(X)
        sync = Path({str(sync)!r})
        (sync / sys.argv[1]).touch()
        deadline = time.monotonic() + 240
        while len(list(sync.iterdir())) < 2 and time.monotonic() < deadline:  # both ready: save together
            time.sleep(0.01)
        began = time.monotonic()
        for _ in range(4):
            model.save({str(out / name)!r}, overwrite=True)
        print(began, time.monotonic())
    """)
    PPA(degree=1).fit(np.random.default_rng(9).normal(size=(400, 4))).save(out / name)
    runs = [subprocess.Popen([sys.executable, "-c", script, str(seed)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for seed in (1, 2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    (began_1, ended_1), (began_2, ended_2) = (map(float, stdout.split()) for stdout, _ in outputs)
    assert max(began_1, began_2) < min(ended_1, ended_2), outputs  # the two processes were saving at the same time
    loaded = load_model(out / name)  # the last complete save, whole
    assert loaded.degrees_.tolist() == [2, 2, 2]
    assert sorted(p.name for p in out.iterdir()) == sorted([name, f".{name}.lock"])  # no orphaned temporaries


def test_inverse_transform_matches_components_by_label(landsat, cube_model):
    scores = landsat.ppa.transform(cube_model, n_components=4)
    expected = scores.ppa.inverse_transform(cube_model)
    shuffled = scores.isel(component=[3, 2, 1, 0]).ppa.inverse_transform(cube_model)
    np.testing.assert_array_equal(shuffled.values, expected.values)
    for labels in ([2, 3], [1, 3], [0, 1]):
        with pytest.raises(ValueError, match=r"first k components, labelled 1\.\.2.*cannot be skipped"):
            scores.sel(component=labels if 0 not in labels else [1, 2]).assign_coords(component=labels).ppa.inverse_transform(cube_model)
    with pytest.raises(TypeError, match="real numbers"):
        cube_model.inverse_transform(np.ones((2, 3), complex))


def test_fitting_never_changes_the_callers_attributes():
    rng = np.random.default_rng(0)
    cube = xr.DataArray(rng.normal(size=(3, 30, 30)), dims=("band", "y", "x"))
    cube.attrs.update(_FillValue=np.nan, missing_value=np.nan, units="m")
    before = dict(cube.attrs)
    model = cube.ppa.fit(degree=1)
    cube.ppa.transform(model)
    assert cube.attrs.keys() == before.keys() and cube.attrs["units"] == "m"
    ds = cube.to_dataset("band").rename({0: "a", 1: "b", 2: "c"})
    ds["a"].attrs["_FillValue"] = np.nan
    ds.ppa.fit(dim="feature", degree=1)
    assert "_FillValue" in ds["a"].attrs


@pytest.mark.filterwarnings("ignore:Object at notes.txt is not recognized")  # zarr reading the store it was given
def test_overwriting_a_model_store_keeps_foreign_files(tmp_path, cube_model):
    path = cube_model.save(tmp_path / "m.zarr")
    (path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"files a model does not write \(notes.txt\).*move them out"):
        cube_model.save(path, overwrite=True)
    assert (path / "notes.txt").read_text() == "mine"
    np.testing.assert_array_equal(load_model(path).components_, cube_model.components_)


def test_jacobian_and_metric_of_an_invalid_point_are_all_nan():
    X = curved_sample(1000, d=3)
    model = PPA(degree=2, random_state=0).fit(X)
    bad = X[:3].copy()
    bad[0, 1], bad[1, 0] = np.nan, np.inf
    J = model.jacobian(bad)
    assert np.isnan(J[:2]).all() and np.isfinite(J[2]).all()
    assert np.isnan(geometry.metric(model, bad)[:2]).all()
    R = model.transform(bad)  # inf rows come back NaN, as on cubes, instead of refusing the batch
    assert np.isnan(R[:2]).all() and np.isfinite(R[2]).all()


def test_standardize_keeps_features_at_extreme_scales():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=800) * 1e150, rng.normal(size=800) * 1e-150, rng.normal(size=800)])
    model = PPA(degree=2, standardize=True, random_state=0).fit(X)
    np.testing.assert_allclose(model.scale_, X.std(axis=0), rtol=1e-12)
    back = model.inverse_transform(model.transform(X))
    assert np.all(np.abs(back - X).max(axis=0) <= 1e-12 * X.std(axis=0))


def test_inconsistent_model_files_are_refused(cube_model):
    from ppa_xr.model import file as model_io

    ds = cube_model.to_dataset()
    old = as_older_file(ds, 2)
    old["feature_scale"] = ("feature", np.full(10, 2.0))  # a version-2 file cannot carry scales
    with pytest.raises(ValueError, match=r"format-2 file cannot hold \['feature_scale'\]"):
        PPA.from_dataset(old)
    scaled = ds.copy()
    values = ds["whitening"].values / 2
    scaled["whitening"] = ds["whitening"].copy(data=values).assign_attrs(sha256=model_io._checksum("whitening", values))
    with pytest.raises(ValueError, match=r"whitening matrix does not match its parameters \(no whitening\)"):
        PPA.from_dataset(scaled)
    levels = resealed(ds.assign_attrs(feature_levels="[not json"))
    with pytest.raises(ValueError, match="dataset is corrupt: its feature_levels attribute"):
        PPA.from_dataset(levels)


def test_geometry_does_not_depend_on_whitening():
    rng = np.random.default_rng(0)
    t = rng.uniform(-1.5, 1.5, 3000)
    X = np.column_stack([t, t**2, 0.3 * t**3]) + 0.05 * rng.normal(size=(3000, 3))
    plain, white = (PPA(degree=3, random_state=0, whiten=w).fit(X) for w in (False, True))
    np.testing.assert_allclose(geometry.curvatures(white, X[:200]), geometry.curvatures(plain, X[:200]), rtol=1e-10)
    np.testing.assert_allclose(geometry.principal_grid(white), geometry.principal_grid(plain), rtol=1e-10)
    for order in (0, -2, "x", True):
        with pytest.raises(ValueError, match=r"order \(1: the tangent c'\) must be an integer in \[1, 3\]"):
            geometry.derivatives(plain, X[:5], order=order)
    with pytest.raises(ValueError, match=r"points \(grid points per component\) must be an integer >= 2"):
        geometry.principal_grid(plain, points=-3)


def test_cli_names_a_bad_directory_and_a_bad_scheduler(tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    assert main(["fit", str(tmp_path / "folder"), str(tmp_path / "m.nc")]) == 2
    assert "is a directory but not a zarr store" in capsys.readouterr().err
    assert main(["demo", "--scheduler", "bogus"]) == 2
    assert "--scheduler 'bogus': expected threads, processes or a scheduler address" in capsys.readouterr().err
    assert not (tmp_path / "m.nc").exists()


def test_json_of_the_sample_is_readable(tmp_path, cube_model):
    ds = cube_model.to_dataset()
    record = json.loads(ds.attrs["fit_sample"])
    assert isinstance(record, list) and record[0]["size"] == 5000 and len(record[0]["witness"]) == 2
    assert ppa_xr.PPA.from_dataset(ds).sample_ == cube_model.sample_


def test_a_model_without_checksums_is_refused(cube_model):
    ds = cube_model.to_dataset()
    ds["rotation"].attrs.pop("sha256")
    with pytest.raises(ValueError, match="checksum of 'rotation' does not match"):
        PPA.from_dataset(ds)


def test_overwrite_never_writes_over_an_input(tmp_path, cube_model, capsys):
    from ppa_xr.datasets import landsat8_sample_path

    scene = tmp_path / "scene.tif"
    scene.write_bytes(open(landsat8_sample_path(), "rb").read())
    before = scene.read_bytes()
    model = cube_model.save(tmp_path / "m.nc")
    assert main(["transform", str(scene), str(model), str(scene), "--overwrite"]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert main(["transform", str(scene), str(model), str(model), "--overwrite"]) == 2  # the model is an input too
    assert scene.read_bytes() == before and load_model(model).degrees_.tolist() == cube_model.degrees_.tolist()
