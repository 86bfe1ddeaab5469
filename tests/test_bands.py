"""Band labels that travel: a model fitted through one way of opening a scene applies to the scene opened another way."""

import warnings

import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr

import ppa_xr
from ppa_xr.cli import main
from ppa_xr.datasets import landsat8_sample_path, open_landsat8_sample
from ppa_xr.cube.rasters import band_name


def test_band_descriptions_label_a_raw_rioxarray_cube(landsat):
    model = landsat.ppa.fit(n_samples=5000, random_state=0)
    raw = rioxarray.open_rasterio(landsat8_sample_path())  # bands 1..10, descriptions B1..B11
    np.testing.assert_array_equal(raw.ppa.transform(model).values, landsat.ppa.transform(model).values)
    raw_model = raw.ppa.fit(n_samples=5000, random_state=0)
    assert list(raw_model.feature_labels_) == list(landsat.band.values)
    landsat.ppa.transform(raw_model)  # and the other way round


@pytest.mark.parametrize("name, band", [("LC08_L2SP_044034_20210101_SR_B4.TIF", "B4"), ("T32TQM_20230101_B8A.jp2", "B8A"),
                                        ("scene_b10.tif", "B10"), ("nir.tif", "nir")])
def test_band_names_from_file_names(name, band):
    assert band_name(name) == band


def test_default_sample_size_is_silent_on_small_scenes(landsat):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = landsat.ppa.fit(random_state=0)  # 102,400 pixels, fewer than the default 200,000
    assert model.sample_.size == 320 * 320 // 2  # half of them: the other half stays held out
    assert landsat.ppa.evaluate(model).attrs["pixels"].startswith("held out")
    with pytest.warns(UserWarning, match="asked for n_samples=500000"):
        landsat.ppa.fit(n_samples=500_000, random_state=0)


def test_dataset_in_dataset_out(landsat):
    ds = landsat.drop_vars("wavelength").to_dataset(dim="band")
    model = ds.ppa.fit(n_samples=5000, random_state=0)
    back = ds.ppa.transform(model).ppa.inverse_transform(model)
    assert isinstance(back, xr.Dataset) and list(back.data_vars) == list(ds.data_vars)
    np.testing.assert_allclose(back["B4"].values, ds["B4"].values, rtol=5e-6)  # float32 round trip: measured 4.4e-7


def test_a_datasets_reconstruction_and_fill_come_back_as_its_variables(landsat):
    ds = landsat.drop_vars("wavelength").to_dataset(dim="band")
    ds["B4"].attrs = {"units": "reflectance", "scale_factor": 1.0}
    ds = ds[["B5", *[name for name in ds.data_vars if name != "B5"]]]  # not the model's order
    model = landsat.ppa.fit(n_samples=5000, random_state=0)  # fitted on the DataArray: the input's form decides
    rebuilt = ds.ppa.reconstruct(model, 3)
    assert isinstance(rebuilt, xr.Dataset) and set(rebuilt.data_vars) == set(ds.data_vars)
    assert rebuilt["B4"].attrs == {"units": "reflectance"} and "scale_factor" not in rebuilt.attrs  # unpacked floats
    np.testing.assert_array_equal(rebuilt["B5"].values, landsat.ppa.reconstruct(model, 3).sel(band="B5").values)
    clear = ds["B2"] < ds["B2"].quantile(0.9)
    cloudy = ds.assign(B4=ds["B4"].where(clear), B5=ds["B5"].where(clear))  # two bands missing at a tenth of the pixels
    filled, mask = cloudy.ppa.fill(model, return_mask=True)
    assert isinstance(filled, xr.Dataset) and isinstance(mask, xr.Dataset) and set(mask.data_vars) == set(ds.data_vars)
    assert int(mask["B4"].sum()) == int((~clear).sum()) > 0 and int(mask["B3"].sum()) == 0
    assert not filled["B4"].isnull().any()
    np.testing.assert_array_equal(filled["B4"].values[~mask["B4"].values], cloudy["B4"].values[~mask["B4"].values])


