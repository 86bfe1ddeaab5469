"""The .ppa accessor on real rasters: laziness, exactness against the numpy core, metadata, bad input."""

import pickle
import re

import dask
import dask.array as dsa
import numpy as np
from dask.callbacks import Callback
import pytest
import xarray as xr

import ppa_xr

from ppa_xr.cube import shift as transfer
from ppa_xr.datasets import open_rgb_byte

from .conftest import curved_sample


def _no_compute(*args, **kwargs):
    raise AssertionError("something was computed")


def pixels(cube: xr.DataArray, dim: str = "band") -> np.ndarray:
    """(n, d) float pixels of a cube, NaN where any band is nodata."""
    values = cube.transpose(..., dim).values.astype(np.float64)
    nodata = cube.rio.nodata
    if nodata is not None and not np.isnan(nodata):
        values[values == nodata] = np.nan
    return values.reshape(-1, cube.sizes[dim])


@pytest.fixture(scope="module")
def model(landsat):
    return landsat.ppa.fit(n_samples=20_000, random_state=0)


def test_fit_remembers_bands(model):
    assert model.feature_dim_ == "band"
    assert list(model.feature_labels_) == ["B1", "B2", "B3", "B4", "B5", "B6", "B7", "B9", "B10", "B11"]
    assert model.feature_coords_["wavelength"][0] == pytest.approx(0.443)
    assert model.n_features_in_ == 10


def test_transform_is_lazy_and_keeps_metadata(landsat, model):
    cube = landsat.chunk({"x": 100, "y": 64})
    with dask.config.set(scheduler=_no_compute):
        scores = cube.ppa.transform(model, n_components=4, check=False)
        back = scores.ppa.inverse_transform(model)
        err = cube.ppa.reconstruction_error(model, 2)
    assert isinstance(scores.data, dsa.Array)
    assert scores.dims == ("component", "y", "x")
    assert list(scores.component.values) == [1, 2, 3, 4]
    assert scores.chunks[1:] == cube.chunks[1:]
    assert scores.dtype == np.float32  # uint16 in -> float32 out
    np.testing.assert_array_equal(scores.x, cube.x)
    assert scores.rio.crs == cube.rio.crs
    assert scores.rio.transform() == cube.rio.transform()
    assert "spatial_ref" in scores.coords
    assert scores.attrs["AREA_OR_POINT"] == "Area"
    assert back.dims == cube.dims and list(back.band.values) == list(cube.band.values)
    np.testing.assert_allclose(back.wavelength, cube.wavelength)
    assert err.dims == ("y", "x")


