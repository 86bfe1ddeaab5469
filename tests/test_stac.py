"""STAC cubes as stackstac and odc-stac build them, from local STAC items pointing at GeoTIFFs written here:
stackstac's (time, band, y, x) float64 with NaN fill and band chunks of 1, odc-stac's Dataset of one
variable per band."""

import datetime as dt

import numpy as np
import odc.stac
import pystac
import pytest
import stackstac
import xarray as xr

import ppa_xr  # noqa: F401
from ppa_xr.datasets import open_landsat8_sample

BANDS = ["B2", "B3", "B4", "B5", "B6"]
PROJECTION = "https://stac-extensions.github.io/projection/v1.1.0/schema.json"


@pytest.fixture(scope="module")
def items(tmp_path_factory):
    """Two dates of a 5-band scene, one GeoTIFF per band and date, as STAC items with projection metadata."""
    folder = tmp_path_factory.mktemp("stac")
    cube = open_landsat8_sample().drop_vars("wavelength").sel(band=BANDS)
    epsg, (left, bottom, right, top) = cube.rio.crs.to_epsg(), cube.rio.bounds()
    footprint = {"type": "Polygon", "coordinates": [[[left, bottom], [right, bottom], [right, top], [left, top], [left, bottom]]]}
    out = []
    for t in range(2):
        item = pystac.Item(id=f"LC08_{t}", geometry=footprint, bbox=[left, bottom, right, top], datetime=dt.datetime(2020, 1 + t, 1), properties={})
        item.stac_extensions.append(PROJECTION)
        item.properties.update({"proj:epsg": epsg, "proj:transform": list(cube.rio.transform())[:6], "proj:shape": [cube.sizes["y"], cube.sizes["x"]]})
        for band in BANDS:
            path = folder / f"LC08_{t}_{band}.TIF"
            (cube.sel(band=[band]) + 50 * t).rio.to_raster(path)  # the second date a little brighter
            item.add_asset(band, pystac.Asset(href=str(path), media_type=pystac.MediaType.GEOTIFF, roles=["data"]))
        out.append(item)
    return out


def test_stackstac_cube_fits_pooled_over_time_and_keeps_nan_fill(items):
    cube = stackstac.stack(items, assets=BANDS, chunksize=160)  # bounds snapped outwards: a NaN-filled edge
    assert cube.dims == ("time", "band", "y", "x") and cube.dtype == np.float64 and cube.data.chunksize[1] == 1
    fill = np.isnan(cube.values).any(axis=1)
    assert fill.any() and not fill.all()
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    assert list(model.feature_labels_) == BANDS
    scores = cube.ppa.transform(model, n_components=3)
    assert scores.dims == ("time", "component", "y", "x") and scores.chunks[2] == cube.chunks[2]
    values = scores.values
    np.testing.assert_array_equal(np.isnan(values).any(axis=1), fill)  # fill stays fill, everything else is valid
    pixels = cube.transpose("time", "y", "x", "band").values.reshape(-1, len(BANDS))
    expected = model.transform(pixels).reshape(2, cube.sizes["y"], cube.sizes["x"], -1)[..., :3]
    np.testing.assert_allclose(values.transpose(0, 2, 3, 1), expected, rtol=1e-10, equal_nan=True)
    back = scores.ppa.inverse_transform(model)
    assert back.dims == ("time", "band", "y", "x") and list(back.band.values) == BANDS
    # one model per time step, as the docs show
    per_date = [cube.isel(time=t).ppa.fit(n_samples=5000, random_state=0) for t in range(cube.sizes["time"])]
    assert not np.allclose(per_date[0].mean_, per_date[1].mean_)
    np.testing.assert_allclose(per_date[1].mean_ - per_date[0].mean_, 50, rtol=1e-3)


def test_odc_stac_dataset_in_dataset_out(items):
    ds = odc.stac.load(items, bands=BANDS, chunks={"x": 160, "y": 160})
    assert isinstance(ds, xr.Dataset) and list(ds.data_vars) == BANDS
    model = ds.ppa.fit(n_samples=20_000, random_state=0)
    scores = ds.ppa.transform(model)
    assert set(scores.dims) == {"time", "component", "y", "x"}
    back = scores.ppa.inverse_transform(model)
    assert isinstance(back, xr.Dataset) and list(back.data_vars) == BANDS
    for band in BANDS:
        valid = np.isfinite(back[band].values)
        assert valid.mean() > 0.99
        np.testing.assert_allclose(back[band].values[valid], ds[band].values[valid], rtol=1e-4, atol=1e-2)


def test_stackstac_outputs_write_to_netcdf_and_zarr(items, tmp_path):
    """stackstac's metadata (a ``spec`` attribute, coordinates of sets and None) made xarray refuse the whole output:
    "Invalid value for attr 'spec'", then "cannot serialize arbitrary Python objects"."""
    cube = stackstac.stack(items, assets=BANDS, chunksize=160)
    scores = cube.ppa.transform(cube.ppa.fit(n_samples=5000, random_state=0, degree=1), n_components=2)
    for name in ("c.nc", "c.zarr"):
        with pytest.warns(UserWarning, match=r"coordinates \[.*'proj:shape'.*\] left out, attributes \['spec'\] written as text"):
            path = ppa_xr.write_cube(scores, tmp_path / name)
        back = xr.open_dataset(path, engine="zarr" if name.endswith("zarr") else None)
        np.testing.assert_array_equal(back[scores.name].values, scores.values)
        assert back[scores.name].attrs["spec"].startswith("RasterSpec(") and "id" in back.coords
    assert not isinstance(scores.attrs["spec"], str) and "proj:shape" in scores.coords  # the result itself unchanged


def test_bands_named_by_their_common_names_are_pointed_to_the_relabelling(items):
    """A model of asset keys (stackstac's B2..B6, with eo:bands' common names as a coordinate) on a cube of common names
    (odc-stac's aliases, blue..swir16) in another order: the message advised labelling them by position."""
    names = ["blue", "green", "red", "nir", "swir16"]
    cube = stackstac.stack(items, assets=BANDS, chunksize=160).assign_coords(common_name=("band", names))
    model = cube.ppa.fit(n_samples=5000, random_state=0, degree=1)
    named = cube.assign_coords(band=names).drop_vars("common_name").isel(band=[4, 2, 0, 1, 3])
    with pytest.raises(ValueError, match=r"by their 'common_name': relabel them by name, e.g. cube.rename\(\{'blue': 'B2', 'green': 'B3'\}"):
        named.ppa.transform(model)
    m = dict(zip(model.features_.coords["common_name"], model.feature_labels_))
    relabelled = named.assign_coords(band=[m[b] for b in named.band.values])  # as the message says
    np.testing.assert_array_equal(relabelled.ppa.transform(model).values, cube.ppa.transform(model).values)
