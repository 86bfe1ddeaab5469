"""The ppa-xr command line: fit, transform, inverse, fill, report and demo on GeoTIFF / netCDF / zarr cubes.

    ppa-xr fit scene.tif model.nc --n-samples 200000 --degree 1 2 3 4 5
    ppa-xr fit LC08_B1.TIF LC08_B2.TIF ... LC08_B7.TIF model.nc     # one file per band
    ppa-xr transform scene.tif model.nc components.tif --n-components 3
    ppa-xr inverse components.tif model.nc reconstruction.tif
    ppa-xr fill cloudy.tif model.nc filled.tif          # missing values (NaN, nodata) estimated by the model
    ppa-xr report scene.tif model.nc report/          # report.md, report.png, report_maps.nc
    ppa-xr demo                       # everything above on the bundled Landsat 8 sample
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
import warnings
from pathlib import Path

import dask
import numpy as np
import xarray as xr

from .core import checks, spec
from .cube.rasters import OUTPUT_SUFFIXES, open_cube, with_grid_mapping, write_cube
from .model import PPA, load_model
from ._atomic import as_path, check_output, check_writable, recover_interrupted, refuse_inputs, replace_atomically
from .model.display import facts
from .model.file import check_path
from .model.labels import shown


def _cube(args: argparse.Namespace, model: PPA | None = None) -> xr.DataArray | xr.Dataset:
    """The input cube with the band labels the options ask for (``--bands``, ``--match-bands position``); a netCDF or
    zarr of variables (its bands) gets them as its variables' names, in order."""
    cube = open_cube(args.inputs, args.chunks, args.variable)
    bands, dim = getattr(args, "bands", None), (model.feature_dim_ if model is not None and model.feature_dim_ else getattr(args, "dim", "band"))
    variables = list(cube.data_vars) if isinstance(cube, xr.Dataset) else None
    if variables is None and dim not in cube.dims:
        return cube
    count = cube.sizes[dim] if variables is None else len(variables)
    if bands:
        if len(bands) != count:
            raise ValueError(f"--bands names {len(bands)} bands, the input has {count}")
    elif model is not None and args.match_bands == "position" and model.feature_labels_ is not None:
        if count != model.n_features_in_:
            raise ValueError(f"--match-bands position: the model has {model.n_features_in_} bands, the input {count}")
        bands = list(model.feature_labels_)
    if not bands:
        return cube
    return cube.assign_coords({dim: bands}) if variables is None else cube.rename(dict(zip(variables, bands)))


def _output(args: argparse.Namespace, path: str) -> Path:
    """Check an output before any work: known suffix, not an input (the model included), not existing unless --overwrite."""
    return check_output(path, OUTPUT_SUFFIXES, [*args.inputs, args.model], args.overwrite)


def _written(da: xr.DataArray, path: Path, args: argparse.Namespace) -> int:
    """Write a command's output ``da`` to ``path`` and say so: the command's last step, its exit status 0."""
    write_cube(da, path, overwrite=True, inputs=[*args.inputs, args.model])  # checked by _output before any work
    print(f"wrote {path}: {dict(da.sizes)}")
    return 0


def _spec_options(args: argparse.Namespace) -> dict:
    """The estimator parameters the fit options set, by the spec's declarations."""
    params = {}
    for declared in spec.fields_of():
        option = declared.metadata["option"]
        if option is not None:
            params[declared.name] = getattr(args, _dest(option))
    degree = params["degree"]
    params["degree"] = degree[0] if len(degree) == 1 else tuple(degree)
    return params


def _dest(option: spec.Option) -> str:
    return option.flag.lstrip("-").replace("-", "_")


def _cmd_fit(args: argparse.Namespace) -> int:
    model_path = check_path(args.model, None, args.overwrite, inputs=args.inputs)
    cube = _cube(args)
    params = _spec_options(args)
    model = cube.ppa.fit(dim=args.dim, n_samples=args.n_samples, progress=True, missing=args.missing, **params)
    model.save(model_path, overwrite=args.overwrite)
    labels = "" if model.feature_labels_ is None else " " + shown(model.feature_labels_)
    print(f"fitted PPA on {model.sample_.size} sampled pixels x {model.n_features_in_} features along {model.feature_dim_!r}{labels}; "
          f"degrees {model.degrees_.tolist()}; configuration {facts(model)['configuration']}")
    print(f"saved {model_path}")
    return 0


def _cmd_transform(args: argparse.Namespace) -> int:
    output = _output(args, args.output)
    model = load_model(args.model)
    scores = _cube(args, model).ppa.transform(model, n_components=args.n_components, check=True)
    return _written(scores, output, args)


