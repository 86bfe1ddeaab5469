"""Never lose a user's data: safe saves, guarded CLI outputs, verified model files, hostile inputs."""

import json
import multiprocessing
import os
import pickle
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA
from ppa_xr.model import file as model_io
from ppa_xr.cli import main
from ppa_xr.datasets import landsat8_sample_path, open_landsat8_sample

from .conftest import curved_sample, resealed


@pytest.fixture(scope="module")
def model(landsat):
    return landsat.ppa.fit(n_samples=5000, random_state=0)


def tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- files
@pytest.mark.parametrize("name", ["thesis_dir", "out.nc", "results.zarr"])
def test_save_never_replaces_what_is_not_a_model(tmp_path, model, name):
    target = tmp_path / name
    (target / "sub").mkdir(parents=True)
    (target / "thesis.tex").write_text("chapter 1")
    (target / "sub" / "data.csv").write_text("1,2,3")
    before = tree(target)
    for overwrite in (False, True):
        with pytest.raises((FileExistsError, ValueError), match="not a ppa_xr model|must end in"):
            model.save(target, overwrite=overwrite)
    assert tree(target) == before


def test_overwriting_a_model_needs_overwrite(tmp_path, model, landsat):
    other = landsat.ppa.fit(n_samples=3000, random_state=1, degree=2)
    for name in ("m.nc", "m.zarr"):
        path = model.save(tmp_path / name)
        with pytest.raises(FileExistsError, match="overwrite=True"):
            other.save(path)
        np.testing.assert_array_equal(ppa_xr.load_model(path).params_.forward, model.params_.forward)
        other.save(path, overwrite=True)
        np.testing.assert_array_equal(ppa_xr.load_model(path).params_.forward, other.params_.forward)
        hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
        assert f".{name}.lock" in hidden and set(hidden) <= {".m.nc.lock", ".m.zarr.lock"}  # no temporary left; the locks


def _save_forever(models, path):
    i = 0
    while True:
        models[i % 2].save(path, overwrite=True)
        i += 1


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_killed_during_save_leaves_the_old_or_the_new_model(tmp_path, model, landsat, name):
    models = (model, landsat.ppa.fit(n_samples=3000, random_state=1, degree=2))
    path = models[0].save(tmp_path / name)
    rng = np.random.default_rng(0)
    context = multiprocessing.get_context("fork")  # the child inherits the imports: it starts saving at once
    for _ in range(12):
        child = context.Process(target=_save_forever, args=(models, path))
        child.start()
        time.sleep(rng.uniform(0.05, 0.4))
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        loaded = ppa_xr.load_model(path)
        assert any(np.array_equal(loaded.params_.forward, m.params_.forward) for m in models)