class Computations(Callback):
    """Counts dask computations (each ``compute``, whatever the scheduler) while active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _start(self, dsk) -> None:
        self.count += 1


def test_transform_computes_nothing_until_asked(landsat, model):
    reads = []

    def counted(block):
        if block.size:  # not dask's meta probe
            reads.append(block.shape)
        return block

    source = landsat.chunk({"x": 40, "y": 40})  # 64 chunks
    cube = source.copy(data=source.data.map_blocks(counted, dtype=source.dtype))
    with Computations() as computations:
        scores = cube.ppa.transform(model, n_components=4)
        back = scores.ppa.inverse_transform(model)
        error = cube.ppa.reconstruction_error(model, 3)
    assert computations.count == 0 and reads == []  # graphs only
    assert isinstance(scores.data, dsa.Array) and isinstance(back.data, dsa.Array) and isinstance(error.data, dsa.Array)
    with Computations() as computations:
        cube.ppa.transform(model, n_components=4, check=True)  # the shift check reads a few chunks now
    assert computations.count > 0 and 0 < len(reads) <= transfer.CHECK_CHUNKS + 1 < 64  # + the chunk of the witness pixel
    checked = len(reads)
    scores.compute()
    assert len(reads) == checked + 64


def test_the_model_an_output_names_is_read_back_whatever_its_file_is_called(tmp_path, landsat, model):
    """One text names the model in an output (:mod:`ppa_xr.model.identity`), written by every output and read back by
    the inverse: the digest after the file's name counts, even where that name holds another digest."""
    from ppa_xr.model import identity

    path = tmp_path / "m (parameters 0123456789abcdef).nc"
    loaded = ppa_xr.load_model(model.save(path))
    scores = landsat.isel(x=slice(0, 40), y=slice(0, 40)).ppa.transform(loaded, n_components=3)
    assert scores.attrs[identity.MODEL_ATTR] == identity.named(loaded) == f"{path} (parameters {model.params_.digest})"
    assert identity.made_by(scores.attrs) == identity.named(loaded) and identity.names(identity.named(loaded), model)
    np.testing.assert_allclose(scores.ppa.inverse_transform(model), scores.ppa.inverse_transform(loaded))  # the same parameters
    renamed = scores.assign_attrs({identity.MODEL_ATTR: f"{path} (parameters 0123456789abcdef)"})
    with pytest.raises(ValueError, match=rf"made by another model \({re.escape(str(path))} \(parameters 0123456789abcdef\), as their "
                                         rf"attribute ppa_xr_model says\), not by this one \(parameters {model.params_.digest}\)"):
        renamed.ppa.inverse_transform(model)
    assert identity.made_by({identity.MODEL_ATTR: 3}) is None and identity.made_by({}) is None  # not a name: nothing checked

def test_outputs_record_their_provenance(tmp_path, landsat, model):
    scores = landsat.ppa.transform(model, n_components=3)
    assert scores.attrs["ppa_xr_n_components"] == 3 and scores.attrs["ppa_xr_degrees"] == " ".join(map(str, model.degrees_))
    assert scores.attrs["ppa_xr_model"].startswith("parameters ") and scores.attrs["ppa_xr_version"] == ppa_xr.__version__
    loaded = ppa_xr.load_model(model.save(tmp_path / "m.nc"))
    out = ppa_xr.write_cube(landsat.ppa.transform(loaded, n_components=3), tmp_path / "c.nc")
    again = xr.open_dataset(out, engine="h5netcdf")  # xarray's defaults: the grid mapping is a coordinate, the CF way
    assert str(tmp_path / "m.nc") in again["landsat8_ppa"].attrs["ppa_xr_model"] and again.rio.crs == landsat.rio.crs
    assert f"(parameters {model.params_.digest})" in again["landsat8_ppa"].attrs["ppa_xr_model"]  # the same parameters, reloaded
    other = landsat.ppa.fit(n_samples=20_000, random_state=0, degree=1, configuration="fixed")
    assert other.params_.digest not in landsat.ppa.transform(model, n_components=3).attrs["ppa_xr_model"]
    tif = ppa_xr.to_raster(landsat.ppa.transform(loaded, n_components=2), tmp_path / "c.tif")
    import rasterio

    with rasterio.open(tif) as src:
        assert src.tags()["ppa_xr_n_components"] == "2" and src.tags()["ppa_xr_degrees"] == " ".join(map(str, model.degrees_))


