"""Inputs a hostile user tried: each accepted as it should be, or refused with one message that says what and what to do."""

import json
import warnings

import dask.array as dsa
import numpy as np
import pytest
import xarray as xr
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError

import ppa_xr
from ppa_xr import PPA, geometry, load_model
from ppa_xr.cli import main
from ppa_xr.cube.sampling import MIN_HELD_OUT

from .conftest import curved_sample


@pytest.fixture(scope="module")
def small(landsat):
    """A 64 x 64 crop of five bands, chunked, and a model of it (half its pixels held out)."""
    cube = landsat.isel(x=slice(0, 64), y=slice(0, 64), band=slice(0, 5)).drop_vars("wavelength").chunk({"x": 32, "y": 32})
    return cube, cube.ppa.fit(degree=(1, 2), random_state=0)


# --------------------------------------------------------------------------- integer components
def test_integer_components_invert_to_floating_point_as_computed(small, tmp_path):
    cube, model = small
    rounded = cube.ppa.transform(model).round()
    expected = rounded.astype(np.float64).ppa.inverse_transform(model).values
    back = rounded.astype("int64").ppa.inverse_transform(model)  # lazy: dask declares what the kernel returns
    assert back.dtype == np.float64 and back.data.dtype == np.float64
    np.testing.assert_array_equal(back.values, expected)  # not truncated to integers (the error once reached 0.999)
    assert np.abs(expected - np.round(expected)).max() > 0.1
    assert back.rio.crs == cube.rio.crs and np.isnan(back.rio.nodata)  # with a CRS: once "cannot convert float NaN to integer"
    from ppa_xr.core import kernels
    from ppa_xr.cube.maps import map_kernel

    mapped = map_kernel(kernels.inverse, rounded.astype("int64"), "component", "band", 5, None, params=model.params_)
    assert mapped.dtype == np.float64 and mapped.compute().dtype == np.float64  # any kernel: declared as it computes
    ppa_xr.write_cube(back, tmp_path / "back.nc")
    written = next(iter(xr.open_dataset(tmp_path / "back.nc", decode_coords="all").data_vars.values()))
    np.testing.assert_array_equal(written.transpose(*back.dims).values, expected)


def test_cli_inverts_a_uint16_geotiff_of_components(small, tmp_path, capsys):
    cube, model = small
    model.save(tmp_path / "m.nc")
    scores = cube.ppa.transform(model, n_components=2)
    stored = (scores - scores.min() + 1).round().astype(np.uint16)  # integers a uint16 file can hold, 0 free as its nodata
    stored.rio.write_nodata(0).rio.to_raster(tmp_path / "c.tif")
    assert main(["inverse", str(tmp_path / "c.tif"), str(tmp_path / "m.nc"), str(tmp_path / "back.tif")]) == 0
    import rioxarray

    back = rioxarray.open_rasterio(tmp_path / "back.tif")
    assert back.dtype == np.float32  # uint16 components are exact in float32, the kernels' float32 path
    np.testing.assert_allclose(back.values, stored.astype(np.float32).ppa.inverse_transform(model).values, rtol=1e-6)


# --------------------------------------------------------------------------- geometry of invalid points
def test_geometry_of_nan_and_inf_points_is_nan_everywhere():
    X = curved_sample(1000, d=3)
    model = PPA(degree=3, random_state=0).fit(X)
    points = X[:4].copy()
    points[0, 1], points[1, 0], points[2, 2] = np.nan, np.inf, -np.inf
    for name, out in (("derivatives", geometry.derivatives(model, points)), ("frenet_frame", geometry.frenet_frame(model, points)),
                      ("curvatures", geometry.curvatures(model, points)), ("metric", geometry.metric(model, points))):
        assert np.isnan(out[:3]).all(), name  # curvatures once read 0 there
        assert np.isfinite(out[3]).all(), name
    assert geometry.curvatures(model, points)[3, 0] > 0


