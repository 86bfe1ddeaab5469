"""Rasters as users bring them: any byte order, copies in another precision, GCP georeferencing, internal masks and
alpha bands, bands at several resolutions, results written straight with rioxarray, files that are not what they say."""

import warnings

import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr

import ppa_xr
from ppa_xr.core.keys import row_digest, same_row
from ppa_xr.datasets import open_landsat8_sample


@pytest.fixture(scope="module")
def fractional():
    """The bundled scene as float64 values near 1e6 with fractions (float32 cannot hold them), and a model of it."""
    cube = open_landsat8_sample().drop_vars("wavelength").astype("float64") / 3 + 1e6
    return cube, cube.ppa.fit(n_samples=3000, random_state=0, degree=2)


def test_big_endian_cubes_compute_in_their_own_precision(tmp_path, fractional):
    cube, model = fractional
    swapped = cube.astype(">f8")
    assert ppa_xr.cube.inputs.float_dtype(np.dtype(">f4")) == np.float32
    assert ppa_xr.cube.inputs.float_dtype(np.dtype(">f8")) == np.float64
    assert ppa_xr.cube.inputs.float_dtype(np.dtype("<u2")) == np.float32
    scores = swapped.ppa.transform(model)
    assert scores.dtype == np.float64
    np.testing.assert_array_equal(scores.values, cube.ppa.transform(model).values)
    back = scores.astype(">f8").ppa.inverse_transform(model)
    assert back.dtype == np.float64 and float(abs(back - cube).max()) < 1e-6  # 0.156 when computed in float32
    error = swapped.ppa.reconstruction_error(model, 2)
    assert error.dtype == np.float64
    np.testing.assert_array_equal(error.values, cube.ppa.reconstruction_error(model, 2).values)
    assert swapped.ppa.reconstruct(model, 9).dtype == np.float64
    np.testing.assert_array_equal(swapped.ppa.evaluate(model).relative_error.values, cube.ppa.evaluate(model).relative_error.values)
    assert swapped.ppa.fit(n_samples=3000, random_state=0, degree=2).params_.mean.tolist() == model.params_.mean.tolist()
    ppa_xr.write_cube(scores, tmp_path / "c.nc")
    ppa_xr.write_cube(scores, tmp_path / "c.tif")
    with xr.open_dataset(tmp_path / "c.nc") as written, rasterio.open(tmp_path / "c.tif") as tif:
        np.testing.assert_array_equal(written[scores.name].values, scores.values)
        assert tif.dtypes[0] == "float64"
        np.testing.assert_array_equal(tif.read(), scores.values)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_evaluate_on_a_copy_of_the_fitting_scene_in_another_precision_holds_the_fitting_pixels_out(fractional, seed):
    cube, _ = fractional
    model = cube.ppa.fit(n_samples=3000, random_state=seed, degree=2)
    outside = cube.sizes["x"] * cube.sizes["y"] - model.sample_.size
    for copy in (cube, cube.astype("float32"), cube.astype(">f8"), cube.astype(">f4")):
        assert copy.ppa.evaluate(model, n_samples=None).attrs["n_pixels"] == outside, copy.dtype
    other = cube + 1  # another scene on the same grid: every pixel is held out
    assert other.ppa.evaluate(model, n_samples=None).attrs["n_pixels"] == cube.sizes["x"] * cube.sizes["y"]


def test_fitting_pixel_fingerprint_ignores_precision_and_byte_order_and_reads_older_records():
    values = np.array([1e6 + 1 / 3, 2.5, -7.25])
    digest = row_digest(values)
    assert row_digest(values.astype(np.float32)) == row_digest(values.astype(">f8")) == digest
    assert row_digest(values + 1e-3) != digest
    legacy = __import__("hashlib").sha256(values.astype("<f8").tobytes()).hexdigest()[:32]  # how earlier versions recorded it
    assert same_row(values, legacy) and same_row(values.astype(">f8"), legacy) and not same_row(values + 1e-3, legacy)


def gcp_scene(path, cube):
    """``cube`` written as a GeoTIFF georeferenced by four ground control points (no geotransform), as
    satellite level-1 products are; returns the GCPs."""
    from rasterio.control import GroundControlPoint

    n = cube.sizes["x"] - 1
    gcps = [GroundControlPoint(0, 0, 500000, 4000000), GroundControlPoint(0, n, 509600, 4000300),
            GroundControlPoint(n, 0, 500300, 3990400), GroundControlPoint(n, n, 509900, 3990700)]
    profile = dict(driver="GTiff", width=cube.sizes["x"], height=cube.sizes["y"], count=cube.sizes["band"], dtype="float32")
    with rasterio.open(path, "w", gcps=gcps, crs=rasterio.crs.CRS.from_epsg(32633), **profile) as dst:
        dst.write(cube.values.astype("float32"))
    return gcps


def assert_placed_by(path, gcps):
    with rasterio.open(path) as src:
        written, crs = src.gcps
        assert [(p.row, p.col, p.x, p.y) for p in written] == [(p.row, p.col, p.x, p.y) for p in gcps], path
        assert crs.to_epsg() == 32633 and src.transform.is_identity  # placed by its GCPs, not by an identity transform


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")  # rioxarray's own to_raster of a GCP raster
def test_ground_control_points_travel_to_every_output(tmp_path, landsat):
    from ppa_xr.cli import main

    gcps = gcp_scene(tmp_path / "scene.tif", landsat.drop_vars("wavelength"))
    scene = rioxarray.open_rasterio(tmp_path / "scene.tif", chunks={"x": 160, "y": 160})
    model = scene.ppa.fit(n_samples=3000, random_state=0, degree=2)
    scores = scene.ppa.transform(model, 3)
    assert scores.rio.get_gcps() is not None
    for result, name in ((scores, "c.tif"), (scores.ppa.inverse_transform(model), "back.tif"),
                         (scene.ppa.reconstruction_error(model, 2), "e.tif"), (scene.ppa.reconstruct(model, 2), "r.tif")):
        ppa_xr.write_cube(result, tmp_path / name)
        assert_placed_by(tmp_path / name, gcps)
    scores.rio.to_raster(tmp_path / "plain.tif")
    assert_placed_by(tmp_path / "plain.tif", gcps)
    ppa_xr.write_cube(scores, tmp_path / "c.nc")
    with xr.open_dataset(tmp_path / "c.nc", decode_coords="all") as nc:
        assert [(p.x, p.y) for p in nc[scores.name].rio.get_gcps()] == [(p.x, p.y) for p in gcps]
    model.save(tmp_path / "m.nc")
    assert main(["transform", str(tmp_path / "scene.tif"), str(tmp_path / "m.nc"), str(tmp_path / "cli.tif"), "--n-components", "3"]) == 0
    assert main(["inverse", str(tmp_path / "cli.tif"), str(tmp_path / "m.nc"), str(tmp_path / "cli_back.tif")]) == 0
    for name in ("cli.tif", "cli_back.tif"):
        assert_placed_by(tmp_path / name, gcps)