def test_cli_band_stacks_travel_between_scenes_and_outputs_describe_bands(tmp_path, capsys):
    cube = open_landsat8_sample()
    for scene in ("LC08_TEST", "LC08_OTHER"):
        for band in ("B2", "B3", "B4", "B5"):
            cube.sel(band=[band]).drop_vars("wavelength").rio.to_raster(tmp_path / f"{scene}_{band}.TIF")
    files = lambda scene: [str(tmp_path / f"{scene}_{b}.TIF") for b in ("B2", "B3", "B4", "B5")]  # noqa: E731
    assert main(["fit", *files("LC08_TEST"), str(tmp_path / "m.nc")]) == 0
    assert "fitted PPA on 51200 sampled pixels x 4 features along 'band' [B2, B3, B4, B5]" in capsys.readouterr().out
    assert main(["transform", *files("LC08_OTHER"), str(tmp_path / "m.nc"), str(tmp_path / "c.tif")]) == 0
    with rasterio.open(tmp_path / "c.tif") as src:
        assert src.descriptions == ("PPA component 1", "PPA component 2", "PPA component 3", "PPA component 4")
    assert main(["inverse", str(tmp_path / "c.tif"), str(tmp_path / "m.nc"), str(tmp_path / "back.tif")]) == 0
    with rasterio.open(tmp_path / "back.tif") as src:
        assert src.descriptions == ("B2", "B3", "B4", "B5")
    renamed = tmp_path / "other.tif"
    cube.sel(band=["B2", "B3", "B4", "B5"]).drop_vars("wavelength").assign_coords(band=[1, 2, 3, 4]).rio.to_raster(renamed)
    assert main(["transform", str(renamed), str(tmp_path / "m.nc"), str(tmp_path / "d.tif")]) == 2
    assert "--match-bands position" in capsys.readouterr().err  # the CLI suggests CLI flags
    assert main(["transform", str(renamed), str(tmp_path / "m.nc"), str(tmp_path / "d.tif"), "--match-bands", "position"]) == 0
    assert main(["transform", str(renamed), str(tmp_path / "m.nc"), str(tmp_path / "e.tif"), "--bands", "B2", "B3", "B4", "B5"]) == 0
    assert main(["transform", str(renamed), str(tmp_path / "m.nc"), str(tmp_path / "f.tif"), "--bands", "B2"]) == 2
    assert "--bands names 1 bands, the input has 4" in capsys.readouterr().err
    np.testing.assert_allclose(xr.open_dataarray(tmp_path / "d.tif").values, xr.open_dataarray(tmp_path / "e.tif").values)
    assert ppa_xr.load_model(tmp_path / "m.nc").features_.labels.tolist() == ["B2", "B3", "B4", "B5"]


def test_fitted_repr_says_what_the_model_holds(landsat):
    model = landsat.ppa.fit(n_samples=3000, random_state=0)
    text = repr(model)
    assert text.startswith("PPA(") and "features: 10 (B1, B2, B3, B4, B5, B6, B7, B9, B10, B11) along 'band'" in text
    assert "tails: clamp" in text and "fitting sample: 3000 pixels" in text and "degrees per step: [" in text
    assert repr(ppa_xr.PPA(degree=2)) == "PPA(degree=2)"


def stac_like_cube(landsat):
    """What stackstac returns: (time, band, y, x) float64, NaN fill, band chunks of 1."""
    times = [landsat.astype("float64"), landsat.astype("float64") * 1.05 + 100, landsat.astype("float64") * 0.95]
    cube = xr.concat(times, dim="time").assign_coords(time=np.array(["2021-01-01", "2021-02-01", "2021-03-01"], dtype="datetime64[ns]"))
    cube = cube.where(~((cube.x < cube.x[40]) & (cube.time == cube.time[1])))  # a scene edge: NaN fill
    return cube.transpose("time", "band", "y", "x").chunk({"time": 1, "band": 1, "y": 160, "x": 160})