# --------------------------------------------------------------------------- one minimum of held-out pixels
@pytest.mark.parametrize("n_samples", [1, True, 2, MIN_HELD_OUT - 1, 2.5])
def test_evaluate_and_the_report_refuse_fewer_held_out_pixels_than_the_minimum(small, n_samples):
    cube, model = small
    message = rf"n_samples \(held-out pixels; at least {MIN_HELD_OUT} for a stable estimate\) must be an integer >= {MIN_HELD_OUT}"
    with pytest.raises(ValueError, match=message):
        cube.ppa.evaluate(model, n_samples=n_samples)
    with pytest.raises(ValueError, match=message):  # 9.43 bits on 2 pixels against 7.94 on 1,700, silently
        cube.ppa.information_report(model, 2, n_samples=n_samples)


@pytest.mark.parametrize("max_chunks", [0, -1, 1.5, True])
def test_evaluate_refuses_chunk_counts_that_are_not_counts(small, max_chunks):
    cube, model = small
    with pytest.raises(ValueError, match=r"max_chunks \(chunks to read, or None for every chunk\) must be an integer >= 1"):
        cube.ppa.evaluate(model, max_chunks=max_chunks)


def test_the_minimum_itself_is_accepted(small):
    cube, model = small
    assert cube.ppa.evaluate(model, n_samples=MIN_HELD_OUT).attrs["n_pixels"] == MIN_HELD_OUT


# --------------------------------------------------------------------------- parameters as numpy values
@pytest.mark.parametrize("params", [{"n_components": np.int64(2)}, {"max_curved": np.int64(1)}, {"n_folds": np.int64(3)},
                                    {"selection_samples": np.int64(200)}, {"whiten": np.bool_(True)}, {"standardize": np.bool_(True)},
                                    {"robust": np.bool_(True)}, {"tails": np.str_("linear")}, {"degree": np.array([1, 2])},
                                    {"random_state": np.int64(7)}])
def test_numpy_parameters_fit_save_and_load_as_python_values(tmp_path, params):
    X = curved_sample(400)
    model = PPA(**params).fit(X)
    for name in ("m.nc", "m.zarr"):
        loaded = load_model(model.save(tmp_path / name))  # once a JSON or h5py TypeError
        (key, value), = params.items()
        saved = loaded.get_params()[key]
        assert saved == (tuple(value.tolist()) if isinstance(value, np.ndarray) else value.item())
        assert type(saved) is (tuple if isinstance(value, np.ndarray) else type(value.item()))
        np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


def test_a_numpy_generator_seeds_array_and_cube_fits_and_saves(tmp_path, small):
    cube, _ = small
    X = curved_sample(400)
    first, again = (PPA(degree=(1, 2), random_state=np.random.default_rng(0)).fit(X) for _ in range(2))
    np.testing.assert_array_equal(first.components_, again.components_)  # a fresh generator of one seed: the same fit
    model = cube.ppa.fit(degree=(1, 2), random_state=np.random.default_rng(0))
    loaded = load_model(model.save(tmp_path / "m.nc"))
    assert loaded.random_state is None and json.loads(loaded.to_dataset().attrs["estimator_params"])["random_state"] is None
    np.testing.assert_array_equal(loaded.components_, model.components_)


# --------------------------------------------------------------------------- nodata a dtype cannot hold
@pytest.mark.parametrize("dtype, value, where", [("uint8", -9999, "attrs"), ("uint8", 300, "attrs"), ("uint16", -1, "attrs"),
                                                 ("uint16", 65535.5, "attrs"), ("uint16", "abc", "attrs"), ("int8", 1000, "attrs"),
                                                 ("uint16", -1, "encoding"), ("int16", 40000, "encoding")])
def test_nodata_the_dtype_cannot_hold_is_named_with_what_to_do(dtype, value, where):
    values = np.random.default_rng(0).integers(1, 100, size=(3, 20, 20)).astype(dtype)
    cube = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": ["a", "b", "c"]}, name="scene")
    ds = cube.to_dataset("band")
    getattr(cube, where)["_FillValue"] = value
    getattr(ds["a"], where)["_FillValue"] = value
    message = (rf"the cube 'scene' of dtype {dtype} declares nodata {value!r} in {where}\['_FillValue'\], a value {dtype} cannot hold "
               rf".*correct it .*cube.rio.write_nodata\(value\).* or remove it \(del cube.{where}\['_FillValue'\]\)")
    for obj, name in ((cube, "scene"), (ds, "a")):
        with pytest.raises(ValueError, match=message.replace("scene", name)):
            obj.ppa.fit(degree=1)
    getattr(cube, where)["_FillValue"] = np.nan  # NaN marks no integer: nothing masked (a float result's attributes after astype)
    assert cube.ppa.fit(degree=1).sample_.size == 400