def test_cli_never_writes_over_its_inputs(tmp_path, capsys):
    cube = open_landsat8_sample()
    bands = []
    for b in cube.band.values[:4]:
        bands.append(tmp_path / f"B{len(bands) + 1}.TIF")
        cube.sel(band=[b]).drop_vars("wavelength").rio.to_raster(bands[-1])
    before = {p: p.read_bytes() for p in bands}
    assert main(["fit", *map(str, bands), "--n-samples", "2000"]) == 2  # the model path forgotten
    assert "must end in .nc" in capsys.readouterr().err
    assert main(["fit", *map(str, bands[:3]), str(tmp_path / "m.nc"), "--n-samples", "2000"]) == 0
    scene = bands[0]
    assert main(["transform", str(scene), str(tmp_path / "m.nc"), str(scene)]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert main(["transform", *map(str, bands[:3]), str(tmp_path / "m.nc"), str(tmp_path / "out.png")]) == 2
    assert "must end in one of" in capsys.readouterr().err
    out = tmp_path / "c.tif"
    out.write_bytes(b"precious")
    assert main(["transform", *map(str, bands[:3]), str(tmp_path / "m.nc"), str(out)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == b"precious"
    assert main(["transform", *map(str, bands[:3]), str(tmp_path / "m.nc"), str(out), "--overwrite"]) == 0
    assert {p: p.read_bytes() for p in bands} == before


# --------------------------------------------------------------------------- model files
def test_a_flipped_bit_in_a_file_is_caught(tmp_path, model):
    import h5py

    path = model.save(tmp_path / "m.nc")
    with h5py.File(path, "r+") as f:
        raw = f["mean"][...].view(np.uint64)
        raw[0] ^= np.uint64(1) << np.uint64(53)  # an exponent bit
        f["mean"][...] = raw.view(np.float64)
    with pytest.raises(ValueError, match="checksum of 'mean'"):
        ppa_xr.load_model(path)


def test_shapes_dtypes_and_parameters_are_checked(model):
    ds = model.to_dataset()

    def signed(name, values, dims):
        return ds.drop_vars(name).assign({name: (dims, values, {"sha256": model_io._checksum(name, values)})})

    with pytest.raises(ValueError, match="shapes of \\['forward_bias'\\]"):
        PPA.from_dataset(signed("forward_bias", np.zeros((7, 10)), ("b", "output")))
    with pytest.raises(ValueError, match="shapes of \\['inverse_bias'\\]"):
        PPA.from_dataset(signed("inverse_bias", np.zeros((9, 1)), ("step", "a")))
    with pytest.raises(ValueError, match="degrees has dtype"):
        PPA.from_dataset(signed("degrees", ds["degrees"].values.astype(float), ("step",)))
    init = json.loads(ds.attrs["estimator_params"])
    for change, message in (({"n_components": 100}, "n_components"), ({"tails": "bogus"}, "tails"), ({"degree": 50}, "degree")):
        bad = resealed(ds.assign_attrs(estimator_params=json.dumps(init | change)))
        with pytest.raises(ValueError, match=message):
            PPA.from_dataset(bad)
    with pytest.raises(ValueError, match="tails attribute 'linear' disagrees"):
        PPA.from_dataset(resealed(ds.assign_attrs(tails="linear")))
    with pytest.raises(ValueError, match="format version 'two' is not an integer"):
        PPA.from_dataset(ds.assign_attrs(ppa_xr_format_version="two"))


def test_a_pickle_in_a_zarr_model_is_refused_and_never_run(tmp_path, model):
    path = model.save(tmp_path / "m.zarr")
    marker = tmp_path / "code_ran"
    evil = path / "extra"
    evil.mkdir()
    spec = {"shape": [1], "data_type": "int8", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1]}},
            "chunk_key_encoding": {"name": "default"}, "fill_value": 0, "zarr_format": 3, "node_type": "array",
            "codecs": [{"name": "numcodecs.pickle"}, {"name": "bytes"}], "dimension_names": ["x"], "attributes": {}}
    (evil / "zarr.json").write_text(json.dumps(spec))
    (evil / "c").mkdir()

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    (evil / "c" / "0").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(ValueError, match="codecs \\['numcodecs.pickle'\\]"):
        ppa_xr.load_model(path)
    assert not marker.exists()
    (evil / "zarr.json").write_text(json.dumps(spec | {"codecs": [{"name": "bytes"}]}))
    with pytest.raises(ValueError, match="not part of a ppa_xr model: \\['extra'\\]"):
        ppa_xr.load_model(path)


def test_broken_model_paths_give_clear_errors(tmp_path, model):
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(ValueError, match="empty.zarr is an empty directory"):
        ppa_xr.load_model(tmp_path / "empty.zarr")
    path = model.save(tmp_path / "m.zarr")
    (path / "zarr.json").write_text("{ not json")
    with pytest.raises(ValueError, match="m.zarr is corrupt: zarr.json is not valid JSON"):
        ppa_xr.load_model(path)
    with pytest.raises(FileNotFoundError, match="no model at .*absent.nc"):
        ppa_xr.load_model(tmp_path / "absent.nc")


