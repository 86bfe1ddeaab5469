import numpy as np
import pytest

from ppa_xr.datasets import UCI_TABLES, load_table

# n x d of the paper's Table I (Vehicles is not bundled)
PAPER_SHAPES = {"MagicGamma": (19020, 10), "JapaneseVowels": (9961, 12), "Pageblocks": (5473, 10), "Sat": (6435, 36), "Segmentation": (2310, 16)}


@pytest.mark.parametrize("name", UCI_TABLES)
def test_tables_match_the_paper(name):
    table = load_table(name)
    assert table.data.shape == PAPER_SHAPES[name]
    assert len(table.feature_names) == table.data.shape[1] == len(set(table.feature_names))
    assert table.target.shape == (table.data.shape[0],)
    assert np.isfinite(table.data).all()
    assert (table.data.std(0) > 0).all()  # no constant column (Segmentation's are dropped)
    assert "CC BY 4.0" in table.provenance


def test_segmentation_drops_the_papers_three_columns():
    names = load_table("Segmentation").feature_names
    assert "REGION-PIXEL-COUNT" not in names and not any(n.startswith("SHORT-LINE") for n in names)


def test_vowel_speakers():
    target = load_table("JapaneseVowels").target
    assert set(target) == set(range(1, 10))


def test_unknown_table():
    with pytest.raises(ValueError, match="choose one of"):
        load_table("Vehicles")


def test_normalised_spans_unit_interval():
    X = load_table("Pageblocks").normalised()
    np.testing.assert_allclose(X.min(0), 0)
    np.testing.assert_allclose(X.max(0), 1)


def test_the_ndvi_series_variables_carry_its_crs(tmp_path):
    """The NDVI series declares EPSG:32633 on the Dataset only: ``ds.ndvi`` (and its fill, its components) had no CRS,
    and a GeoTIFF of them was written unplaced, silently. Each variable now carries it."""
    import rioxarray

    import ppa_xr
    from ppa_xr.datasets import open_ndvi_series

    ds = open_ndvi_series()
    assert ds.ndvi.rio.crs == ds.clear.rio.crs == "EPSG:32633"
    learnt = ((ds.clear == 1).mean(("y", "x")) >= 0.05).values  # dates clear somewhere, as docs/gaps.md takes them
    series = ds.ndvi.where(ds.clear == 1).isel(time=np.flatnonzero(learnt)[:4])
    model = series.ppa.fit(dim="time", degree=1, missing="fill", random_state=0)
    path = ppa_xr.to_raster(series.ppa.fill(model), tmp_path / "filled.tif")
    with rioxarray.open_rasterio(path) as written:
        assert written.rio.crs == "EPSG:32633"
        np.testing.assert_allclose(written.x.values, series.x.values)