# --------------------------------------------------------------------------- the model given
@pytest.mark.parametrize("call", ["transform", "evaluate", "information_report", "reconstruct", "reconstruction_error", "inverse"])
def test_anything_but_a_fitted_ppa_is_named(small, call):
    cube, model = small
    scores = cube.ppa.transform(model)

    def run(candidate):
        if call == "inverse":
            return scores.ppa.inverse_transform(candidate)
        return getattr(cube.ppa, call)(candidate, *([2] if call.startswith("reconstruct") else []))

    with pytest.raises(NotFittedError, match="This PPA instance is not fitted yet"):
        run(PPA())
    fitted_pca = PCA(2).fit(np.random.default_rng(0).normal(size=(50, 5)))
    for other in (fitted_pca, "m.nc"):
        with pytest.raises(TypeError, match=r"expected a fitted ppa_xr.PPA model, got .*(PCA|str); fit one with cube.ppa.fit"):
            run(other)


# --------------------------------------------------------------------------- one message each
def test_single_messages_for_odd_inputs(small):
    cube, model = small
    with pytest.raises(ValueError, match="the cube has no features: its dimension 'band' has size 0"):
        cube.isel(band=[]).ppa.fit()
    unknown = xr.DataArray(cube.data[:, cube.data[0, :, 0] > -1, :], dims=cube.dims)  # boolean indexing: chunk sizes NaN
    with pytest.raises(ValueError, match=r"unknown chunk sizes \(NaN\).*compute_chunk_sizes\(\)"):
        unknown.ppa.fit()
    assert isinstance(unknown.data, dsa.Array) and np.isnan(unknown.data.chunks[1][0])
    labels = cube.band.values.astype(object)
    labels[-1] = np.nan
    with pytest.raises(ValueError, match="a label along 'band' is NaN, which equals no label"):
        cube.assign_coords(band=labels).ppa.fit(degree=1)
    with pytest.raises(ValueError, match="n_samples must be an integer >= 1, got True"):
        cube.ppa.fit(n_samples=True)
    with pytest.raises(ValueError, match=r"a numpy table must be 2-D \(samples, features\), got shape \(5,\)"):
        ppa_xr.information.information_report(np.ones(5), model)
    with pytest.raises(TypeError, match="fit_pooled takes a list of cubes"):
        ppa_xr.fit_pooled(cube)
    pooled = ppa_xr.fit_pooled((part for part in (cube.isel(y=slice(0, 32)), cube.isel(y=slice(32, None)))), degree=1, random_state=0)
    assert len(pooled.sample_.cubes) == 2  # a generator of cubes is a sequence of cubes (once "has no len()")


def test_dates_as_features_the_cube_holds_otherwise_are_named_as_such():
    """A T-mode model's months given as text, or at another time of day: the message named only the model's months
    and said the model could not project others (it can: they are the same months), or called the dates int."""
    months = np.arange("2001-01", "2002-01", dtype="datetime64[M]").astype("datetime64[ns]")
    cube = xr.DataArray(np.random.default_rng(0).normal(size=(12, 20, 20)).cumsum(0), dims=("time", "y", "x"), coords={"time": months})
    model = cube.ppa.fit(dim="time", degree=1, n_samples=200)
    with pytest.raises(ValueError, match=r"the same text, other types: the model's labels are datetime64, the cube's str"):
        cube.assign_coords(time=[str(m)[:10] for m in months]).ppa.transform(model)
    with pytest.raises(ValueError, match=r"\(the cube has \[2001-01-01T12:00, "):
        cube.assign_coords(time=months + np.timedelta64(12, "h")).ppa.transform(model)


def test_evaluate_says_it_read_random_chunks_only_where_it_did(small):
    """max_chunks at or above the cube's chunk count reads every chunk: the attribute said "from 100 random chunks"."""
    cube, model = small  # 4 chunks
    assert cube.ppa.evaluate(model, max_chunks=100).attrs["pixels"] == "held out: valid pixels outside the model's fitting sample"
    assert cube.ppa.evaluate(model, max_chunks=3).attrs["pixels"].endswith(", from 3 random chunks")