def _cmd_fill(args: argparse.Namespace) -> int:
    """``ppa-xr fill``: the input with its missing values (NaN, nodata) filled by the model, observed ones as they were."""
    output = _output(args, args.output)
    model = load_model(args.model)
    filled = _cube(args, model).ppa.fill(model, n_components=args.n_components)
    return _written(filled, output, args)


def _cmd_inverse(args: argparse.Namespace) -> int:
    output = _output(args, args.output)
    model = load_model(args.model)
    scores = open_cube(args.inputs, args.chunks, args.variable)
    if isinstance(scores, xr.Dataset):  # `transform` writes one variable of components, which open_cube returns alone
        raise ValueError(f"{args.inputs[0]} has the variables {list(scores.data_vars)}, not one of components; pick the components with --variable")
    if "component" not in scores.dims:
        scores = scores.rename({scores.dims[0]: "component"})  # a GeoTIFF's bands are the components
    out = scores.ppa.inverse_transform(model)
    return _written(out, output, args)


def _error_table(curves: xr.Dataset) -> None:
    """PPA's and its PCA's error curves (``evaluate``'s Dataset) as a table."""
    print("k = components kept; error = squared reconstruction error summed over bands, mean over pixels (squared input units;")
    print("lower is better); the last column is 100 x PPA error / PCA error: below 100, PPA reconstructs better than PCA with the same k")
    print(f"{'k':>3}{'PPA error':>16}{'PCA error':>16}{'100*PPA/PCA':>16}")
    for k, ppa, pca, ratio in zip(curves.component.values, curves.mse_ppa.values, curves.mse_pca.values, curves.relative_error.values):
        print(f"{k:>3}{ppa:16.6g}{pca:16.6g}{ratio:16.1f}")


#: the files ``ppa-xr report`` writes into its folder, which it replaces whole
REPORT_FILES = ("report.md", "report.png", "report_maps.nc")


def _report_folder(args: argparse.Namespace) -> Path:
    """Check the report folder before any work: not a file, not an input nor holding one, new or holding only
    an earlier report (replaced whole, with ``--overwrite``), so nothing but a report is ever replaced."""
    folder = Path(os.path.abspath(as_path(args.output_dir, "the report folder")))  # "." and ".." named, links not followed
    recover_interrupted(folder)  # a report whose replacement was killed: the previous one is put back first
    if folder.is_symlink():
        raise ValueError(f"the report folder {folder} is a link; name the folder it points to (the report replaces its folder whole)")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"the report folder {folder} is a file; name a directory")
    refuse_inputs(folder, [*args.inputs, args.model], "the report folder")
    check_writable(folder, "the report folder")
    entries = sorted(os.listdir(folder)) if folder.is_dir() else []
    foreign = [name for name in entries if name not in REPORT_FILES]
    if foreign:
        raise FileExistsError(f"the report folder {folder} holds files a report does not write ({', '.join(foreign)}); a report "
                              "replaces its folder whole: name a new or empty folder")
    if entries and not args.overwrite:
        raise FileExistsError(f"the report folder {folder} holds a report; choose another folder or allow replacing it (--overwrite)")
    return folder