def test_selected_components_are_never_described_as_others(tmp_path, landsat):
    """A per-band long_name tuple does not follow a selection: rioxarray alone would describe bands 3, 2, 1 as 1, 2, 3
    (and refuse a shorter selection); ppa_xr.to_raster numbers them by their component labels."""
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    scores = landsat.chunk({"x": 160, "y": 160}).ppa.transform(model, n_components=3)
    scores.rio.to_raster(tmp_path / "c.tif")
    with rasterio.open(tmp_path / "c.tif") as src:
        assert src.descriptions == ("PPA component",) * 3
    for selection, name in ((scores.sel(component=[3, 2, 1]), "r"), (scores.isel(component=[2, 0]), "s")):
        selection.rio.to_raster(tmp_path / f"{name}_rio.tif")
        with rasterio.open(tmp_path / f"{name}_rio.tif") as src:
            assert set(src.descriptions) == {"PPA component"}
        ppa_xr.to_raster(selection, tmp_path / f"{name}.tif")
        with rasterio.open(tmp_path / f"{name}.tif") as src:
            assert src.descriptions == tuple(f"PPA component {k}" for k in selection.component.values)
    reopened = rioxarray.open_rasterio(tmp_path / "c.tif").rename(band="component")
    np.testing.assert_allclose(reopened.ppa.inverse_transform(model).values, scores.ppa.inverse_transform(model).values, rtol=1e-6)


def test_a_text_file_named_nc_is_refused_by_name(tmp_path, capsys):
    from ppa_xr.cli import main

    (tmp_path / "table.nc").write_text("x,y,band\n1,2,3\n")
    (tmp_path / "empty.nc").write_bytes(b"")
    with pytest.raises(ValueError, match=r"table.nc is not a netCDF file: it begins with b'x,y,band'"):
        ppa_xr.open_cube([tmp_path / "table.nc"])
    with pytest.raises(ValueError, match=r"empty.nc is not a netCDF file: it is empty"):
        ppa_xr.open_cube([tmp_path / "empty.nc"])
    assert main(["fit", str(tmp_path / "table.nc"), str(tmp_path / "m.nc")]) == 2
    assert "table.nc is not a netCDF file" in capsys.readouterr().err
    xr.Dataset({"v": (("band", "y", "x"), np.ones((2, 3, 4)))}).to_netcdf(tmp_path / "classic.nc", engine="scipy")
    assert ppa_xr.open_cube([tmp_path / "classic.nc"]).shape == (2, 3, 4)  # netCDF-3 still opens (its one variable)


def masked_scenes(directory):
    """One scene written twice: with an internal mask, and with an alpha band; a quarter of it masked, its fill
    values 0. Returns the two paths and the valid pixels."""
    from rasterio.enums import ColorInterp
    from rasterio.transform import from_origin

    rng = np.random.default_rng(0)
    t = rng.uniform(-2, 2, (64, 64))
    data = np.stack([t, t**2, np.sin(2 * t)]) * 40 + 100 + rng.normal(0, 1, (3, 64, 64))
    valid = np.ones((64, 64), bool)
    valid[:, :16] = False
    data = np.where(valid, data, 0).astype("uint8")
    profile = dict(driver="GTiff", width=64, height=64, dtype="uint8", crs="EPSG:32633", transform=from_origin(500000, 4000000, 30, 30))
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(directory / "mask.tif", "w", count=3, **profile) as dst:
        dst.write(data)
        dst.write_mask(valid.astype("uint8") * 255)
    with rasterio.open(directory / "alpha.tif", "w", count=4, photometric="RGB", alpha="YES", **profile) as dst:
        dst.write(np.concatenate([data, valid[None].astype("uint8") * 255]))
        dst.descriptions = ("red", "green", "blue", "alpha")
    with rasterio.open(directory / "alpha.tif") as src:
        assert src.colorinterp[3] == ColorInterp.alpha
    return directory / "mask.tif", directory / "alpha.tif", valid


def test_internal_masks_and_alpha_bands_mark_invalid_pixels(tmp_path):
    from ppa_xr.cli import main

    *paths, valid = masked_scenes(tmp_path)
    for path in paths:
        cube = ppa_xr.open_cube([path], chunks=32)
        assert cube.sizes["band"] == 3 and cube.chunks is not None, path  # the alpha band is no feature
        np.testing.assert_array_equal(np.isfinite(cube.values).all(axis=0), valid)
        with pytest.warns(UserWarning, match="only 3072 valid pixels"):  # no masked pixel fitted as data
            assert cube.ppa.fit(n_samples=4000, random_state=0, degree=2).sample_.size == valid.sum()
        out = tmp_path / f"c_{path.stem}.tif"
        assert main(["fit", str(path), str(tmp_path / f"{path.stem}.nc"), "--n-samples", "3000"]) == 0
        assert ppa_xr.load_model(tmp_path / f"{path.stem}.nc").n_features_in_ == 3
        assert main(["transform", str(path), str(tmp_path / f"{path.stem}.nc"), str(out), "--n-components", "2"]) == 0
        with rasterio.open(out) as src:
            np.testing.assert_array_equal(np.isfinite(src.read()).all(axis=0), valid)
    assert list(ppa_xr.open_cube([paths[1]]).attrs["long_name"]) == ["red", "green", "blue"]