def test_stackstac_style_cube_fits_pooled_over_time(landsat):
    cube = stac_like_cube(landsat)
    model = cube.ppa.fit(n_samples=20_000, random_state=0)  # pooled over time
    scores = cube.ppa.transform(model, n_components=3)
    assert scores.dims == ("time", "component", "y", "x") and scores.chunks[0] == (1, 1, 1)
    values = scores.values
    assert np.isnan(values[1, :, :, :40]).all() and np.isfinite(values[0]).all()
    _, groups = cube.ppa.sample(n_samples=20_000, random_state=0, return_groups=True)
    assert len(np.unique(groups)) == 100  # blocks over x/y, each spanning every time
    per_time = [cube.isel(time=t).ppa.fit(n_samples=5000, random_state=0) for t in range(3)]  # one model per time step
    assert all(m.n_features_in_ == 10 and m.sample_.cubes[0].shape == (320, 320) for m in per_time)
    assert not np.array_equal(per_time[0].mean_, per_time[1].mean_)  # each fitted on its own time step's pixels


def test_odc_stac_style_dataset(landsat):
    """What odc-stac returns: a Dataset with one (time, y, x) variable per band."""
    ds = stac_like_cube(landsat).drop_vars("wavelength").to_dataset(dim="band")
    model = ds.ppa.fit(n_samples=20_000, random_state=0)
    assert list(model.feature_labels_) == list(ds.data_vars)
    back = ds.ppa.transform(model).ppa.inverse_transform(model)
    assert isinstance(back, xr.Dataset) and back["B4"].dims == ("time", "y", "x")
    np.testing.assert_allclose(back["B4"].values[0], ds["B4"].values[0], rtol=1e-6)


def test_units_travel_to_outputs_when_all_bands_share_one(tmp_path, capsys):
    """Components of bands in one unit are in that unit (an orthogonal map plus shears); the CLI's
    GeoTIFFs carry it per band, reconstructions too, and the error map gets its square."""
    cube = open_landsat8_sample().sel(band=["B2", "B3", "B4", "B5"]).drop_vars("wavelength").astype("float32") / 1e4
    path = tmp_path / "scene.tif"
    cube.rio.to_raster(path)
    with rasterio.open(path, "r+") as dst:
        dst.units = ("reflectance",) * 4
    opened = rioxarray.open_rasterio(path, chunks={"x": 160, "y": 160})
    model = opened.ppa.fit(n_samples=5000, random_state=0)
    assert opened.ppa.transform(model).attrs["units"] == "reflectance"
    assert opened.ppa.reconstruction_error(model, 2).attrs["units"] == "(reflectance)^2"
    assert main(["fit", str(path), str(tmp_path / "m.nc")]) == 0
    assert main(["transform", str(path), str(tmp_path / "m.nc"), str(tmp_path / "c.tif"), "--n-components", "3"]) == 0
    assert main(["inverse", str(tmp_path / "c.tif"), str(tmp_path / "m.nc"), str(tmp_path / "back.tif")]) == 0
    for name, count in (("c.tif", 3), ("back.tif", 4)):
        with rasterio.open(tmp_path / name) as src:
            assert src.units == ("reflectance",) * count
    mixed = opened.assign_attrs(units=("reflectance", "reflectance", "K", "reflectance"))
    assert "units" not in mixed.ppa.transform(model).attrs  # no one unit: none claimed
    standardized = opened.ppa.fit(n_samples=5000, random_state=0, standardize=True)
    assert "units" not in opened.ppa.transform(standardized).attrs  # standardized components are not in reflectance
    assert opened.ppa.reconstruction_error(standardized, 2).attrs["units"] == "squared standardized units"  # nor their errors
    assert opened.ppa.reconstruct(standardized, 2).attrs["units"] == ("reflectance",) * 4  # reconstructions are