def test_a_series_of_one_variable_and_a_cube_given_to_the_estimator_say_where_the_features_are(small):
    """A netCDF of one variable (an NDVI series) has its features along a dim of that variable, and a cube's maps go
    through its accessor: each refusal names the call that works, and that call works."""
    cube, model = small
    series = cube.rename(band="time").assign_coords(time=np.arange(cube.sizes["band"])).to_dataset(name="ndvi")
    with pytest.raises(ValueError, match=r"one data variable, 'ndvi'.*ds\['ndvi'\] with dim='time' \(CLI: --variable ndvi, and "
                                         r"ppa-xr fit's --dim time; the other commands take the model's\)"):  # only fit has --dim
        series.ppa.fit(dim="time")
    two = series.assign(evi=series.ndvi * 0.5)
    with pytest.raises(ValueError, match=r"already has a dimension 'time'.*ds\['ndvi'\] \(CLI: --variable ndvi\)"):
        two.ppa.fit(dim="time")
    assert series["ndvi"].ppa.fit(dim="time", degree=1, n_samples=500).n_features_in_ == cube.sizes["band"]
    with pytest.raises(ValueError, match=r"cube of dims \('band', 'y', 'x'\) goes through its accessor, e.g. cube.ppa.transform\(model\)"):
        model.transform(cube)