def bands_at_three_resolutions(directory, landsat):
    """B2 and B3 at 30 m, B5 at 60 m and B1 at 120 m (means of 2 x 2 and 4 x 4 pixels), one file each, B1 first
    (as Sentinel-2's 60 m B01 sorts first); B5's left quarter masked by an internal mask."""
    cube = landsat.drop_vars("wavelength")
    cube.sel(band=["B1"]).coarsen(x=4, y=4).mean().rio.to_raster(directory / "S2_B01.tif")
    for band in ("B2", "B3"):
        cube.sel(band=[band]).rio.to_raster(directory / f"S2_B0{band[1]}.tif")
    b5 = cube.sel(band=["B5"]).coarsen(x=2, y=2).mean().astype("float32")
    valid = np.ones((160, 160), bool)
    valid[:, :40] = False
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        b5.rio.write_nodata(None).rio.to_raster(directory / "S2_B05.tif")
        with rasterio.open(directory / "S2_B05.tif", "r+") as dst:
            dst.write_mask(valid.astype("uint8") * 255)
    return [directory / f"S2_B0{i}.tif" for i in (1, 2, 3, 5)], b5.values[0], valid


def test_bands_at_several_resolutions_are_named_and_stacked_on_the_grid_asked_for(tmp_path, landsat):
    paths, b5, valid = bands_at_three_resolutions(tmp_path, landsat)
    with pytest.raises(ValueError) as refused:
        ppa_xr.open_band_stack(paths)
    message = str(refused.value)
    assert "S2_B02.tif is not on the grid of" in message and "S2_B01.tif, the first file, which sets the grid" in message
    assert "S2_B01.tif: pixels of 120 x 120, 80 x 80 px" in message and "S2_B02.tif: pixels of 30 x 30, 320 x 320 px" in message
    assert "S2_B01.tif 120, S2_B02.tif 30, S2_B03.tif 30, S2_B05.tif 60" in message and "resolution=R" in message
    at60 = ppa_xr.open_band_stack(paths, resolution=60, chunks={"x": 64, "y": 64})
    assert at60.shape == (4, 160, 160) and at60.chunks is not None and at60.rio.resolution() == (60, -60)
    np.testing.assert_array_equal(at60.sel(band="B05").values, np.where(valid, b5, np.nan))  # its own grid, its mask
    np.testing.assert_allclose(at60.sel(band="B02").values, landsat.sel(band="B2").coarsen(x=2, y=2).mean().values, rtol=1e-6)
    at30 = ppa_xr.open_band_stack(paths, resolution=30, chunks={"x": 64, "y": 64})
    assert at30.shape == (4, 320, 320) and at30.rio.transform() == landsat.rio.transform()
    twice = np.repeat(np.repeat(np.where(valid, b5, np.nan), 2, 0), 2, 1)  # each 60 m pixel over its four 30 m pixels
    np.testing.assert_array_equal(at30.sel(band="B05").values, twice)
    model = at30.ppa.fit(n_samples=3000, random_state=0, degree=2)
    assert model.n_features_in_ == 4 and np.isnan(at30.ppa.transform(model).values[:, :, :80]).all()
    with pytest.raises(ValueError, match=r"no file has pixels of 45; their resolutions: S2_B01.tif 120"):
        ppa_xr.open_band_stack(paths, resolution=45)
    with pytest.raises(ValueError, match="resampling='avg' is not a rasterio resampling method"):
        ppa_xr.open_band_stack(paths, resolution=30, resampling="avg")


def test_a_band_of_a_smaller_extent_is_nan_outside_it_not_zero(tmp_path, landsat):
    cube = landsat.drop_vars("wavelength").astype("float32").rio.write_nodata(None)
    cube.sel(band=["B2"]).rio.to_raster(tmp_path / "L_B2.tif")
    cube.sel(band=["B3"]).isel(x=slice(0, 100)).rio.to_raster(tmp_path / "L_B3.tif")  # no nodata declared
    stack = ppa_xr.open_band_stack([tmp_path / "L_B2.tif", tmp_path / "L_B3.tif"], resolution=30)
    b3 = stack.sel(band="B3").values
    assert np.isnan(b3[:, 100:]).all() and np.array_equal(b3[:, :100], cube.sel(band="B3").values[:, :100])


def _packed_scene(tmp_path, scales, offsets):
    """Six bands of the bundled scene as a uint16 GeoTIFF declaring a scale and offset per band (Landsat Collection 2
    surface reflectance: DN * 2.75e-5 - 0.2), nodata 0, band descriptions B1..B6."""
    raw = open_landsat8_sample().isel(band=slice(0, 6)).drop_vars("wavelength")
    raw.attrs = {}
    raw.rio.write_nodata(0).rio.to_raster(tmp_path / "packed.tif")
    with rasterio.open(tmp_path / "packed.tif", "r+") as dst:
        dst.scales, dst.offsets = scales, offsets
        dst.descriptions = tuple(str(b) for b in raw.band.values)
    return tmp_path / "packed.tif"