def test_geotiffs_from_python_describe_bands_as_the_cli_does(tmp_path, landsat):
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    scores = landsat.chunk({"x": 160, "y": 160}).ppa.transform(model, n_components=3, check=False)
    ppa_xr.to_raster(scores, tmp_path / "c.tif")
    ppa_xr.to_raster(scores.ppa.inverse_transform(model), tmp_path / "b.tif")
    assert main(["transform", landsat8_sample_path(), str(model.save(tmp_path / "m.nc")), str(tmp_path / "cli.tif"),
                 "--n-components", "3"]) == 0
    with rasterio.open(tmp_path / "c.tif") as py, rasterio.open(tmp_path / "cli.tif") as cli, rasterio.open(tmp_path / "b.tif") as back:
        assert py.descriptions == cli.descriptions == ("PPA component 1", "PPA component 2", "PPA component 3")
        assert back.descriptions == tuple(landsat.band.values)
        assert py.profile["tiled"] and py.profile["compress"] == "deflate"
    ppa_xr.to_raster(landsat.ppa.reconstruction_error(model, 2), tmp_path / "e.tif")  # a single map
    with rasterio.open(tmp_path / "e.tif") as error:
        assert error.count == 1 and error.descriptions[0].startswith("squared reconstruction error")


def test_per_band_attributes_follow_the_bands_a_model_reorders(tmp_path, landsat):
    """A cube's band descriptions and units (rioxarray's per-band tuples) are put in the model's order with the bands:
    they stayed in the cube's, so rio.to_raster described B1 as B11."""
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    names = [str(b) for b in landsat.band.values]
    described = landsat.assign_attrs(long_name=tuple(f"{b} described" for b in names), units=tuple(f"{b} unit" for b in names))
    flipped = described.isel(band=slice(None, None, -1)).assign_attrs(long_name=tuple(f"{b} described" for b in names[::-1]),
                                                                     units=tuple(f"{b} unit" for b in names[::-1]))
    for out in (flipped.ppa.reconstruct(model, 3), flipped.ppa.fill(model)):
        assert [str(b) for b in out.band.values] == names
        assert out.attrs["long_name"] == tuple(f"{b} described" for b in names) and out.attrs["units"] == tuple(f"{b} unit" for b in names)
    flipped.ppa.reconstruct(model, 3).rio.to_raster(tmp_path / "r.tif")
    with rasterio.open(tmp_path / "r.tif") as src:
        assert src.descriptions == tuple(f"{b} described" for b in names)
    extra = xr.concat([flipped, flipped.isel(band=[0]).assign_coords(band=["extra"])], dim="band", combine_attrs="override")
    extra = extra.assign_attrs(long_name=flipped.attrs["long_name"] + ("extra described",))
    with pytest.warns(UserWarning, match="left out"):
        assert extra.ppa.fill(model).attrs["long_name"] == tuple(f"{b} described" for b in names)


def test_other_wavelengths_under_the_model_labels_are_named(landsat):
    """Landsat 7's B5 is not Landsat 8's: a cube whose per-band coordinate differs from the model's under the same labels
    was transformed without a word."""
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        landsat.isel(band=slice(None, None, -1)).ppa.transform(model, n_components=2)
        landsat.assign_coords(wavelength=landsat.wavelength * 1.001).ppa.transform(model, n_components=2)  # within 1%: one sensor's twins
    other = landsat.assign_coords(wavelength=("band", np.where(landsat.band == "B5", 1.65, landsat.wavelength)))
    with pytest.warns(UserWarning, match=r"'wavelength' differs from the model's .*B5: 1.65 \(model 0.865\)"):
        other.ppa.transform(model, n_components=2)


def test_dates_match_at_any_resolution(landsat):
    """A model with dates as features (T-mode) and a cube holding the same dates as datetime64[s] (xarray keeps a
    file's resolution): the cube was said to lack every date."""
    dates = np.array(["2020-01-01", "2020-02-01", "2020-03-01", "2020-04-01", "2020-05-01", "2020-06-01", "2020-07-01", "2020-08-01",
                      "2020-09-01", "2020-10-01"], dtype="datetime64[ns]") + np.timedelta64(36_000, "s")
    series = landsat.drop_vars("wavelength").rename(band="time").assign_coords(time=dates)
    model = series.ppa.fit(dim="time", n_samples=3000, random_state=0, degree=2)
    seconds = series.assign_coords(time=dates.astype("datetime64[s]")).isel(time=slice(None, None, -1))
    assert seconds.time.dtype == np.dtype("datetime64[s]")
    np.testing.assert_array_equal(seconds.ppa.transform(model, n_components=3).values, series.ppa.transform(model, n_components=3).values)
    with pytest.raises(ValueError, match="lacks 1 of the model's time steps"):
        seconds.drop_isel(time=0).ppa.transform(model)


