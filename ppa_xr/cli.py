"""``ppa-xr`` command line: fit, transform, inverse, report and demo on GeoTIFF / netCDF / zarr cubes.

    ppa-xr fit scene.tif model.nc --n-samples 200000 --degree 1 2 3 4 5
    ppa-xr fit LC08_B1.TIF LC08_B2.TIF ... LC08_B7.TIF model.nc     # one file per band
    ppa-xr transform scene.tif model.nc components.tif --n-components 3
    ppa-xr inverse components.tif model.nc reconstruction.tif
    ppa-xr report scene.tif model.nc
    ppa-xr demo                       # everything above on the bundled Landsat 8 sample
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

import numpy as np
import xarray as xr

from . import PPA, load_model
from .rasters import open_band_stack


def _open(paths: list[str], chunks: int, variable: str | None) -> xr.DataArray | xr.Dataset:
    """A raster (GeoTIFF, via rioxarray), a stack of single-band rasters, or a netCDF / zarr dataset, opened lazily."""
    if len(paths) > 1:
        return open_band_stack(paths, chunks={"x": chunks, "y": chunks})
    p = Path(paths[0])
    if p.suffix.lower() in (".tif", ".tiff", ".vrt", ".jp2"):
        import rioxarray

        return rioxarray.open_rasterio(p, chunks={"x": chunks, "y": chunks})
    ds = xr.open_zarr(p) if p.suffix == ".zarr" or p.is_dir() else xr.open_dataset(p, chunks={})
    return ds[variable] if variable else ds


def _write(da: xr.DataArray, path: str) -> None:
    p = Path(path)
    if p.suffix.lower() in (".tif", ".tiff"):
        da.rio.to_raster(p, lock=threading.Lock(), tiled=True, compress="deflate")
    elif p.suffix == ".zarr":
        da.to_dataset(name=da.name or "data").to_zarr(p, mode="w")
    else:
        da.to_dataset(name=da.name or "data").to_netcdf(p, engine="h5netcdf")


def _cmd_fit(args: argparse.Namespace) -> int:
    cube = _open(args.inputs, args.chunks, args.variable)
    degree = args.degree[0] if len(args.degree) == 1 else tuple(args.degree)
    model = cube.ppa.fit(dim=args.dim, n_samples=args.n_samples, random_state=args.seed, degree=degree, tails=args.tails)
    model.save(args.model)
    print(f"fitted PPA on {args.n_samples} sampled pixels x {model.n_features_in_} features; degrees {model.degrees_.tolist()}")
    print(f"saved {args.model}")
    return 0


def _cmd_transform(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    scores = _open(args.inputs, args.chunks, args.variable).ppa.transform(model, n_components=args.n_components)
    _write(scores, args.output)
    print(f"wrote {args.output}: {dict(scores.sizes)}")
    return 0


def _cmd_inverse(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    scores = _open(args.inputs, args.chunks, args.variable)
    if isinstance(scores, xr.DataArray) and "component" not in scores.dims:
        scores = scores.rename({scores.dims[0]: "component"})  # a GeoTIFF's bands are the components
    out = scores.ppa.inverse_transform(model)
    _write(out, args.output)
    print(f"wrote {args.output}: {dict(out.sizes)}")
    return 0


def _error_table(cube: xr.DataArray, models: dict[str, PPA], ks: range) -> None:
    """Reconstruction error per pixel (squared error summed over bands, mean over pixels) for each model and k
    (one dask computation)."""
    import dask

    maps = {(name, k): cube.ppa.reconstruction_error(model, k).mean() for name, model in models.items() for k in ks}
    values = dict(zip(maps, dask.compute(*maps.values())))
    names = list(models)
    print("error per pixel = squared error summed over bands, mean over valid pixels (squared input units)")
    print(f"{'k':>3}" + "".join(f"{n + ' error':>16}" for n in names) + f"{'100*' + names[0] + '/' + names[-1]:>16}")
    for k in ks:
        row = [float(values[(n, k)]) for n in names]
        print(f"{k:>3}" + "".join(f"{v:16.6g}" for v in row) + f"{100 * row[0] / row[-1]:16.1f}")


def _cmd_report(args: argparse.Namespace) -> int:
    model = load_model(args.model)
    cube = _open(args.inputs, args.chunks, args.variable)
    print(f"reconstruction error over the whole cube, PPA (degrees {model.degrees_.tolist()}) vs the PCA of its fitting sample")
    _error_table(cube, {"PPA": model, "PCA": model.pca_}, range(1, model.n_features_in_))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import open_landsat8_sample

    start = time.perf_counter()
    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    print(f"Landsat 8 sample: {dict(cube.sizes)} {cube.dtype}, {cube.rio.crs}, chunks {cube.data.chunksize}")
    ppa = cube.ppa.fit(n_samples=args.n_samples, random_state=args.seed)
    print(f"PPA fitted on {args.n_samples} random valid pixels; degrees per step: {ppa.degrees_.tolist()}")
    print(f"explained variance share, PPA: {np.round(ppa.explained_variance_ratio_[:4], 4).tolist()} ...")
    print("reconstruction error over all pixels (lazy, chunk-wise):")
    _error_table(cube, {"PPA": ppa, "PCA": ppa.pca_}, range(1, cube.sizes["band"]))
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        ppa.save(out / "landsat8_ppa.nc")
        _write(cube.ppa.transform(ppa, n_components=3), str(out / "landsat8_ppa_components.tif"))
        print(f"wrote {out / 'landsat8_ppa.nc'} and {out / 'landsat8_ppa_components.tif'}")
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ppa-xr", description="Principal Polynomial Analysis for raster cubes")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func, help: str, io: tuple[str, ...]) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        for arg in io:  # "inputs": one raster / netCDF / zarr, or several single-band rasters
            p.add_argument(arg, nargs="+" if arg == "inputs" else None)
        p.add_argument("--chunks", type=int, default=1024, help="x/y chunk size (default 1024)")
        p.add_argument("--variable", help="data variable of a netCDF/zarr input (default: all variables are bands)")
        p.add_argument("--seed", type=int, default=0)
        p.set_defaults(func=func)
        return p

    fit = command("fit", _cmd_fit, "fit a model on sampled pixels", ("inputs", "model"))
    fit.add_argument("--dim", default="band")
    fit.add_argument("--n-samples", type=int, default=200_000)
    fit.add_argument("--degree", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    fit.add_argument("--tails", default="clamp", choices=["clamp", "linear", "polynomial"])
    command("transform", _cmd_transform, "PPA components of a cube", ("inputs", "model", "output")).add_argument(
        "--n-components", type=int
    )
    command("inverse", _cmd_inverse, "cube back from components", ("inputs", "model", "output"))
    command("report", _cmd_report, "PPA vs PCA reconstruction error", ("inputs", "model"))
    demo = command("demo", _cmd_demo, "the whole workflow on the bundled Landsat 8 sample", ())
    demo.add_argument("--n-samples", type=int, default=50_000)
    demo.add_argument("--output-dir", help="also write the model and a 3-component GeoTIFF here")
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"ppa-xr {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