def test_packed_values_are_unpacked_however_the_file_is_opened(tmp_path):
    """A model fitted on the stored numbers of a packed file (rioxarray without mask_and_scale, as the CLI opens it, or
    netCDF with mask_and_scale=False) is the model of its values: applied to the file opened with mask_and_scale=True it
    gave components 4e4 times too large, silently."""
    path = _packed_scene(tmp_path, (2.75e-5,) * 6, (-0.2,) * 6)
    stored, values = rioxarray.open_rasterio(path), rioxarray.open_rasterio(path, mask_and_scale=True)
    assert stored.attrs["scale_factor"] == 2.75e-5 and "scale_factor" not in values.attrs
    on_stored, on_values = (cube.ppa.fit(n_samples=3000, random_state=0, degree=2) for cube in (stored, values))
    np.testing.assert_allclose(on_stored.params_.mean, on_values.params_.mean, rtol=1e-6)
    scores = values.ppa.transform(on_values, n_components=3).values
    assert np.nanmax(np.abs(scores)) < 2
    np.testing.assert_allclose(values.ppa.transform(on_stored, n_components=3).values, scores, atol=1e-5)
    np.testing.assert_allclose(stored.ppa.transform(on_values, n_components=3).values, scores, atol=1e-5)
    masked = rioxarray.open_rasterio(path, masked=True)  # floats still holding the stored numbers (the encoding says uint16)
    np.testing.assert_allclose(masked.ppa.transform(on_values, n_components=3).values, scores, atol=1e-5)
    manual = masked * 2.75e-5 - 0.2  # unpacked by hand: xarray keeps the attributes, drops the encoding
    with pytest.warns(UserWarning, match="taken as unpacked already"):
        np.testing.assert_allclose(manual.ppa.transform(on_values, n_components=3).values, scores, atol=1e-5)
    rebuilt = stored.ppa.reconstruct(on_stored, 6)
    assert "scale_factor" not in rebuilt.attrs and "add_offset" not in rebuilt.attrs  # its values are unpacked
    np.testing.assert_allclose(rebuilt.values, values.values, atol=1e-4, equal_nan=True)
    ds = values.rename(band="b").assign_coords(b=np.arange(6)).drop_vars("spatial_ref").to_dataset(name="refl")
    ds["refl"].encoding = {"dtype": "uint16", "scale_factor": 2.75e-5, "add_offset": -0.2, "_FillValue": 0}
    ds.to_netcdf(tmp_path / "cf.nc")
    with xr.open_dataset(tmp_path / "cf.nc") as decoded, xr.open_dataset(tmp_path / "cf.nc", mask_and_scale=False) as packed:
        model = decoded["refl"].ppa.fit(dim="b", n_samples=3000, random_state=0, degree=2)
        np.testing.assert_allclose(packed["refl"].ppa.transform(model, n_components=3).values,
                                   decoded["refl"].ppa.transform(model, n_components=3).values, atol=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stored_numbers_without_their_scale_on_a_model_of_the_values_are_named(tmp_path, seed):
    """A packed file's stored numbers whose scale_factor was dropped (read with rasterio, rebuilt from .values) on a model of
    its reflectances: components 4e4 times too large, evaluate's curves near 100% and the shift check's "differs from the
    fitting sample", nothing saying why. Every comparison (evaluate, the shift check, the report, PPA.evaluate) says how far
    the values lie from the model, in its spread, and what to check; the fitting scene's lie at about 1."""
    path = _packed_scene(tmp_path, (2.75e-5,) * 6, (-0.2,) * 6)
    values = rioxarray.open_rasterio(path, mask_and_scale=True)
    model = values.ppa.fit(n_samples=3000, random_state=seed, degree=2)
    stored = rioxarray.open_rasterio(path, masked=True).assign_attrs(scale_factor=1.0, add_offset=0.0)  # the scale lost
    for compare in (lambda cube: cube.ppa.evaluate(model), lambda cube: cube.ppa.transform(model, n_components=2, check=True),
                    lambda cube: model.evaluate(cube.ppa.sample(n_samples=500, random_state=seed))):
        with pytest.warns(ppa_xr.ShiftWarning, match=r"lie [0-9.e+]+ times as far from the model's mean as its fitting sample's "
                                                     r"spread.*other units.*cube \* scale_factor \+ add_offset"):
            compare(stored)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ppa_xr.ShiftWarning)
        values.ppa.evaluate(model)
    held_out = ppa_xr.core.errors.compare_errors(model.params_, values.ppa.sample(n_samples=2000, random_state=seed + 10))
    assert 0.7 < held_out.spread < 1.4
    with pytest.warns(ppa_xr.ShiftWarning):
        assert ppa_xr.core.errors.compare_errors(model.params_, stored.ppa.sample(n_samples=500)).spread > 1e4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_maps_name_values_in_other_units_chunk_by_chunk(tmp_path, seed):
    """The same stored numbers, their scale lost, through the maps that compare nothing: ``transform`` without its
    check, ``fill``, ``reconstruct``, ``reconstruction_error``, ``score_samples`` (lazily, on dask's threads: each chunk
    checks a few of its pixels) and the estimator's ``transform``, ``fill``, ``reconstruct``, ``score_samples``. They gave
    components 4e4 times too large and fills in reflectance beside stored numbers, silently; the fitting scene itself
    passes without a warning."""
    path = _packed_scene(tmp_path, (2.75e-5,) * 6, (-0.2,) * 6)
    values = rioxarray.open_rasterio(path, mask_and_scale=True, chunks={"x": 80, "y": 80})
    model = values.ppa.fit(n_samples=3000, random_state=seed, degree=2)
    stored = rioxarray.open_rasterio(path, masked=True, chunks={"x": 80, "y": 80}).assign_attrs(scale_factor=1.0, add_offset=0.0)
    table = stored.ppa.sample(n_samples=500, random_state=seed)
    crop = {"x": slice(0, 30), "y": slice(0, 30)}  # 900 pixels: too few for the shift check, which then compares nothing
    small = values.isel(crop).ppa.fit(n_samples=400, random_state=seed, degree=2)
    with pytest.warns(ppa_xr.ShiftWarning, match=r"lie more than 30 times as far"):
        stored.isel(crop).ppa.transform(small, n_components=3, check=True).compute()
    maps = {"transform": lambda cube: cube.ppa.transform(model, n_components=3).compute(),
            "fill": lambda cube: cube.where(cube.band != cube.band[2]).ppa.fill(model).compute(),
            "reconstruct": lambda cube: cube.ppa.reconstruct(model, 3).compute(),
            "reconstruction_error": lambda cube: cube.ppa.reconstruction_error(model, 3).compute(),
            "score_samples": lambda cube: cube.ppa.score_samples(model).compute()}
    for name, run in maps.items():
        with pytest.warns(ppa_xr.ShiftWarning, match=r"lie more than 30 times as far from the model's mean as its fitting "
                                                     r"sample's spread.*other units.*cube \* scale_factor \+ add_offset"):
            run(stored)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ppa_xr.ShiftWarning)
            run(values)
    for run in (model.transform, lambda X: model.fill(np.where(np.arange(6) == 2, np.nan, X)), lambda X: model.reconstruct(X, 3),
                model.score_samples):
        with pytest.warns(ppa_xr.ShiftWarning, match="other units"):
            run(table)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ppa_xr.ShiftWarning)
            run(values.ppa.sample(n_samples=500, random_state=seed + 10))