def test_cli_band_options_name_the_variables_of_a_netcdf(tmp_path, landsat):
    """--bands and --match-bands position on a netCDF of variables (its bands): they were ignored, so a fit asked for
    bands a..d kept the variables' names, silently. They name the variables, in order."""
    cube = landsat.isel(band=slice(0, 4), x=slice(0, 120), y=slice(0, 120)).drop_vars("wavelength")
    cube.to_dataset(dim="band").to_netcdf(tmp_path / "vars.nc")
    args = ["--n-samples", "3000", "--degree", "1"]
    assert main(["fit", str(tmp_path / "vars.nc"), str(tmp_path / "m.nc"), "--bands", "a", "b", "c", "d", *args]) == 0
    model = ppa_xr.load_model(tmp_path / "m.nc")
    assert list(model.feature_labels_) == ["a", "b", "c", "d"]
    assert main(["transform", str(tmp_path / "vars.nc"), str(tmp_path / "m.nc"), str(tmp_path / "p.tif"), "--match-bands", "position"]) == 0
    expected = cube.assign_coords(band=["a", "b", "c", "d"]).ppa.transform(model).values
    np.testing.assert_allclose(rioxarray.open_rasterio(tmp_path / "p.tif").values, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())
    assert main(["transform", str(tmp_path / "vars.nc"), str(tmp_path / "m.nc"), str(tmp_path / "q.tif"), "--bands", "a", "b"]) == 2


def test_dataset_variables_with_their_dimensions_in_another_order_are_features(landsat):
    """Variables over the same dims in another order (one transposed) were refused as not sharing their dimensions."""
    ds = landsat.isel(band=slice(0, 4)).drop_vars("wavelength").to_dataset(dim="band")
    transposed = ds.assign(B2=ds["B2"].transpose("x", "y"))
    model = ds.ppa.fit(n_samples=3000, random_state=0)
    np.testing.assert_array_equal(transposed.ppa.transform(model).values, ds.ppa.transform(model).values)
    np.testing.assert_array_equal(transposed.ppa.fit(n_samples=3000, random_state=0).components_, model.components_)


def test_features_matched_by_position_only_where_one_side_has_labels_warn(curved):
    """A cube without band labels on a model fitted with them (or labelled bands on a model fitted without) was taken
    by position, silently, as scikit-learn warns of a table without the fitted feature names; a model fitted on a
    DataFrame matches a cube's labels to its columns (a cube of its columns in another order went by position)."""
    import pandas as pd

    cube = xr.DataArray(curved.T.reshape(4, 25, -1), dims=("band", "y", "x"), coords={"band": ["a", "b", "c", "d"]})
    model = cube.ppa.fit(degree=2, configuration="fixed", n_samples=1000, random_state=0)
    unlabelled = cube.drop_vars("band")
    for call in (lambda c: c.ppa.transform(model), lambda c: c.ppa.fill(model), lambda c: c.ppa.reconstruct(model, 1)):
        with pytest.warns(UserWarning, match=r"no labels along 'band'.*assign_coords\(band=model.feature_labels_\)"):
            call(unlabelled)
    with pytest.warns(UserWarning, match="fitted without labels"):
        cube.ppa.transform(unlabelled.ppa.fit(degree=2, configuration="fixed", n_samples=1000, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cube.ppa.transform(model)  # both labelled: matched by label, no warning
    table = ppa_xr.PPA(degree=2, configuration="fixed").fit(pd.DataFrame(curved, columns=["a", "b", "c", "d"]))
    assert list(table.feature_labels_) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(cube.isel(band=[3, 1, 0, 2]).ppa.transform(table).values, cube.ppa.transform(table).values)