def test_pooled_cubes_in_other_units_are_refused(small):
    """A scene in km pooled with one in m was fitted as one population, silently."""
    cube, _ = small
    metres = cube.astype(float).assign_attrs(units="m")
    kilometres = (metres / 1000).assign_attrs(units="km")
    with pytest.raises(ValueError, match=r"cube 2 of 2 is in units 'km' and cube 1 in 'm'.*convert one first"):
        ppa_xr.fit_pooled([metres, kilometres], degree=1, random_state=0)
    per_band = tuple("m" for _ in range(cube.sizes["band"]))
    with pytest.raises(ValueError, match="cube 3 of 3 is in units"):  # rioxarray's per-band units; cubes without any pass
        ppa_xr.fit_pooled([metres.assign_attrs(units=per_band), cube, kilometres.assign_attrs(units=("km",) * len(per_band))], degree=1)
    ppa_xr.fit_pooled([metres, (kilometres * 1000).assign_attrs(units="m"), cube], degree=1, random_state=0)
    ppa_xr.fit_pooled([metres, metres.assign_attrs(units=per_band), metres.assign_attrs(units=("",) * len(per_band))], degree=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pooled_cubes_at_scales_far_apart_are_named(landsat, seed):
    """A scene's digital numbers (reflectance x 10,000) pooled with another's reflectances, no units declared, were fitted
    as one population, silently; a dark scene beside a bright one (brightness apart, not spread) passes."""
    refl = (landsat.isel(band=slice(0, 5)).drop_vars("wavelength").astype("float64") / 10000).where(landsat.isel(band=slice(0, 5)) > 0)
    refl.attrs = {}
    left, right = refl.isel(x=slice(0, 160)), refl.isel(x=slice(160, None))
    with pytest.warns(UserWarning, match=r"cube 2 of 3's values lie [0-9.e+]+ times as far from 0, and spread [0-9.e+]+ times as "
                                         r"wide, as cube [13]'s.*other units.*cube \* scale_factor \+ add_offset"):
        ppa_xr.fit_pooled([left, right * 10000, left], degree=1, n_samples=3000, random_state=seed)
    brightness = np.sqrt((refl**2).sum("band"))
    dark, bright = refl.where(brightness < brightness.quantile(0.05)), refl.where(brightness > brightness.quantile(0.95))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        ppa_xr.fit_pooled([dark, bright], degree=1, n_samples=3000, random_state=seed)
        ppa_xr.fit_pooled([left, right], degree=1, n_samples=3000, random_state=seed)


def test_groups_with_missing_or_unsortable_labels_are_refused():
    """NaN group labels were held out as one group, silently; None or mixed labels failed in numpy's sort."""
    import pandas as pd

    X = curved_sample(n=600, seed=0)
    labels = np.arange(600) % 6
    for missing in (np.where(labels == 0, np.nan, labels), np.where(labels == 0, None, labels.astype(object)),
                    pd.Categorical(np.where(labels == 0, None, labels.astype(str)))):
        with pytest.raises(ValueError, match=r"groups hold 100 missing labels \(NaN or None\) of 600: give those samples a group"):
            PPA(degree=(1, 2), configuration="fixed").fit(X, groups=missing)
    with pytest.raises(TypeError, match=r"groups must be labels of one kind that sort \(ints or strings; got int, str\)"):
        PPA(degree=(1, 2), configuration="fixed").fit(X, groups=np.where(labels == 0, "a", labels.astype(object)))
    fitted = [PPA(degree=(1, 2), configuration="fixed", random_state=0).fit(X, groups=g).params_.mean for g in
              (labels, labels.astype(str), pd.Categorical(labels.astype(str)), labels + 0.5)]
    for mean in fitted[1:]:
        np.testing.assert_array_equal(mean, fitted[0])


def test_dates_and_complex_numbers_as_feature_values_are_refused_with_the_numbers_to_give(curved):
    """Dates as a table's values were fitted and transformed as their nanoseconds since 1970, silently; complex numbers
    were refused with the table printed; a cube of either named neither what to give nor, for an unnamed cube, anything
    but 'None'."""
    import pandas as pd

    model = PPA(degree=2, configuration="fixed").fit(curved)
    dates = (curved * 1e9).astype("int64").astype("datetime64[ns]")
    frame = pd.DataFrame(curved, columns=list("abcd")).assign(a=lambda df: pd.to_datetime(df["a"] * 1e9))
    for call in (lambda: PPA().fit(dates), lambda: model.transform(dates), lambda: model.fill(dates), lambda: PPA().fit(frame),
                 lambda: model.transform(dates - dates[0])):
        with pytest.raises(TypeError, match=r"dates or durations: convert them to the numbers meant.*np.timedelta64\(1, 'D'\)"):
            call()
    for call in (lambda: PPA().fit(curved + 1j), lambda: model.transform(curved + 0j), lambda: model.fill(curved + 0j)):
        with pytest.raises(ValueError, match=r"Complex data not supported: X must hold real numbers; give their real part, X.real"):
            call()
    cube = xr.DataArray(curved.T.reshape(4, 50, 60), dims=("band", "y", "x"))
    for values, advice in ((cube + 1j, r"complex128: give their real part, cube.real"), (cube.astype(object), r"object: .*astype\('float64'\)"),
                           ((cube * 1e9).astype("int64").astype("datetime64[ns]"), r"datetime64\[ns\]: convert them")):
        with pytest.raises(TypeError, match=f"feature values must be numeric \\(real numbers: int, float or bool\\), got dtype {advice}"):
            values.ppa.transform(model)


def test_integers_beyond_two_to_the_53_are_refused_where_float64_would_round_them(curved):
    """64-bit integers above 2**53 (counts, ids, nanosecond times as numbers) became float64 with their last digits
    rounded away (2**60 + 1000 as 2**60 + 1024), silently; integers float64 holds exactly pass, however large."""
    import pandas as pd

    model = PPA(degree=2, configuration="fixed").fit(curved)
    big = (curved * 1e3).astype(np.int64) + 2**60
    frame = pd.DataFrame(curved, columns=list("abcd")).assign(b=big[:, 1])
    nullable = frame.assign(b=pd.array(big[:, 1], dtype="Int64")).astype({"b": "Int64"})
    nullable.loc[3, "b"] = pd.NA
    for call in (lambda: PPA().fit(big), lambda: model.transform(big), lambda: model.fill(big), lambda: PPA().fit(big.astype(np.uint64)),
                 lambda: PPA().fit(frame), lambda: PPA().fit(nullable), lambda: model.transform(-big)):
        with pytest.raises(ValueError, match=r"integers up to \d+ \(beyond 2\*\*53.*Subtract a reference first.*astype\('float64'\)"):
            call()
    exact = (curved * 1e3).astype(np.int64) * 2**10 + 2**60  # multiples of 2**10: float64 holds them exactly
    assert PPA(degree=1).fit(exact).mean_.shape == (4,)
    np.testing.assert_allclose(PPA(degree=1).fit((curved * 1e3).astype(np.int64)).mean_, (curved * 1e3).astype(np.int64).mean(axis=0), rtol=1e-12)


def test_a_table_as_a_labelled_dataarray_is_read_by_its_labels(curved):
    """A 2-D DataArray of pixels by the model's bands in another order (a stacked cube) went through transform,
    evaluate and the geometry by position, and a DataArray of components in another order through inverse_transform,
    silently; a Dataset was refused by numpy's conversion."""
    cube = xr.DataArray(curved.T.reshape(4, 50, 60), dims=("band", "y", "x"), coords={"band": list("abcd")})
    model = cube.ppa.fit(degree=2, configuration="fixed", random_state=0)
    table = cube.stack(pixel=("y", "x")).transpose("pixel", "band")
    reversed_bands = table.isel(band=[3, 2, 1, 0])
    np.testing.assert_array_equal(model.transform(reversed_bands), model.transform(curved))
    np.testing.assert_array_equal(model.transform(reversed_bands.T), model.transform(curved))
    np.testing.assert_array_equal(geometry.metric(model, reversed_bands[:5]), geometry.metric(model, curved[:5]))
    np.testing.assert_array_equal(model.evaluate(reversed_bands).relative, model.evaluate(curved).relative)
    with pytest.raises(ValueError, match="lacks 1 of the model's 4 features"):
        model.transform(table.isel(band=[0, 1, 2]))
    scores = cube.ppa.transform(model).stack(pixel=("y", "x")).transpose("pixel", "component")
    np.testing.assert_array_equal(model.inverse_transform(scores.T), model.inverse_transform(scores.values))
    with pytest.raises(ValueError, match=r"labelled \[2, 1, 3, 4\] along 'component'.*scores.sel\(component=slice\(1, 4\)\)"):
        model.inverse_transform(scores.isel(component=[1, 0, 2, 3]))
    with pytest.raises(ValueError, match=r"a Dataset \(its variables the features\) goes through its accessor"):
        model.transform(cube.to_dataset("band").stack(pixel=("y", "x")))


def test_estimator_fitted_on_a_labelled_dataarray_records_its_features_labels(curved, tmp_path):
    """``PPA().fit`` of a stacked cube ``(pixel, band)`` records its band labels, as a DataFrame's columns are: a later
    table or cube in another band order was mapped by position, silently, the model not knowing its labels."""
    table = xr.DataArray(curved, dims=("pixel", "band"), coords={"band": list("abcd")})
    model = PPA(degree=2, configuration="fixed").fit(table)
    np.testing.assert_array_equal(model.feature_labels_, list("abcd"))
    assert model.feature_dim_ == "band"
    reversed_bands = table.isel(band=[3, 2, 1, 0])
    np.testing.assert_array_equal(model.transform(reversed_bands), model.transform(curved))
    loaded = load_model(model.save(tmp_path / "m.nc"))
    np.testing.assert_array_equal(loaded.transform(reversed_bands), model.transform(curved))
    cube = reversed_bands.unstack() if "pixel" in reversed_bands.indexes else reversed_bands.T.expand_dims(y=1)
    np.testing.assert_allclose(cube.ppa.transform(model).isel(y=0).values, model.transform(curved).T)


def test_pandas_nullable_columns_through_to_xarray_are_numbers_with_their_gaps(curved):
    """A DataFrame of nullable Float64 / Int64 columns (pd.NA for gaps) through to_xarray keeps pandas' arrays, and the
    accessor failed with numpy's "Cannot interpret 'Float64Dtype()' as a data type"; their pd.NA are NaN."""
    import pandas as pd

    values = np.round(curved * 100)
    values[::10, 1] = np.nan
    plain = pd.DataFrame(values, columns=list("abcd")).rename_axis("pixel").to_xarray()
    model = plain.ppa.fit(degree=1, random_state=0)
    for dtype in ("Float64", "Int64"):
        nullable = pd.DataFrame(values, columns=list("abcd")).astype(dtype).rename_axis("pixel").to_xarray()
        np.testing.assert_array_equal(nullable.ppa.fit(degree=1, random_state=0).components_, model.components_)
        np.testing.assert_array_equal(nullable.ppa.transform(model).values, plain.ppa.transform(model).values)
        np.testing.assert_array_equal(nullable.ppa.fill(model).to_dataarray().values, plain.ppa.fill(model).to_dataarray().values)