@pytest.mark.filterwarnings("ignore:the features' standard deviations differ")  # cells of unlike scales, as drawn
def test_stacked_feature_dimension_saves_and_loads(tmp_path):
    sst = ppa_xr.datasets.open_ersst_sample()["sst"].isel(lat=slice(40, 44), lon=slice(0, 6)).fillna(0)
    cells = sst.stack(cell=("lat", "lon"))  # EOF analysis: grid cells as features, months as samples
    model = cells.ppa.fit(dim="cell", n_samples=36, degree=(1, 2), random_state=0)
    loaded = ppa_xr.load_model(model.save(tmp_path / "eof.nc"))
    assert loaded.features_.levels == ("lat", "lon")
    np.testing.assert_array_equal(cells.ppa.transform(loaded).values, cells.ppa.transform(model).values)
    back = cells.ppa.transform(loaded).ppa.inverse_transform(loaded)
    assert back.indexes["cell"].names == ["lat", "lon"]
    np.testing.assert_allclose(back.transpose(*cells.dims).values, cells.values, atol=1e-3)


# --------------------------------------------------------------------------- inputs
def test_infinite_pixels_are_nan_in_every_output(landsat, model):
    cube = landsat.astype(np.float32).copy()
    cube[:, 5, 7] = np.inf
    cube[2, 9, 9] = -np.inf
    outputs = [cube.ppa.transform(model), cube.ppa.reconstruct(model, 2), cube.ppa.reconstruction_error(model, 2)]
    outputs += [cube.ppa.information_report(model, n_samples=2000)[v] for v in ("mi_reduction_ppa", "error_pca")]
    for out in outputs:
        values = out.values
        assert np.isnan(values[..., 5, 7]).all() and np.isnan(values[..., 9, 9]).all()
        assert np.isfinite(values[..., 0, 0]).all()


def test_repeated_band_labels_are_refused(landsat, model, tmp_path):
    twice = landsat.assign_coords(band=["B1", "B1", *landsat.band.values[2:]])
    with pytest.raises(ValueError, match="repeat: \\['B1'\\]"):
        twice.ppa.fit(n_samples=1000)
    with pytest.raises(ValueError, match="repeat: \\['B1'\\]"):
        twice.ppa.transform(model)
    path = tmp_path / "b.tif"
    landsat.isel(band=[0]).drop_vars("wavelength").rio.to_raster(path)
    with pytest.raises(ValueError, match="the same file is given more than once"):
        ppa_xr.open_band_stack([path, tmp_path / "." / "b.tif"])


@pytest.mark.parametrize("k", [0, 2.7, -1, 11, True])
def test_component_counts_are_checked_when_called(landsat, model, k):
    X = curved_sample(500)
    fitted = PPA(degree=2).fit(X)
    with pytest.raises(ValueError, match="n_components must be an integer in \\[1, "):
        fitted.reconstruct(X, k)
    for call in (landsat.ppa.transform, landsat.ppa.reconstruct, landsat.ppa.reconstruction_error):
        with pytest.raises(ValueError, match="n_components must be an integer in \\[1, 10\\]"):
            call(model, k)
    if k in (0, 11):
        with pytest.raises(ValueError, match="n_components"):
            PPA(n_components=k).fit(X if k == 11 else X)


@pytest.mark.parametrize("degree, message", [(2.5, "degree' parameter"), (None, "degree' parameter"), (50, "degree' parameter"),
                                             ([2, 2.5], "degree' parameter"), ([], "degree' parameter")])
def test_bad_degrees_give_clear_messages(degree, message):
    with pytest.raises(ValueError, match=message):
        PPA(degree=degree).fit(curved_sample(500))


def test_bad_folds_are_refused():
    with pytest.raises(ValueError, match="n_folds"):
        PPA(n_folds=1).fit(curved_sample(500))


