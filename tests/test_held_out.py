"""With default arguments, evaluate and the report are held out on every bundled scene: a default fit leaves
half of a scene's valid pixels unsampled."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ppa_xr.cli import main
from ppa_xr.cube import inputs, sampling
from ppa_xr.cube.sampling import FIT_SHARE, MIN_HELD_OUT
from ppa_xr.datasets import landsat8_sample_path, open_abu_beach, open_ersst_sample, open_landsat8_sample, open_rgb_byte

SCENES = {
    "landsat": (lambda: open_landsat8_sample(chunks={"x": 160, "y": 160}), "band"),
    "rgb_byte": (lambda: open_rgb_byte(chunks={"x": 256, "y": 256}), "band"),
    "abu_beach": (lambda: open_abu_beach()["reflectance"], "band"),
    "ersst": (lambda: open_ersst_sample()["sst"], "time"),
}


@pytest.mark.parametrize("name", SCENES)
def test_default_fit_leaves_half_held_out_for_evaluate_and_the_report(name):
    opener, dim = SCENES[name]
    cube = opener()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the scales of ERSST's months, rgb_byte's few levels
        model = cube.ppa.fit(dim=dim, degree=(1, 2), random_state=0)
    valid = int(np.isfinite(cube.astype(float)).all(dim).sum()) if name != "rgb_byte" else int((cube != 0).all(dim).sum())
    assert model.sample_.size == min(200_000, int(FIT_SHARE * valid)) and valid - model.sample_.size >= MIN_HELD_OUT
    curves = cube.ppa.evaluate(model)
    assert curves.attrs["pixels"].startswith("held out") and curves.attrs["n_pixels"] == min(5000, valid - model.sample_.size)
    report = cube.ppa.information_report(model, n_components=2, n_samples=5000)
    assert report.attrs["estimated_on"].startswith("held out: pixels outside")


def test_cli_report_with_defaults_is_held_out(tmp_path, capsys):
    assert main(["fit", landsat8_sample_path(), str(tmp_path / "m.nc"), "--degree", "1", "2"]) == 0
    assert main(["report", landsat8_sample_path(), str(tmp_path / "m.nc"), str(tmp_path / "rep")]) == 0
    assert "held out: pixels outside the model's fitting sample" in (tmp_path / "rep" / "report.md").read_text()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_rearranged_fitting_cube_warns_that_its_fitting_pixels_count_as_held_out(seed):
    """The months of an S-mode fit reversed (or cropped): the record of the fitting sample no longer finds them, so the
    24 fitting months counted as held out beside the 12 others, silently (evaluate's error 20% lower). The witness
    pixel of the fitting sample, found among the drawn ones, says so: in evaluate, the report and the shift check."""
    cells = open_ersst_sample()["sst"].load().stack(cell=("lat", "lon"))
    model = cells.ppa.fit(dim="cell", degree=1, n_samples=24, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cells.ppa.evaluate(model, n_samples=None).attrs["n_pixels"] == 12  # as fitted: silent
        cells.isel(time=slice(24, 36)).ppa.evaluate(model, n_samples=None)  # another year the fit never saw: silent
    witness = model.sample_.cubes[0].witness[0]  # the month whose values the record keeps
    prepared = inputs.model_features(cells, model, None)[0]  # as evaluate reads it
    assert sampling.Fitted.of(prepared, "cell", model) == sampling.Fitted(model.sample_.cubes, model.sample_)  # S-mode: witnesses looked for
    for moved in (cells.isel(time=slice(None, None, -1)), cells.drop_isel(time=1 if witness == 0 else 0)):
        with pytest.warns(UserWarning, match="holds a pixel of the model's fitting sample, but not where"):
            moved.ppa.evaluate(model, n_samples=None)
        with pytest.warns(UserWarning, match="holds a pixel of the model's fitting sample, but not where"):
            moved.ppa.information_report(model)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_reversed_fitting_scene_is_named_with_the_flip_that_restores_it(seed):
    """The fitting scene sorted the other way up (``sortby('y')``, a file read bottom-up) or flipped along x: the record
    of its fitting pixels is by position, so evaluate, the report and the shift check drew fitted pixels as held out,
    silently (a T-mode draw finds the fitting sample's witness by chance only). The witness, looked for at its mirrored
    places, names the dims reversed and the isel that restores the cube; another scene on the grid passes."""
    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    model = cube.ppa.fit(degree=1, n_samples=20_000, random_state=seed)
    for flipped, dims in ((cube.sortby("y"), "'y'"), (cube.isel(x=slice(None, None, -1)), "'x'"),
                          (cube.isel(y=slice(None, None, -1), x=slice(None, None, -1)), "'y' and 'x'")):
        for measure in (lambda c: c.ppa.evaluate(model, max_chunks=2), lambda c: c.ppa.transform(model, 2, check=True)):
            with pytest.warns(UserWarning, match=f"fitting cube with {dims} reversed since the fit.*cube.isel\\("):
                measure(flipped)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        cube.ppa.evaluate(model, max_chunks=2)
        (cube * 1.01).ppa.evaluate(model, max_chunks=2)  # another scene on the same grid
        restored = cube.sortby("y").isel(y=slice(None, None, -1))
        assert restored.ppa.evaluate(model, max_chunks=2).attrs["n_pixels"] == cube.ppa.evaluate(model, max_chunks=2).attrs["n_pixels"]