def test_the_commands_that_compare_nothing_name_values_in_other_units(tmp_path, capsys):
    """``ppa-xr fill`` and ``ppa-xr inverse`` wrote a fill of stored numbers on a model of reflectances, and components
    x 1,000 inverted as given, without a word; each says so once (one line, not one per chunk)."""
    from ppa_xr.cli import main

    path = _packed_scene(tmp_path, (2.75e-5,) * 6, (-0.2,) * 6)
    values = rioxarray.open_rasterio(path, mask_and_scale=True)
    model = values.ppa.fit(n_samples=3000, random_state=0, degree=2)
    model.save(tmp_path / "m.nc")
    stored = rioxarray.open_rasterio(path, masked=True)
    stored.attrs, stored.encoding = {}, {}
    stored.rio.write_nodata(np.nan, encoded=False).rio.to_raster(tmp_path / "stored.tif")  # the scale lost
    ppa_xr.to_raster((values.ppa.transform(model, 3) * 1000).fillna(-32768), tmp_path / "scores.tif", dtype="int16", nodata=-32768)
    capsys.readouterr()
    for command, what in ((["fill", "stored.tif", "m.nc", "filled.tif", "--chunks", "40", "--match-bands", "position"], "values"),
                          (["inverse", "scores.tif", "m.nc", "back.tif", "--chunks", "40"], "components")):
        assert main([str(tmp_path / a) if a.endswith((".tif", ".nc")) else a for a in command]) == 0
        err = capsys.readouterr().err
        assert err.count(f"ShiftWarning: these {what} lie more than") == 1, err


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_components_stored_scaled_are_named_on_their_way_back(tmp_path, seed):
    """Components written as integers x 1,000 (a GeoTIFF of int16) and read back as stored went through
    ``inverse_transform`` as components 1,000 times larger, far from the cube, silently; the cube's and the estimator's
    inverse say so, a model's own components (whitened or not) pass."""
    path = _packed_scene(tmp_path, (2.75e-5,) * 6, (-0.2,) * 6)
    values = rioxarray.open_rasterio(path, mask_and_scale=True, chunks={"x": 80, "y": 80})
    for whiten in (False, True):
        model = values.ppa.fit(n_samples=3000, random_state=seed, degree=2, whiten=whiten)
        scores = values.ppa.transform(model, n_components=3)
        ppa_xr.to_raster((scores * 1000).fillna(-32768), tmp_path / f"scores{whiten}.tif", dtype="int16", nodata=-32768)
        stored = rioxarray.open_rasterio(tmp_path / f"scores{whiten}.tif", masked=True, chunks={"x": 80, "y": 80})
        table = scores.stack(pixel=("y", "x")).transpose("pixel", "component").values
        for back in (lambda: stored.ppa.inverse_transform(model, dim="band").compute(), lambda: model.inverse_transform(table * 1000)):
            with pytest.warns(ppa_xr.ShiftWarning, match=r"these components lie more than 30 times as far.*scores / 1000"):
                back()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ppa_xr.ShiftWarning)
            scores.ppa.inverse_transform(model).compute()
            model.inverse_transform(table)
            (stored / 1000).ppa.inverse_transform(model, dim="band").compute()


@pytest.mark.parametrize("seed", [0, 1])
def test_a_model_is_float64_whatever_precision_it_was_fitted_on(tmp_path, seed):
    """The raster guide's rule: a float32 cube and its float64 copy fit the same parameters bit for bit, the saved model
    loads bit for bit, and maps a float64 cube as the float64 fit does (a float32 cube in float32)."""
    cube = open_landsat8_sample().isel(x=slice(0, 160), y=slice(0, 160)).drop_vars("wavelength")
    single = cube.astype("float32").where(cube > 0)
    double = single.astype("float64")
    m32, m64 = (c.ppa.fit(n_samples=3000, random_state=seed, degree=2) for c in (single, double))
    for name, array in m64.params_.arrays().items():
        np.testing.assert_array_equal(m32.params_.arrays()[name], array, err_msg=name)
    loaded = ppa_xr.load_model(m32.save(tmp_path / "m32.nc"))
    np.testing.assert_array_equal(double.ppa.transform(loaded, 3).values, double.ppa.transform(m64, 3).values)
    scores = single.ppa.transform(loaded, 3)
    assert scores.dtype == np.float32
    np.testing.assert_array_equal(scores.values, single.ppa.transform(m32, 3).values)


def test_a_scale_per_band_is_applied_or_refused(tmp_path):
    path = _packed_scene(tmp_path, (1e-4, 2e-4, 1e-4, 1e-4, 1e-4, 1e-4), (0.0,) * 6)
    with pytest.raises(ValueError, match="mask_and_scale=True"):
        rioxarray.open_rasterio(path).ppa.fit(n_samples=3000, random_state=0)
    values = rioxarray.open_rasterio(path, mask_and_scale=True)
    for band in range(6):  # single-band files of unlike scales: each unpacked with its own, as rioxarray would
        layer = values.isel(band=[band]).copy()
        layer.attrs, layer.encoding = {}, {}
        layer.rio.write_nodata(np.nan, encoded=False).rio.to_raster(tmp_path / f"b{band}.tif")
    stacked = ppa_xr.open_band_stack([tmp_path / f"b{band}.tif" for band in range(6)])
    for band in range(6):
        layer = rioxarray.open_rasterio(path).isel(band=[band])
        layer.attrs = {}
        layer.rio.write_nodata(0).rio.to_raster(tmp_path / f"p{band}.tif")
        with rasterio.open(tmp_path / f"p{band}.tif", "r+") as dst:
            dst.scales, dst.offsets = ((1e-4, 2e-4)[band == 1],), (0.0,)
    packed = ppa_xr.open_band_stack([tmp_path / f"p{band}.tif" for band in range(6)], bands=[f"b{band}" for band in range(6)])
    np.testing.assert_allclose(packed.values, stacked.values, rtol=1e-6)
    model = stacked.ppa.fit(n_samples=3000, random_state=0, degree=2)
    np.testing.assert_allclose(packed.ppa.transform(model).values, stacked.ppa.transform(model).values, atol=1e-6)