def test_band_stack_honours_each_bands_nodata(tmp_path):
    cube = open_landsat8_sample()
    paths = []
    for i, (band, nodata) in enumerate(zip(cube.band.values[:3], (65535, 0, 65535))):
        layer = cube.sel(band=[band]).drop_vars("wavelength").astype(np.uint16).copy()
        layer[0, :10, :10] = nodata  # 100 nodata pixels in every band, each with its own value
        paths.append(tmp_path / f"L8_B{i}.tif")
        layer.rio.write_nodata(nodata).rio.to_raster(paths[-1])
    stack = ppa_xr.open_band_stack(paths)
    assert stack.dtype == np.float32 and np.isnan(stack.rio.nodata)
    assert np.isnan(stack.values[:, :10, :10]).all() and np.isfinite(stack.values[:, 10:, 10:]).all()
    with pytest.warns(UserWarning, match="only 102300 valid pixels"):
        sample = stack.ppa.sample(n_samples=10**6)
    assert len(sample) == stack.sizes["x"] * stack.sizes["y"] - 100


# --------------------------------------------------------------------------- CLI errors
def one_line_error(capsys, argv) -> str:
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse's own checks exit
        status = stop.code
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def raster_model(tmp_path_factory):
    """A model fitted on the scene opened as the CLI opens it (bands labelled 1..10)."""
    import rioxarray

    path = tmp_path_factory.mktemp("cli") / "m.nc"
    return str(rioxarray.open_rasterio(landsat8_sample_path()).ppa.fit(n_samples=3000, random_state=0).save(path))


def test_cli_errors_are_one_line(tmp_path, capsys, raster_model):
    scene, m = landsat8_sample_path(), raster_model
    (tmp_path / "notes.txt").write_text("not a raster")
    assert "does not exist" in one_line_error(capsys, ["transform", str(tmp_path / "absent.tif"), m, str(tmp_path / "o.tif")])
    assert "cannot read" in one_line_error(capsys, ["transform", str(tmp_path / "notes.txt"), m, str(tmp_path / "o.tif")])
    assert "directory of output" in one_line_error(capsys, ["transform", scene, m, str(tmp_path / "no" / "o.tif")])
    for chunks in ("0", "-5"):
        assert "must be a positive integer" in one_line_error(capsys, ["transform", scene, m, str(tmp_path / "o.tif"), "--chunks", chunks])
    assert "is a file" in one_line_error(capsys, ["demo", "--output-dir", str(tmp_path / "notes.txt")])
    assert "--variable" in one_line_error(capsys, ["transform", scene, m, str(tmp_path / "o.tif"), "--variable", "x"])
    assert "n_components must be" in one_line_error(capsys, ["transform", scene, m, str(tmp_path / "o.tif"), "--n-components", "11"])
    assert "degree" in one_line_error(capsys, ["fit", scene, str(tmp_path / "m50.nc"), "--degree", "50", "--n-samples", "500"])


def test_cli_inverse_reads_what_transform_wrote(tmp_path, raster_model):
    scene, m = landsat8_sample_path(), raster_model
    assert main(["transform", scene, m, str(tmp_path / "c.nc")]) == 0
    assert main(["inverse", str(tmp_path / "c.nc"), m, str(tmp_path / "back.nc")]) == 0
    back = xr.open_dataset(tmp_path / "back.nc", decode_coords="all")
    original = open_landsat8_sample()
    # float32 components of uint16 bands: measured 5.5e-7 relative, held to 10x that
    np.testing.assert_allclose(next(iter(back.data_vars.values())).transpose("band", "y", "x").values, original.values, rtol=5e-6, atol=0)


def test_high_degrees_warn_for_float32(landsat):
    model = landsat.ppa.fit(n_samples=3000, degree=18, random_state=0)
    with pytest.warns(UserWarning, match="float32 the round trip"):
        landsat.astype(np.float32).ppa.transform(model)
