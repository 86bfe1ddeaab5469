"""Small real datasets shipped with ppa_xr (see ``data/PROVENANCE.md``).

The UCI tables are the ones of the paper's experiments (Laparra et al. 2014,
Table I), gzip-compressed byte for byte copies of the original files. They are
under CC BY 4.0: credit the UCI Machine Learning Repository and each dataset's
creators when you redistribute them.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from importlib.resources import files
from typing import TYPE_CHECKING, cast

import numpy as np

from ..core.docstrings import Chunks, shared

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["Table", "UCI_TABLES", "load_table", "landsat8_sample_path", "open_landsat8_sample", "rgb_byte_path", "open_rgb_byte", "open_ersst_sample", "open_abu_beach", "open_ndvi_series"]

_DATA = files(__name__) / "data"
UCI_TABLES = ("MagicGamma", "JapaneseVowels", "Pageblocks", "Sat", "Segmentation")
# Speaker (1..9) of the consecutive utterances in ae.train / ae.test (UCI description).
_VOWEL_SPEAKERS = {"ae.train": [30] * 9, "ae.test": [31, 35, 88, 44, 29, 24, 40, 50, 29]}


@dataclass(frozen=True)
class Table:
    """A feature table: ``data`` (n x d float64), class ``target`` (n,), and where it came from.

    Parameters
    ----------
    name : str
        The table's name.
    data : np.ndarray
        (n, d) features.
    target : np.ndarray
        (n,) class labels.
    feature_names : tuple of str
        One per feature.
    provenance : str
        Source and licence.
    """

    name: str
    data: np.ndarray
    target: np.ndarray
    feature_names: tuple[str, ...]
    provenance: str

    def normalised(self) -> np.ndarray:
        """``data`` scaled to [0, 1] per feature, as in the paper's experiments.

        Returns
        -------
        np.ndarray
            (n, d) ``(x - min) / (max - min)`` of each feature.
        """
        low, high = self.data.min(axis=0), self.data.max(axis=0)
        return (self.data - low) / (high - low)


def _lines(filename: str) -> list[str]:
    with (_DATA / f"{filename}.gz").open("rb") as raw, gzip.open(raw, "rt") as fh:
        return [line for line in fh.read().splitlines() if line.strip()]


def _split_rows(lines: list[str], sep: str | None = None) -> list[list[str]]:
    return [line.split(sep) for line in lines]


def _numeric(rows: list[list[str]]) -> np.ndarray:
    return np.array(rows, dtype=np.float64)


def _sat() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    values = _numeric(_split_rows(_lines("sat.trn") + _lines("sat.tst")))
    names = tuple(f"pixel{p}_band{b}" for p in range(1, 10) for b in range(1, 5))
    return values[:, :-1], values[:, -1].astype(int), names


def _magic() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    rows = _split_rows(_lines("magic04.data"), ",")
    names = ("fLength", "fWidth", "fSize", "fConc", "fConc1", "fAsym", "fM3Long", "fM3Trans", "fAlpha", "fDist")
    return _numeric([r[:-1] for r in rows]), np.array([r[-1] == "h" for r in rows], dtype=int), names


def _pageblocks() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    values = _numeric(_split_rows(_lines("page-blocks.data")))
    names = ("height", "length", "area", "eccen", "p_black", "p_and", "mean_tr", "blackpix", "blackand", "wb_trans")
    return values[:, :-1], values[:, -1].astype(int), names


def _segmentation() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    lines = _lines("segmentation.data")[3:] + _lines("segmentation.test")[3:]  # skip comments and header
    header = _lines("segmentation.data")[2].split(",")
    rows = _split_rows(lines, ",")
    classes = sorted({r[0] for r in rows})
    keep = [i for i, n in enumerate(header) if n not in ("REGION-PIXEL-COUNT", "SHORT-LINE-DENSITY-5", "SHORT-LINE-DENSITY-2")]
    values = _numeric([r[1:] for r in rows])[:, keep]
    return values, np.array([classes.index(r[0]) for r in rows]), tuple(header[i] for i in keep)


def _vowels() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    frames, speakers = [], []
    for filename, counts in _VOWEL_SPEAKERS.items():
        values = _numeric(_split_rows(_lines(filename)))
        separator = (values == 1.0).all(axis=1)  # each utterance ends with a row of ones
        block = np.concatenate([[0], np.cumsum(separator)[:-1]])
        if separator.sum() != sum(counts):
            raise ValueError(f"{filename}: expected {sum(counts)} utterances, found {separator.sum()}")
        speaker_of_block = np.repeat(np.arange(1, 10), counts)
        frames.append(values[~separator])
        speakers.append(speaker_of_block[block[~separator]])
    return np.vstack(frames), np.concatenate(speakers), tuple(f"lpc_cepstrum{i}" for i in range(1, 13))


_LOADERS = {"MagicGamma": _magic, "JapaneseVowels": _vowels, "Pageblocks": _pageblocks, "Sat": _sat, "Segmentation": _segmentation}
_SOURCES = {
    "MagicGamma": "UCI MAGIC Gamma Telescope (Bock et al.), magic04.data",
    "JapaneseVowels": "UCI Japanese Vowels (Kudo, Toyama, Shimbo 1999), ae.train + ae.test frames",
    "Pageblocks": "UCI Page Blocks Classification (Malerba), page-blocks.data",
    "Sat": "UCI Statlog (Landsat Satellite), sat.trn + sat.tst",
    "Segmentation": "UCI Image Segmentation (Brodley 1990), 16 features as in the paper",
}


def load_table(name: str) -> Table:
    """Load one of the paper's UCI tables by name (one of ``ppa_xr.datasets.UCI_TABLES``).

    Parameters
    ----------
    name : str
        "MagicGamma", "JapaneseVowels", "Pageblocks", "Sat" or "Segmentation".

    Returns
    -------
    Table
        The table with its provenance.

    Raises
    ------
    ValueError
        An unknown name, with the known ones.
    """
    if name not in _LOADERS:
        raise ValueError(f"unknown table {name!r}; choose one of {UCI_TABLES}")
    data, target, names = _LOADERS[name]()
    return Table(name, data, target, names, f"{_SOURCES[name]}. UCI Machine Learning Repository, CC BY 4.0.")


# Central wavelengths (micrometres) of the Landsat 8 OLI/TIRS bands in the sample.
LANDSAT8_BANDS = ("B1", "B2", "B3", "B4", "B5", "B6", "B7", "B9", "B10", "B11")
LANDSAT8_WAVELENGTH_UM = (0.443, 0.482, 0.562, 0.655, 0.865, 1.609, 2.201, 1.373, 10.895, 12.005)


def landsat8_sample_path() -> str:
    """Path of the bundled Landsat 8 sample: 10 bands (B1-B7, B9-B11), 320 x 320 px at 30 m,
    uint16, EPSG:32616, nodata 0, DEFLATE GeoTIFF (scene LC80200392015216LGN00, US public domain).

    Returns
    -------
    str
        The path of the GeoTIFF inside the installed package.
    """
    return str(_DATA / "landsat8_sample.tif")


def rgb_byte_path() -> str:
    """Path of rasterio's RGB.byte.tif test scene (Landsat 7 ETM+ subset, 3 bands uint8, 718 x 791 px
    at 300 m, EPSG:32618, nodata 0; BSD-3-Clause rasterio, Landsat US public domain), DEFLATE re-encoded.

    Returns
    -------
    str
        The path of the GeoTIFF inside the installed package.
    """
    return str(_DATA / "rgb_byte.tif")


@shared
def open_landsat8_sample(chunks: Chunks = None, masked: bool = False) -> xr.DataArray:
    """The Landsat 8 sample as a (band, y, x) DataArray labelled by band name, with wavelengths.

    ``chunks`` and ``masked`` are passed to :func:`rioxarray.open_rasterio`.

    Parameters
    ----------
    {{chunks}}
    {{masked}}

    Returns
    -------
    xr.DataArray
        (band, y, x) uint16 (float with ``masked``), bands labelled B1..B11, with ``wavelength``.
    """
    cube = _raster(landsat8_sample_path(), chunks, masked)
    cube.attrs.pop("long_name", None)  # the band names live in the band coordinate
    return cube.assign_coords(band=list(LANDSAT8_BANDS), wavelength=("band", list(LANDSAT8_WAVELENGTH_UM))).rename("landsat8")


@shared
def open_rgb_byte(chunks: Chunks = None, masked: bool = False) -> xr.DataArray:
    """RGB.byte.tif as a (band, y, x) DataArray (bands 1, 2, 3), nodata 0 (NaN when ``masked``).

    Parameters
    ----------
    {{chunks}}
    {{masked}}

    Returns
    -------
    xr.DataArray
        (band, y, x) uint8 (float with ``masked``).
    """
    return _raster(rgb_byte_path(), chunks, masked).rename("rgb")


def _raster(path: str, chunks: Chunks, masked: bool) -> xr.DataArray:
    import rioxarray

    return cast("xr.DataArray", rioxarray.open_rasterio(path, chunks=chunks, masked=masked))  # one GeoTIFF, no subdatasets: an array


@shared
def open_ersst_sample(chunks: Chunks = None) -> xr.Dataset:
    """NOAA ERSST v5 monthly sea-surface temperature, 2010-01 to 2012-12 on a 2-degree grid
    (time 36 x lat 89 x lon 180, land = NaN), as a Dataset with variable ``sst``.

    Use the months as features (``sst.ppa.fit(dim="time")``) for PPA of the
    seasonal cycle, as EOF analysis would. Source: xarray-tutorial's
    ``sst.mnmean.nc``; "No constraints on data access or use" (NOAA); cite
    Huang et al. 2017, doi:10.1175/JCLI-D-16-0836.1.

    Parameters
    ----------
    {{chunks}}

    Returns
    -------
    xr.Dataset
        ``sst`` (time, lat, lon).
    """
    import xarray as xr

    return xr.open_dataset(str(_DATA / "ersst_v5_2010_2012.nc"), engine="h5netcdf", chunks=chunks)


@shared
def open_abu_beach(chunks: Chunks = None) -> xr.Dataset:
    """The ABU abu-beach-4 hyperspectral scene (ROSIS-03, Pavia): 102 bands x 100 x 100 px, float32 in 0..1.

    A Dataset with ``reflectance`` (band, y, x) and ``anomaly`` (y, x; 1 on the
    anomalous targets of the anomaly-detection benchmark). Kang et al., IEEE
    TGRS 55(10), 2017 (see ``data/PROVENANCE.md``).

    Parameters
    ----------
    {{chunks}}

    Returns
    -------
    xr.Dataset
        ``reflectance`` (band, y, x) and ``anomaly`` (y, x).
    """
    import xarray as xr

    return xr.open_dataset(str(_DATA / "abu_beach_4.nc"), engine="h5netcdf", chunks=chunks)


@shared
def open_ndvi_series(chunks: Chunks = None) -> xr.Dataset:
    """A cloudy Sentinel-2 NDVI time series: 68 dates (2015-07 to 2017-12) x 40 x 40 px at 10 m, with its clear mask.

    About 62% of the values are clear, and no pixel is clear on every date: mask
    with ``ndvi.where(clear == 1)`` and fill the gaps (``fit(..., missing="fill")``,
    ``cube.ppa.fill``). A crop of eo-learn's TestEOPatch (Slovenia, EPSG:32633; MIT,
    contains modified Copernicus Sentinel data; see ``data/PROVENANCE.md``).

    Parameters
    ----------
    chunks : dict or int, optional
        Dask chunks of the series, e.g. ``{"time": -1, "y": 20, "x": 20}`` (None: opened lazily without dask).

    Returns
    -------
    xarray.Dataset
        ``ndvi`` (time, y, x; float32, every value as delivered, clouds included) and
        ``clear`` (time, y, x; 1 where the value is valid and cloud-free: eo-learn's
        ``IS_VALID`` and not its cloud mask ``CLM``), each with its CRS (``ds.ndvi.rio.crs``: EPSG:32633).
    """
    import rioxarray  # noqa: F401  (the .rio accessor)
    from xarray import open_dataset

    ds = open_dataset(str(_DATA / "ndvi_series_eolearn.nc"), engine="h5netcdf", chunks=chunks)
    return ds.rio.write_crs(ds.attrs["crs"])  # on each variable: ds.ndvi and what is made of it (fill, transform) are placed