@pytest.mark.parametrize("chunks", [None, {"x": 100, "y": 64}, {"band": 3, "x": 160, "y": 320}])
def test_values_match_numpy_core_for_any_chunking(landsat, model, chunks):
    cube = landsat if chunks is None else landsat.chunk(chunks)
    X = pixels(landsat)
    scores = cube.ppa.transform(model).transpose(..., "component").values.reshape(-1, 10)
    ref = model.transform(X.astype(np.float32))
    np.testing.assert_allclose(scores, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    rec = cube.ppa.reconstruct(model, 3).transpose(..., "band").values.reshape(-1, 10)
    ref3 = model.inverse_transform(model.transform(X)[:, :3])
    np.testing.assert_allclose(rec, ref3, rtol=0, atol=1e-5 * np.abs(X).max())
    err = cube.ppa.reconstruction_error(model, 3).values.ravel()
    np.testing.assert_allclose(err, ((ref3 - X) ** 2).sum(1), rtol=1e-3, atol=1e-3 * np.abs(X).max())


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_float64_cubes_transform_bit_for_bit_under_any_chunking(dtype):
    """float64 cubes and 32-bit integers are computed in float64, whose products (padded to whole groups of points)
    do not depend on a pixel's place in its chunk: every chunking gives the same bits. (float32 cubes, and 8- and 16-bit
    integers computed in float32, agree to float32 rounding: single-precision BLAS rounds a column by its place.)"""
    data = (curved_sample(91 * 83, d=6, seed=3) * 1000 + 20000).reshape(91, 83, 6).transpose(2, 0, 1).astype(dtype)
    cube = xr.DataArray(data, dims=("band", "y", "x"))
    model = cube.ppa.fit(n_samples=3000, random_state=0, degree=3, configuration="fixed")
    outputs = lambda c: (c.ppa.transform(model).values, c.ppa.reconstruction_error(model, 2).values)  # noqa: E731
    whole = outputs(cube)
    for chunks in ({"y": 32, "x": 32}, {"y": 37, "x": 53}, {"y": 7}):
        for got, ref in zip(outputs(cube.chunk(chunks)), whole):
            np.testing.assert_array_equal(got, ref)


def test_float64_in_float64_out(landsat, model):
    scores = landsat.astype(np.float64).ppa.transform(model)
    assert scores.dtype == np.float64
    back = scores.ppa.inverse_transform(model)
    np.testing.assert_allclose(back.values, landsat.values, atol=1e-8)


def test_params_enter_the_graph_once(landsat, model):
    one = landsat.chunk({"x": 320, "y": 320}).ppa.transform(model)
    many = landsat.chunk({"x": 20, "y": 20}).ppa.transform(model)  # 256 chunks
    params_size = len(pickle.dumps(model.params_))
    size = lambda arr: len(pickle.dumps(dict(arr.data.__dask_graph__())))  # noqa: E731
    assert size(many) - size(one) < 64 * params_size  # not 255 extra copies


def test_invalid_pixels_give_nan_everywhere():
    rgb = open_rgb_byte(chunks={"x": 256, "y": 256})
    model = rgb.ppa.fit(n_samples=50_000, random_state=1)
    scores = rgb.ppa.transform(model).compute()
    invalid = (rgb == 0).any("band").values
    assert invalid.any()
    assert np.isnan(scores.values[:, invalid]).all()
    assert np.isfinite(scores.values[:, ~invalid]).all()
    masked = open_rgb_byte(chunks={"x": 256, "y": 256}, masked=True).ppa.transform(model).compute()
    np.testing.assert_array_equal(masked.values, scores.values)


def test_sample_is_uniform_reproducible_and_valid():
    rgb = open_rgb_byte(chunks={"x": 200, "y": 200})
    a = rgb.ppa.sample(n_samples=5000, random_state=3)
    b = rgb.ppa.sample(n_samples=5000, random_state=3)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (5000, 3) and (a != 0).all(1).all()  # no nodata pixel
    assert not np.array_equal(a, rgb.ppa.sample(n_samples=5000, random_state=4))
    valid = pixels(rgb)
    valid = valid[np.isfinite(valid).all(1)]
    # a uniform sample: its band means match the valid pixels' within sampling error
    se = valid.std(0) / np.sqrt(5000)
    assert (np.abs(a.mean(0) - valid.mean(0)) < 5 * se).all()


def test_too_few_valid_pixels_warns_and_uses_all():
    rgb = open_rgb_byte().isel(x=slice(300, 340), y=slice(300, 340))
    n_valid = int(np.isfinite(pixels(rgb)).all(1).sum())
    with pytest.warns(UserWarning, match=f"only {n_valid} valid pixels"):
        sample = rgb.ppa.sample(n_samples=10**6, random_state=0)
    assert len(sample) == n_valid


def test_all_invalid_cube_is_refused():
    cube = xr.DataArray(np.full((3, 10, 10), np.nan), dims=("band", "y", "x"))
    with pytest.raises(ValueError, match="no valid pixel"):
        cube.ppa.fit(n_samples=50)


def test_dataset_of_band_variables(landsat, model):
    ds = landsat.drop_vars("wavelength").to_dataset(dim="band")
    assert list(ds.data_vars) == list(landsat.band.values)
    scores = ds.ppa.transform(model)
    np.testing.assert_allclose(scores.values, landsat.ppa.transform(model).values, rtol=1e-6)
    reordered = ds[list(ds.data_vars)[::-1]]  # the model reorders by name
    np.testing.assert_allclose(reordered.ppa.transform(model).values, scores.values, rtol=1e-6)
    ds_model = ds.ppa.fit(n_samples=5000, random_state=0)
    assert list(ds_model.feature_labels_) == list(ds.data_vars)


def test_bands_reordered_by_label_selected_from_more_or_refused(landsat, model):
    shuffled = landsat.isel(band=[3, 1, 0, 2, 4, 5, 6, 7, 9, 8])
    np.testing.assert_array_equal(shuffled.ppa.transform(model).values, landsat.ppa.transform(model).values)
    with pytest.raises(ValueError, match=r"the cube lacks 1 of the model's 10 features along 'band': \[B11\]"):
        landsat.isel(band=slice(0, 9)).ppa.transform(model)
    renamed = landsat.assign_coords(band=[f"C{i}" for i in range(10)])
    with pytest.raises(ValueError, match=r"lacks 10 .*cube.assign_coords\(band=model.feature_labels_\)"):
        renamed.ppa.transform(model)
    seven = landsat.isel(band=slice(0, 7)).ppa.fit(n_samples=5000, random_state=0)  # a model of B1..B7
    with pytest.warns(UserWarning, match=r"3 features along 'band' the model was not fitted on, left out: \[B9, B10, B11\]"):
        selected = landsat.ppa.transform(seven)  # a 10-band cube: the model's bands by label
    np.testing.assert_array_equal(selected.values, landsat.isel(band=slice(0, 7)).ppa.transform(seven).values)
    rgb_model = open_rgb_byte().ppa.fit(n_samples=2000, random_state=0)
    with pytest.raises(ValueError, match=r"lacks 3 of the model's 3 features along 'band': \[1, 2, 3\]"):
        landsat.ppa.transform(rgb_model)
    unlabelled = landsat.drop_vars(["band", "wavelength"])  # no labels: checked by count
    np.testing.assert_array_equal(unlabelled.ppa.transform(model).values, landsat.ppa.transform(model).values)
    with pytest.raises(ValueError, match="fitted on 10 features, the cube has 9"):
        unlabelled.isel(band=slice(0, 9)).ppa.transform(model)


def test_datetime_features_are_named_as_dates(tmp_path):
    from ppa_xr.datasets import open_ersst_sample

    sst = open_ersst_sample()["sst"]
    model = sst.ppa.fit(dim="time", degree=1, random_state=0)
    with pytest.raises(ValueError, match=r"lacks 12 .*\[2012-01-01, 2012-02-01, 2012-03-01, 2012-04-01, \.\.\., 2012-11-01, 2012-12-01\]") as caught:
        sst.isel(time=slice(0, 24)).ppa.transform(model)
    assert len(str(caught.value)) < 700 and "000000000" not in str(caught.value)
    with pytest.raises(ValueError, match=r"cube.stack\(feature=\('lat', 'lon'\)\) with dim='feature'"):
        sst.ppa.fit(dim=("lat", "lon"))


def test_a_share_of_the_variance_keeps_what_transform_keeps_in_reconstruct_error_and_fill(landsat, model):
    k = landsat.ppa.transform(model, n_components=0.99).sizes["component"]
    assert k == model.kept(0.99)
    np.testing.assert_array_equal(landsat.ppa.reconstruct(model, 0.99).values, landsat.ppa.reconstruct(model, k).values)
    np.testing.assert_array_equal(landsat.ppa.reconstruction_error(model, 0.99).values, landsat.ppa.reconstruction_error(model, k).values)
    cloudy = landsat.where(landsat.band != "B4")  # one band missing everywhere: filled from the others
    np.testing.assert_array_equal(cloudy.ppa.fill(model, n_components=0.99).values, cloudy.ppa.fill(model, n_components=k).values)


def test_wrong_dimension_name(landsat, model):
    with pytest.raises(ValueError, match=r"no dimension 'band' \(its dims are \('bands', 'y', 'x'\)\); pass dim= .* dim='bands'"):
        landsat.rename(band="bands").ppa.transform(model)
    with pytest.raises(ValueError, match="no dimension 'wavelength_dim'"):
        landsat.ppa.fit(dim="wavelength_dim")
    with pytest.raises(ValueError, match="'component' dimension"):
        landsat.ppa.inverse_transform(model)
    # the model's own components given back to transform: pointed to the inverse, not to dim='component'
    with pytest.raises(ValueError, match=r"holds a model's components .*inverse_transform\(model\)") as caught:
        landsat.ppa.transform(model).ppa.transform(model)
    assert "dim='component'" not in str(caught.value)


def test_time_cube_and_extra_dims(model, landsat):
    cube = xr.concat([landsat, landsat + 10], dim="time").chunk({"time": 1, "x": 160})
    scores = cube.ppa.transform(model)
    assert scores.dims == ("time", "component", "y", "x")
    ref = landsat.ppa.transform(model).values
    np.testing.assert_allclose(scores.isel(time=0).values, ref, atol=1e-5 * np.abs(ref).max())


def test_non_numeric_features_are_refused():
    cube = xr.DataArray(np.array([["a", "b"], ["c", "d"]]), dims=("y", "band"))
    with pytest.raises(TypeError, match="must be numeric"):
        cube.ppa.fit()


def test_labelled_results_and_the_notebook_summary(landsat, model):
    results = model.to_xarray()
    assert results.components.dims == ("component", "band") and list(results.band.values) == list(landsat.band.values)
    np.testing.assert_allclose(results.wavelength, landsat.wavelength)
    np.testing.assert_array_equal(results.components.sel(band="B4"), model.components_[:, list(landsat.band.values).index("B4")])
    assert results.degree.sizes["step"] == 9 and float(results.explained_variance_ratio.sum()) == pytest.approx(1.0)
    text = repr(model)
    assert "features: 10 (B1, B2" in text and "degrees per step: [" in text and "error vs its PCA (fitting sample): k=1:" in text
    html = model._repr_mimebundle_()["text/html"]
    assert html.startswith("<div><strong>PPA, fitted</strong><table>") and "fitting sample" in html and "sk-" in html  # then sklearn's widget
    assert np.all(model.fit_error_ratio_ <= 100 + 1e-6)  # Property 2 on the fitting sample, as the summary shows it


def test_band_mismatch_hint_works_when_copied(landsat, model):
    numbered = landsat.assign_coords(band=np.arange(1, 11))  # a file's bands, labelled 1..n
    with pytest.raises(ValueError, match=r"cube.assign_coords\(band=model.feature_labels_\)") as info:
        numbered.ppa.transform(model)
    hint = str(info.value).split("Python: ")[-1].split(";")[0]
    fixed = eval(hint, {"cube": numbered, "model": model})  # the hint, run as written
    np.testing.assert_array_equal(fixed.ppa.transform(model, check=False).values, landsat.ppa.transform(model, check=False).values)