def test_a_geotiff_of_components_in_another_order_is_inverted_as_what_it_holds(tmp_path, landsat):
    """rioxarray labels a file's bands 1..n: components 2, 1, 3 written by ppa_xr.to_raster were inverted as 1, 2, 3
    (by the CLI and by open_rasterio(...).rename(band="component")), off by up to 1.7e4, silently."""
    from ppa_xr.cli import main

    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    scores = landsat.ppa.transform(model, n_components=3)
    expected = scores.ppa.inverse_transform(model).values
    ppa_xr.to_raster(scores.sel(component=[2, 1, 3]), tmp_path / "c.tif")
    read = rioxarray.open_rasterio(tmp_path / "c.tif").rename(band="component")
    np.testing.assert_allclose(read.ppa.inverse_transform(model).values, expected, rtol=1e-6)
    model.save(tmp_path / "m.nc")
    assert main(["inverse", str(tmp_path / "c.tif"), str(tmp_path / "m.nc"), str(tmp_path / "back.tif")]) == 0
    np.testing.assert_allclose(rioxarray.open_rasterio(tmp_path / "back.tif").values, expected, rtol=1e-6)
    ppa_xr.to_raster(scores.sel(component=[3, 1]), tmp_path / "gap.tif")
    with pytest.raises(ValueError, match=r"labelled 1..2 along 'component', got \[3, 1\]"):
        rioxarray.open_rasterio(tmp_path / "gap.tif").rename(band="component").ppa.inverse_transform(model)


def test_a_boolean_cube_with_a_kept_nodata_is_refused(landsat):
    """xarray keeps attributes through a comparison: cube > 10000 declared the scene's nodata 0, so every False was
    missing (NaN in transforms, and a fit that found no valid pixel)."""
    flags = landsat > 10000
    assert flags.rio.nodata is not None  # kept from the uint16 scene
    with pytest.raises(ValueError, match=r"boolean cube holds data in both its values.*del cube.attrs\['_FillValue'\]"):
        flags.ppa.fit(n_samples=3000, random_state=0, degree=1)
    del flags.attrs["_FillValue"]
    model = flags.ppa.fit(n_samples=3000, random_state=0, degree=1)
    assert np.isfinite(flags.ppa.transform(model, n_components=2).values).all()