def _cmd_report(args: argparse.Namespace) -> int:
    """``ppa-xr report``: the information report's summary, figure and maps, written into its folder as one unit."""
    from .information import information_report, plot_report, summary_table
    from .view import require_matplotlib

    require_matplotlib("ppa-xr report (its report.png)")  # before the report is computed, not after
    folder = _report_folder(args)
    model = load_model(args.model)
    cube = _cube(args, model)
    report = information_report(cube, model, n_components=args.n_components)
    print(f"report on {dict(cube.sizes)}, {report.attrs['n_components']} components kept; PPA (degrees {model.degrees_.tolist()}) vs the PCA of its fitting sample", file=sys.stderr)
    report = report.compute()
    summary = summary_table(report)
    maps = report[[name for name in report.data_vars if report[name].ndim >= 2]]

    def write(tmp: Path) -> None:
        """The three files into a new folder, which then takes the old one's place."""
        tmp.mkdir()
        (tmp / REPORT_FILES[0]).write_text(f"# PPA report: {' '.join(args.inputs)}\n\n{report.attrs['estimated_on']}\n\n{summary}\n")
        plot_report(report).savefig(tmp / REPORT_FILES[1], dpi=100, format="png")
        with_grid_mapping(maps).to_netcdf(tmp / REPORT_FILES[2], engine="h5netcdf")

    folder.parent.mkdir(parents=True, exist_ok=True)
    replace_atomically(folder, write)
    print(summary)
    print(f"wrote {', '.join(str(folder / name) for name in REPORT_FILES)}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .datasets import open_landsat8_sample

    outputs = None
    if args.output_dir:
        out = Path(args.output_dir)
        if out.exists() and not out.is_dir():
            raise ValueError(f"--output-dir {out} is a file, not a directory")
        out.mkdir(parents=True, exist_ok=True)
        outputs = [check_output(out / name, (Path(name).suffix,), overwrite=args.overwrite) for name in ("landsat8_ppa.nc", "landsat8_ppa_components.tif")]
    start = time.perf_counter()
    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    print(f"Landsat 8 sample: {dict(cube.sizes)} {cube.dtype}, {cube.rio.crs}, chunks {cube.data.chunksize}")
    print(f"sampling {args.n_samples} valid pixels for the fit (one pass over the chunks):", file=sys.stderr)
    ppa = cube.ppa.fit(n_samples=args.n_samples, random_state=args.seed, progress=True)
    print(f"PPA fitted on {ppa.sample_.size} random valid pixels; degrees per step: {ppa.degrees_.tolist()} (the polynomial "
          f"degree of each of the d-1 steps: 1 is a straight step, as PCA's; higher bends that component's curve)")
    print(f"configuration (how many curved steps to keep, plain or robust): {facts(ppa)['configuration']}")
    print(f"explained variance share, PPA: {np.round(ppa.explained_variance_ratio_[:4], 4).tolist()} ...")
    print(f"explained variance share, PCA: {np.round(ppa.pca_.explained_variance_ratio_[:4], 4).tolist()} ... (the PCA of the same sample)")
    print("reconstruction error on every valid pixel the fit never saw (one pass over the chunks):", file=sys.stderr)
    curves = cube.ppa.evaluate(ppa, n_samples=None)
    print(f"reconstruction error on the {curves.attrs['n_pixels']} valid pixels outside the fitting sample (held out):")
    _error_table(curves)
    if outputs:
        ppa.save(outputs[0], overwrite=args.overwrite)
        write_cube(cube.ppa.transform(ppa, n_components=3), outputs[1], overwrite=True)
        print(f"wrote {outputs[0]} and {outputs[1]}")
    print(f"done in {time.perf_counter() - start:.1f} s")
    return 0


def _add_option(parser: argparse.ArgumentParser, declared: dataclasses.Field) -> None:
    """``ppa-xr fit``'s option of one parameter (:class:`~ppa_xr.core.spec.Option`), its default the parameter's."""
    option = declared.metadata["option"]
    if option is None:
        return
    if option.switch:
        parser.add_argument(option.flag, action="store_true", help=option.help)
        return
    default = declared.default if option.default is None else option.default
    shown = " ".join(map(str, default)) if isinstance(default, tuple) else default
    parser.add_argument(option.flag, type=option.type, nargs=option.nargs, choices=option.choices,
                        default=list(default) if isinstance(default, tuple) else default,
                        help=f"{option.help} (default {shown})" if default is not None else option.help)


def _in_flags(message: str) -> str:
    """A library error in the command line's words: a parameter's name becomes its option."""
    for declared in spec.fields_of():
        option = declared.metadata["option"]
        if option is not None:
            message = message.replace(f"The {declared.name!r} parameter of PPA", option.flag).replace(f"{declared.name}=", f"{option.flag} ")
    return message


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _count_or_share(text: str) -> int | float:
    """A component count (``3``) or a share of the variance in (0, 1) (``0.95``), as ``n_components`` takes."""
    try:
        return _positive(text)
    except ValueError:
        share = float(text)
    if not checks.is_share(share):
        raise argparse.ArgumentTypeError(f"must be a positive integer or a share of the variance in (0, 1), got {text}")
    return share


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (with a pointer to --help), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


@contextlib.contextmanager
def _scheduler(name: str):
    """Run the command's dask computations on ``threads``, ``processes`` or the cluster at an address,
    with dask's progress bar on stderr locally and the dashboard's address for a cluster."""
    if name in ("threads", "processes"):
        from dask.diagnostics import ProgressBar

        with dask.config.set(scheduler=name), ProgressBar(out=sys.stderr, dt=0.5):
            yield
        return
    try:
        from distributed import Client
    except ImportError as err:
        raise ValueError("--scheduler with an address needs the distributed package: pip install 'ppa_xr[distributed]'") from err
    if "://" not in name and ":" not in name:
        raise ValueError(f"--scheduler {name!r}: expected threads, processes or a scheduler address such as tcp://host:8786")
    try:
        client = Client(name, timeout="10s")
    except (OSError, TimeoutError, ValueError) as err:
        raise ValueError(f"cannot reach a dask scheduler at {name} ({err}); check the address, e.g. tcp://host:8786") from err
    with client:
        print(f"running on {name}; progress on its dashboard: {client.dashboard_link}", file=sys.stderr)
        yield


#: what each positional argument is, for --help and the docs' CLI reference
_POSITIONALS = {
    "inputs": "one GeoTIFF / netCDF / zarr cube, or several single-band rasters (one per band, e.g. LC08_*_B[1-7].TIF)",
    "model": "model file (.nc or .zarr)",
    "output": "output cube (.tif, .nc or .zarr)",
    "output_dir": "folder for report.md, report.png and report_maps.nc: a new one, or one holding only an earlier report "
                  "(replaced whole with --overwrite)",
}


def build_parser() -> argparse.ArgumentParser:
    """The ``ppa-xr`` argument parser (also read by the docs' CLI reference)."""
    parser = _Parser(prog="ppa-xr", description="Principal Polynomial Analysis for raster cubes", epilog=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func, help: str, io: tuple[str, ...], reads: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        for arg in io:
            p.add_argument(arg, nargs="+" if arg == "inputs" else None, help=_POSITIONALS[arg])
        p.add_argument("--scheduler", default="threads", metavar="threads|processes|ADDRESS",
                       help="where dask computes: threads (default), processes, or a distributed scheduler's address, HOST:PORT (e.g. 10.0.0.5:8786)")
        if reads:
            p.add_argument("--chunks", type=_positive, default=1024, help="x/y chunk size in pixels (default 1024)")
            p.add_argument("--variable", help="data variable of a netCDF/zarr input (default: a file's one variable, else all variables are bands)")
        if name in ("fit", "transform", "report", "fill"):
            p.add_argument("--bands", nargs="+", metavar="NAME", help="names of the input's bands, in order (default: the "
                           "file's band descriptions, or the _B<n> suffix of one-band files)")
        if name in ("transform", "report", "fill"):
            p.add_argument("--match-bands", choices=["label", "position"], default="label",
                           help="match the input's bands to the model's by label (default) or by position")
        p.add_argument("--overwrite", action="store_true", help="replace existing outputs (never an input)")
        p.set_defaults(func=func)
        return p

    fit = command("fit", _cmd_fit, "fit a model on sampled pixels", ("inputs", "model"))
    fit.add_argument("--dim", default="band", help="the band/feature dimension (default band)")
    fit.add_argument("--n-samples", type=_positive, help="pixels sampled for the fit (default: up to 200000, and at most half of a cube's valid pixels, the rest held out)")
    fit.add_argument("--missing", choices=["drop", "fill"], default="drop",
                     help="pixels with a missing value: left out (drop, default) or kept, their gaps filled as the fit goes (fill)")
    for declared in spec.fields_of():  # the estimator's parameters, as the spec declares them
        _add_option(fit, declared)
    command("transform", _cmd_transform, "PPA components of a cube", ("inputs", "model", "output")).add_argument(
        "--n-components", type=_count_or_share,
        help="components to write: a count, or a share of the variance such as 0.95 (the fewest that explain it; default: all)"
    )
    command("inverse", _cmd_inverse, "cube back from components", ("inputs", "model", "output"))
    command("fill", _cmd_fill, "a cube with its missing values filled by the model", ("inputs", "model", "output")).add_argument(
        "--n-components", type=_positive, help="fill from the first K components' manifold (default: every component)"
    )
    command("report", _cmd_report, "PPA vs PCA: redundancy and error maps, summary and figure into a folder",
            ("inputs", "model", "output_dir")).add_argument("--n-components", type=_positive, help="components kept for the error maps (default: the model's n_components, else 3; at most the bands less one)")
    demo = command("demo", _cmd_demo, "the whole workflow on the bundled Landsat 8 sample", (), reads=False)
    demo.add_argument("--n-samples", type=_positive, default=50_000, help="pixels sampled for the fit (default 50000)")
    demo.add_argument("--seed", type=int, default=spec.RANDOM_STATE, help=f"seed of the pixel sample and the folds (default {spec.RANDOM_STATE})")
    demo.add_argument("--output-dir", help="also write the model and a 3-component GeoTIFF here")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``ppa-xr``; returns the exit status (2 with a one-line message on bad input)."""
    args = build_parser().parse_args(argv)

    def one_line(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"ppa-xr {args.command}: {category.__name__}: {message}", file=sys.stderr)

    try:
        with _scheduler(args.scheduler), warnings.catch_warnings():
            warnings.showwarning = one_line  # warnings as one line each, without the source line
            return args.func(args)
    except (ValueError, TypeError, OSError, ImportError) as err:  # FileNotFoundError, FileExistsError included
        print(f"ppa-xr {args.command}: error: {_in_flags(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # every output is written to a temporary first: the interrupted one was removed
        print(f"ppa-xr {args.command}: interrupted; the output being written was removed, none is left half-written", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