def test_a_cf_missing_value_beside_the_fill_value_marks_missing_values(tmp_path):
    """CF lets a variable declare a _FillValue and another missing_value; opened with mask_and_scale=False, only the
    first was masked, and the -9999 rows went into the outputs as values."""
    import h5netcdf

    cube = open_landsat8_sample().isel(band=slice(0, 4)).drop_vars(["wavelength", "spatial_ref"]).astype("int16")
    values = cube.values.copy()
    values[0, :10], values[1, 10:20] = -9999, -32768
    ds = cube.copy(data=values).rename(band="b").assign_coords(b=np.arange(4)).to_dataset(name="t")
    ds["t"].attrs, ds["t"].encoding = {}, {"_FillValue": np.int16(-32768)}
    ds.to_netcdf(tmp_path / "mv.nc", engine="h5netcdf")
    with h5netcdf.File(tmp_path / "mv.nc", "a") as nc:  # xarray refuses to write the two different values itself
        nc.variables["t"].attrs["missing_value"] = np.int16(-9999)
    with xr.open_dataset(tmp_path / "mv.nc")["t"] as decoded, xr.open_dataset(tmp_path / "mv.nc", mask_and_scale=False)["t"] as stored:
        assert stored.attrs["missing_value"] == -9999 and stored.attrs["_FillValue"] == -32768
        model = decoded.ppa.fit(dim="b", n_samples=3000, random_state=0, degree=2)
        expected = decoded.ppa.transform(model, n_components=2).values
        assert np.isnan(expected[:, :20]).all() and np.isfinite(expected[:, 20:]).all()
        np.testing.assert_array_equal(stored.ppa.transform(model, n_components=2).values, expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_unsigned_bytes_held_signed_are_read_unsigned_as_declared(tmp_path, seed):
    """netCDF keeps unsigned bytes as int8 with ``_Unsigned="true"``; opened with mask_and_scale=False, a byte of 200 was
    read as -56: a model of the decoded file gave components up to 376 off on the stored one, silently. The fill byte
    (-1, 255 unsigned) marks missing values either way, and the outputs carry no _Unsigned."""
    values = np.random.default_rng(seed).integers(100, 250, size=(4, 40, 40)).astype("uint8")
    values[:, 0, 0] = 255
    stored = xr.DataArray(values.view("int8"), dims=("b", "y", "x"), coords={"b": list("abcd")}, attrs={"_Unsigned": "true"})
    stored.encoding = {"_FillValue": np.int8(-1)}
    stored.to_dataset(name="refl").to_netcdf(tmp_path / "u.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "u.nc")["refl"] as decoded, xr.open_dataset(tmp_path / "u.nc", mask_and_scale=False)["refl"] as raw:
        assert raw.dtype == np.int8 and raw.attrs["_Unsigned"] == "true" and decoded.dtype.kind == "f"
        model = decoded.ppa.fit(dim="b", n_samples=1000, random_state=seed, degree=1)
        np.testing.assert_allclose(raw.ppa.fit(dim="b", n_samples=1000, random_state=seed, degree=1).params_.mean, model.params_.mean)
        expected = decoded.ppa.transform(model).values
        assert np.isnan(expected[:, 0, 0]).all() and np.isfinite(expected[:, 1:]).all()
        np.testing.assert_allclose(raw.ppa.transform(model).values, expected, atol=1e-3)
        assert "_Unsigned" not in raw.ppa.fill(model).attrs
    flipped = xr.DataArray(values.view("int8").view("uint8"), dims=("b", "y", "x"), attrs={"_Unsigned": "false"})  # the reverse
    np.testing.assert_array_equal(ppa_xr.cube.inputs.feature_array(flipped, "b").values, values.view("int8"))


def test_the_largest_uint64_as_nodata_marks_missing_values(tmp_path):
    """2^64 - 1, a uint64 file's usual fill value, is 2^64 as a float: it was refused as "a value uint64 cannot hold"."""
    values = np.random.default_rng(0).integers(1000, 5000, size=(3, 30, 30)).astype("uint64")
    values[:, :5, :5] = np.iinfo("uint64").max
    cube = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": ["a", "b", "c"]}, name="counts")
    cube.encoding = {"_FillValue": np.iinfo("uint64").max}
    cube.to_dataset().to_netcdf(tmp_path / "u64.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "u64.nc", mask_and_scale=False)["counts"] as stored:
        assert stored.dtype == np.uint64 and stored.attrs["_FillValue"] == np.iinfo("uint64").max
        features = ppa_xr.cube.inputs.feature_array(stored, "band").values
    assert np.isnan(features[:, :5, :5]).all() and np.isfinite(features).sum() == 3 * (900 - 25)


def test_results_of_a_cube_with_its_bands_last_are_written_as_geotiffs(tmp_path, landsat):
    """A netCDF cube stored (y, x, band) gives results with y and x first: their GeoTIFF was refused by rioxarray
    ("Invalid dimension order") after they were computed. Written band first, they read back as the band-first cube's."""
    cube = landsat.isel(x=slice(0, 48), y=slice(0, 48))
    model = cube.ppa.fit(n_samples=1000, random_state=0, degree=2)
    last = cube.transpose("y", "x", "band")
    for name, result, expected in (("f.tif", last.ppa.fill(model), cube.ppa.fill(model)),
                                   ("c.tif", last.ppa.transform(model, n_components=3), cube.ppa.transform(model, n_components=3)),
                                   ("d.tif", last.ppa.transform(model, n_components=3).to_dataset("component").transpose("x", "y"),
                                    cube.ppa.transform(model, n_components=3))):
        ppa_xr.to_raster(result, tmp_path / name)
        with rioxarray.open_rasterio(tmp_path / name) as written:
            np.testing.assert_array_equal(written.values, expected.values)


def test_components_along_another_dimension_are_refused_with_the_fix(tmp_path, landsat):
    """A component GeoTIFF opened with rioxarray has its components along 'band': the message names the rename."""
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    scores = landsat.ppa.transform(model, n_components=3)
    ppa_xr.to_raster(scores, tmp_path / "c.tif")
    read = rioxarray.open_rasterio(tmp_path / "c.tif")
    with pytest.raises(ValueError, match=r"dims \('band', 'y', 'x'\): name their dimension: scores.rename\(band='component'\)"):
        read.ppa.inverse_transform(model)
    np.testing.assert_allclose(read.ppa.inverse_transform(model, dim="band").values, scores.ppa.inverse_transform(model).values, rtol=1e-6)
    with pytest.raises(ValueError, match=r"scores.to_dataarray\('component'\)"):
        scores.to_dataset(dim="component").ppa.inverse_transform(model)


def test_components_stored_packed_are_inverted_unpacked(tmp_path, landsat):
    """Components saved as int16 with a scale_factor (a common way to halve a file) and read back without
    mask_and_scale were inverted as the stored integers, 1000 times too large. The outputs declare their NaN in the
    encoding, so the user's own _FillValue is written (in the attributes, xarray refused it)."""
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    scores = landsat.ppa.transform(model, n_components=3)
    scale = float(abs(scores).max()) / 30_000  # int16 holds +-32767 steps
    scores.to_dataset(name="c").to_netcdf(tmp_path / "c.nc", encoding={"c": {"dtype": "int16", "scale_factor": scale, "_FillValue": -32768}})
    with xr.open_dataset(tmp_path / "c.nc", mask_and_scale=False)["c"] as stored, xr.open_dataset(tmp_path / "c.nc")["c"] as decoded:
        assert stored.dtype == np.int16 and stored.attrs["scale_factor"] == scale
        np.testing.assert_allclose(stored.ppa.inverse_transform(model).values, decoded.ppa.inverse_transform(model).values, rtol=1e-5)


@pytest.mark.parametrize("view", ["coarsen", "step", "flip"])
def test_a_resampled_cube_writes_the_transform_of_its_coordinates(tmp_path, landsat, view):
    """isel with a step, coarsen or a flip keep the file's transform cached in spatial_ref; outputs carried it, and GDAL
    read their netCDF at 30 m where the pixels are 60 m (half the scene's extent), or upside down."""
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    cube = {"coarsen": lambda: landsat.coarsen(x=2, y=2).mean(), "step": lambda: landsat.isel(x=slice(None, None, 2), y=slice(None, None, 2)),
            "flip": lambda: landsat.isel(y=slice(None, None, -1))}[view]()
    placed = cube.rio.transform(recalc=True)
    assert cube.rio.transform() != placed  # rioxarray's stale cache, the case at hand
    for out, name in ((cube.ppa.transform(model, n_components=2), "c.nc"), (cube.ppa.reconstruction_error(model, 2), "e.nc")):
        assert out.rio.transform() == placed
        ppa_xr.write_cube(out, tmp_path / name)
        with rasterio.open(tmp_path / name) as src:  # GDAL's netCDF driver
            assert src.transform == placed or src.transform == placed * rasterio.Affine.scale(1, -1) * rasterio.Affine.translation(0, -src.height)


def test_a_result_with_a_time_dimension_is_refused_as_a_geotiff_with_the_ways_out(tmp_path, landsat):
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=2)
    series = xr.concat([landsat, landsat], dim="time")
    scores = series.ppa.transform(model, n_components=2)
    with pytest.raises(ValueError, match=r"one GeoTIFF per time \(result.isel\(time=0\)\), or the whole result as .nc or .zarr"):
        ppa_xr.to_raster(scores, tmp_path / "c.tif")
    assert not list(tmp_path.iterdir())  # nothing written
    ppa_xr.to_raster(scores.isel(time=0), tmp_path / "c.tif")


def test_components_of_another_model_are_refused_by_the_inverse(tmp_path, landsat):
    """Components inverted by a model that did not make them came back far from the cube, silently; their provenance
    (ppa_xr_model, kept by netCDF and GeoTIFF tags) names the parameters that made them."""
    cube = landsat.isel(x=slice(0, 100), y=slice(0, 100))
    made, other = (cube.ppa.fit(n_samples=3000, random_state=0, degree=1, standardize=flag) for flag in (False, True))
    scores = cube.ppa.transform(made, n_components=3)
    ppa_xr.to_raster(scores, tmp_path / "c.tif")
    for given in (scores, rioxarray.open_rasterio(tmp_path / "c.tif").rename(band="component")):
        with pytest.raises(ValueError, match="made by another model"):
            given.ppa.inverse_transform(other)
        np.testing.assert_allclose(given.ppa.inverse_transform(made), cube.ppa.reconstruct(made, 3), rtol=1e-5)
    assert np.isfinite(scores.drop_attrs().ppa.inverse_transform(other).values).any()  # without provenance: as given
    whitening = cube.ppa.fit(n_samples=3000, random_state=0, degree=1, whiten=True)  # the same parameters, whitened outputs
    assert whitening.params_.digest == made.params_.digest
    with pytest.raises(ValueError, match=r"are whitened .*this model has whiten=False"):
        cube.ppa.transform(whitening, n_components=3).ppa.inverse_transform(made)
    with pytest.raises(ValueError, match=r"are not whitened .*this model has whiten=True"):
        scores.ppa.inverse_transform(whitening)


@pytest.mark.parametrize("where", ["gap", "repeat"])
def test_a_result_on_an_uneven_grid_is_refused_as_a_geotiff(tmp_path, landsat, where):
    """y with a 7 m gap mid-grid, or x with a repeated first label: rioxarray wrote the transform of the first and last
    coordinates (30.14 m or 29.39 m pixels), placing the pixels between them up to 3.4 m or a pixel off, silently."""
    cube = landsat.isel(x=slice(0, 50), y=slice(0, 50))
    if where == "gap":
        cube = cube.assign_coords(y=np.r_[cube.y.values[:25], cube.y.values[25:] - 7.0])
    else:
        cube = cube.assign_coords(x=np.r_[cube.x.values[:1], cube.x.values[:49]])
    model = cube.ppa.fit(n_samples=1000, random_state=0, degree=1)
    scores = cube.ppa.transform(model, n_components=2)
    with pytest.raises(ValueError, match="coordinates are not evenly spaced.*write it as .nc or .zarr"):
        ppa_xr.to_raster(scores, tmp_path / "c.tif")
    assert not list(tmp_path.iterdir())
    ppa_xr.write_cube(scores, tmp_path / "c.nc")
    ppa_xr.to_raster(landsat.isel(x=slice(0, 50), y=slice(0, 50)).astype("float32").assign_coords(
        y=landsat.y.values[:50].astype("float32")), tmp_path / "float32_coordinates.tif")  # their rounding: accepted


def _gappy_scores(landsat):
    """Components of the bundled scene with a strip of nodata pixels (NaN in the components)."""
    cube = landsat.where(landsat.x > landsat.x[20])
    model = landsat.ppa.fit(n_samples=3000, random_state=0, degree=1)
    return cube.ppa.transform(model, n_components=2)


def test_a_dataset_of_components_declares_its_nodata(tmp_path, landsat):
    scores = _gappy_scores(landsat)
    path = ppa_xr.to_raster(scores.to_dataset("component"), tmp_path / "ds.tif")
    with rasterio.open(path) as src:
        assert src.nodata is not None and np.isnan(src.nodata)  # was None: NaN pixels written as values
        assert np.isnan(src.read(1)).any()


def test_a_nodata_option_is_written_and_an_integer_dtype_without_one_refused(tmp_path, landsat):
    scores = _gappy_scores(landsat)
    path = ppa_xr.to_raster(scores, tmp_path / "n.tif", nodata=-9999)
    with rasterio.open(path) as src:
        values = src.read(1)
        assert src.nodata == -9999 and not np.isnan(values).any() and (values == -9999).any()  # NaN under nodata -9999 before
    with pytest.raises(ValueError, match="nodata=-9999"):  # was rasterio's "cannot convert float NaN to integer"
        ppa_xr.to_raster(scores * 100, tmp_path / "i.tif", dtype="int16")
    path = ppa_xr.to_raster(scores, tmp_path / "i.tif", dtype="int16", nodata=-32768)
    with rasterio.open(path) as src:
        assert src.dtypes[0] == "int16" and src.nodata == -32768 and (src.read(1) == -32768).any()
        expected = scores.values
        np.testing.assert_array_equal(src.read()[~np.isnan(expected)], np.rint(expected[~np.isnan(expected)]))  # was truncated


@pytest.mark.parametrize("chunked", [False, True])
def test_an_integer_dtype_too_small_for_the_values_is_refused_and_leaves_no_file(tmp_path, landsat, chunked):
    scores = _gappy_scores(landsat)  # components of either sign
    scores = scores.chunk({"x": 64, "y": 64}) if chunked else scores.compute()
    with pytest.raises(ValueError, match=r"values from -[0-9.e+]+ to [0-9.e+]+ do not fit dtype=uint8 \(0 to 255\)"):
        ppa_xr.to_raster(scores, tmp_path / "u.tif", dtype="uint8", nodata=255)  # wrapped: -3 written as 253
    common = float(np.rint(np.nanmedian(scores.sel(component=1).values)))
    with pytest.raises(ValueError, match=rf"values take the integer {common:g}, the nodata: they would read as missing"):
        ppa_xr.to_raster(scores, tmp_path / "n.tif", dtype="int32", nodata=common)  # those pixels read as missing
    assert not list(tmp_path.iterdir())


def test_a_dataset_of_variables_declaring_other_nodata_is_refused_as_a_geotiff(tmp_path, landsat):
    """A GeoTIFF has one nodata: variables declaring -1 and 0 (or -1 and none) were written without any, their nodata
    pixels as values, silently. Floats where some declare NaN are written with NaN declared."""
    bands = landsat.isel(band=[0, 1, 2]).astype("int16").to_dataset("band")
    names = list(bands.data_vars)
    bands[names[0]] = bands[names[0]].rio.write_nodata(-1)
    mixed = bands.copy()
    mixed[names[1]] = mixed[names[1]].rio.write_nodata(0)
    for ds in (mixed, bands, bands.astype("float32")):  # -1 beside none (the Dataset's 0), and NaN beside 0
        with pytest.raises(ValueError, match=r"declare different nodata \(.*-1.*\), and a GeoTIFF has one for every band"):
            ppa_xr.to_raster(ds, tmp_path / "b.tif")
    assert not list(tmp_path.iterdir())
    floats = bands.astype("float32").drop_attrs(deep=False)  # the scene's own nodata (0) left behind, on the Dataset
    floats[names[0]] = floats[names[0]].where(floats.x > floats.x[10]).rio.write_nodata(np.nan)
    with rasterio.open(ppa_xr.to_raster(floats, tmp_path / "f.tif")) as src:
        assert np.isnan(src.nodata) and np.isnan(src.read(1)).any()
