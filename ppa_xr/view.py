"""Figures and tables: a report as people read it (a markdown summary that fits a screen, and a figure),
and PPA's principal curves drawn over the data."""

from __future__ import annotations

import functools
import html
import io
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from .core.geometry import principal_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from .model import PPA

#: reconstruction-error rows a summary shows before summarising the rest (a 198-band cube gives 197 k)
SUMMARY_ROWS = 10


class SummaryTable(str):
    """A markdown table that is a ``str`` (``print`` it, write it to a file) and shows as a table in a notebook
    (``_repr_markdown_``, ``_repr_html_``) and as its text in IPython's console."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        """The table rows as an HTML table, the lines after it as a paragraph."""
        rows = [line for line in self.splitlines() if line.startswith("|") and not line.startswith("|---")]
        rest = " ".join(line for line in self.splitlines() if line.strip() and not line.startswith("|"))
        cells = [[html.escape(cell.strip()) for cell in row.strip("|").split(" | ")] for row in rows]
        head = "".join(f"<th>{cell}</th>" for cell in cells[0]) if cells else ""
        body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in cells[1:])
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>" + (f"<p>{html.escape(rest)}</p>" if rest else "")

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))


def summary_table(report: xr.Dataset) -> SummaryTable:
    """A markdown table of the report's totals and reconstruction errors, PPA beside PCA, that fits a screen:
    the errors for the first ``ppa_xr.information.SUMMARY_ROWS`` k, then the ratio's mean and worst over every k.

    Parameters
    ----------
    report : xr.Dataset
        A computed :func:`information_report`.

    Returns
    -------
    SummaryTable
        The markdown, a ``str``: ``print`` shows it as text, a notebook renders it as a table.
    """
    get = lambda name: float(report[name].values)  # noqa: E731
    k = int(report.attrs["n_components"])
    lines = [
        "| measure | PCA | PPA |",
        "|---|---|---|",
        f"| multi-information reduction (bits) | {get('total_mi_reduction_pca'):.4f} | {get('total_mi_reduction_ppa'):.4f} |",
        f"| per dimension (bits) | {get('mi_reduction_per_dim_pca'):.4f} | {get('mi_reduction_per_dim_ppa'):.4f} |",
    ]
    ks = _kept(report)
    pca, ppa = report["mse_pca"].sel(component=ks).values, report["mse_ppa"].sel(component=ks).values
    for j in range(min(len(pca), SUMMARY_ROWS)):
        lines.append(f"| reconstruction error per pixel, k = {ks[j]} | {pca[j]:.6g} | {ppa[j]:.6g} |")
    ratio = 100 * ppa / np.where(pca > 0, pca, np.inf)
    if len(pca) > SUMMARY_ROWS:
        lines.append(f"| ... k = {ks[SUMMARY_ROWS]} to {ks[-1]} | (report['mse_pca']) | (report['mse_ppa']) |")
    every = f"1..{len(ks)}" if np.array_equal(ks, np.arange(1, len(ks) + 1)) else ", ".join(map(str, ks))
    lines.append(f"| 100 x PPA / PCA error: mean over k = {every}, worst k | 100 | {ratio.mean():.1f}, "
                 f"{ratio.max():.1f} (k = {ks[int(np.argmax(ratio))]}) |")
    lines.append(f"| mean of the error map over every pixel, k = {k} | {float(report['error_pca'].mean()):.6g} | {float(report['error_ppa'].mean()):.6g} |")
    lines.append(f"\nReconstruction errors: squared error summed over bands, mean over the report's {report.attrs['sample_size']} sampled pixels "
                 f"(the error map's: over every pixel of the cube) ({report['mse_ppa'].attrs.get('units', 'squared input units')}).")
    if "span" in report.dims:  # a reduced (S-mode) model's report: say what its multi-information is of
        lines.append(f"Multi-information of {report.attrs['inputs']}.")
    return SummaryTable("\n".join(lines))


def _kept(report: xr.Dataset) -> np.ndarray:
    """The report's ``component`` labels that are counts of components kept below ``d`` (the inputs measured,
    ``entropy_input``; ``k = d`` keeps everything), in the report's order: its error curves' ``k``, also after a
    selection (``report.sel(component=[3, 4, 5])``)."""
    ks = report["component"].values
    return ks[ks < report["entropy_input"].size]


def require_matplotlib(what: str) -> None:
    """Refuse, with the install line, where matplotlib (the ``plot`` extra) cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise ImportError(f"{what} draws with matplotlib, which is not installed: pip install 'ppa_xr[plot]' (or matplotlib)") from err


def _shown(fig: Any) -> Any:
    """``fig``, made to show as PNG when it is a notebook cell's value. A figure made without pyplot (kept out of
    pyplot's registry, so nothing draws it twice or keeps it alive) has no display of its own until
    ``%matplotlib inline`` registers one: IPython then shows its text, ``<Figure size ...>``."""
    setattr(fig, "_repr_png_", functools.partial(_png, fig))
    return fig


def _png(fig: Any) -> bytes:
    """The figure as PNG bytes, as a notebook shows it (cropped to what is drawn)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return buffer.getvalue()


def _map(fig, slot, data: xr.DataArray, title: str, units: str, **kwargs) -> None:
    """One map panel: equal aspect, plain coordinates with their unit, the colour bar below it."""
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot(slot)
    data.plot(ax=ax, cbar_kwargs={"orientation": "horizontal", "label": units, "pad": 0.1, "shrink": 0.9}, **kwargs)
    ax.set_title(title, fontsize=10)
    ax.set_aspect("equal")
    ax.ticklabel_format(useOffset=False, style="plain")
    for axis, name in ((ax.xaxis, data.dims[1]), (ax.yaxis, data.dims[0])):
        axis.set_major_locator(MaxNLocator(3))
        axis.set_label_text(f"{name} ({_coordinate_units(data, name)})" if _coordinate_units(data, name) else str(name))
    ax.tick_params(labelsize=8)


def _coordinate_units(data: xr.DataArray, name) -> str | None:
    """A coordinate's unit: its ``units`` attribute, else the linear unit of a projected CRS (metre for UTM)."""
    units = data[name].attrs.get("units") if name in data.coords else None
    if units is None and str(name) in ("x", "y"):
        try:
            crs = data.rio.crs
            units = crs.linear_units if crs is not None and crs.is_projected else None
        except Exception:  # no rioxarray CRS on this array
            units = None
    return None if units is None else {"metre": "m", "meter": "m"}.get(units, units)


def plot_report(report: xr.Dataset, title: str | None = None, **figure_kwargs: Any) -> Figure:
    """The report as a figure (a ``matplotlib.figure.Figure``, shown once as a notebook cell's value): maps of the
    redundancy removed per pixel and of the squared error, each for PPA and as PPA minus PCA (green: PPA
    removes more redundancy; blue: PPA reconstructs better), and the per-component curves (marginal entropy;
    error per pixel for k = 1..d-1).

    Parameters
    ----------
    report : xr.Dataset
        A computed :func:`information_report`.
    title : str, optional
        Replaces the default title (the totals and what the sample was).
    **figure_kwargs
        Passed to :class:`matplotlib.figure.Figure` (e.g. ``figsize``).

    Returns
    -------
    matplotlib.figure.Figure
        Save it with ``fig.savefig(...)``.
    """
    require_matplotlib("plot_report")
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    k = int(report.attrs["n_components"])
    spatial = report["mi_reduction_ppa"].ndim == 2
    fig = Figure(figsize=figure_kwargs.pop("figsize", (17, 10) if spatial else (12, 4.5)), layout="constrained", **figure_kwargs)
    grid = fig.add_gridspec(2 if spatial else 1, 4, height_ratios=(1.5, 1) if spatial else None)
    if spatial:
        unit = report["error_ppa"].attrs.get("units", "squared input units")
        for i, (stem, label, units, cmap) in enumerate((("mi_reduction", "redundancy removed", "bit", "PRGn"),
                                                         ("error", f"squared error, k = {k}", unit, "RdBu_r"))):
            ppa = report[f"{stem}_ppa"]
            low, high = np.nanpercentile(ppa.values, [2, 98])
            _map(fig, grid[0, 2 * i], ppa, f"{label}, PPA", units, vmin=low, vmax=high)
            difference = ppa - report[f"{stem}_pca"]
            bound = float(np.nanpercentile(np.abs(difference.values), 98)) or 1.0
            better = "green: PPA removes more" if stem == "mi_reduction" else "blue: PPA better"
            _map(fig, grid[0, 2 * i + 1], difference, f"{label}, PPA minus PCA\n({better})", units, vmin=-bound, vmax=bound, cmap=cmap)
    curves = (("entropy", "marginal entropy (bit)", "component", report["component"].values),
              ("mse", "error per pixel (squared, summed over bands)", "components kept k", _kept(report)))
    for i, (stem, label, xlabel, ks) in enumerate(curves):
        ax = fig.add_subplot(grid[-1, 2 * i : 2 * i + 2])
        for method in ("pca", "ppa"):
            ax.plot(ks, report[f"{stem}_{method}"].sel(component=ks).values, marker="o" if len(ks) <= 40 else None, label=method.upper())
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if stem == "mse":
            ax.set_yscale("log")
        ax.legend()
    totals = ", ".join(f"{m.upper()} {float(report[f'mi_reduction_per_dim_{m}']):.3f}" for m in ("ppa", "pca"))
    fig.suptitle(title or f"PPA against PCA: redundancy removed per dimension (bits) {totals}\n{report.attrs.get('estimated_on', '')}", fontsize=11)
    return _shown(fig)


def plot_principal_curves(model: PPA, X: Any, pairs: Any = ((0, 1),), labels: Any = None, max_points: int = 5000, **figure_kwargs: Any) -> Figure:
    """Scatter of the data over chosen pairs of input dimensions, with PPA's first curve and its 2-D grid.

    ``X``: the data (a table, or sampled pixels, e.g. ``cube.ppa.sample()``);
    ``pairs``: (i, j) input dimensions per panel; ``labels``: names of the
    input dimensions. Needs matplotlib (``ppa_xr[plot]``); returns the figure.

    Parameters
    ----------
    model : PPA
        A fitted model.
    X : array-like of shape (n, d)
        The data to draw behind the curves.
    pairs : sequence of (int, int)
        Feature pairs, one panel each.
    labels : sequence of str, optional
        Feature names for the axes.
    max_points : int
        At most this many points drawn.
    **figure_kwargs
        Passed to :class:`matplotlib.figure.Figure` (e.g. ``figsize``).

    Returns
    -------
    matplotlib.figure.Figure
        The panels, shown once as a notebook cell's value (kept out of pyplot); save it with ``fig.savefig(...)``.
    """
    require_matplotlib("plot_principal_curves")
    from matplotlib.figure import Figure

    X = model._check_input(X).astype(np.float64)  # the model's features, in its order (a table's columns checked by name)
    labels = list(labels) if labels is not None else [f"feature {i}" for i in range(X.shape[1])]
    shown = X[np.random.default_rng(0).permutation(len(X))[:max_points]]
    curve = principal_grid(model.params_, 1, points=200)
    surface = principal_grid(model.params_, 2, points=11) if model.params_.n_features > 2 else None
    fig = Figure(figsize=figure_kwargs.pop("figsize", (5 * len(pairs), 4.5)), **figure_kwargs)
    axes = fig.subplots(1, len(pairs), squeeze=False)
    for ax, (i, j) in zip(axes[0], pairs):
        ax.scatter(shown[:, i], shown[:, j], s=2, alpha=0.3, color="0.5", label="data")
        if surface is not None:
            for line in (*surface, *np.swapaxes(surface, 0, 1)):
                ax.plot(line[:, i], line[:, j], color="tab:blue", lw=0.6, alpha=0.7)
        ax.plot(curve[:, i], curve[:, j], color="tab:red", lw=2, label="first curvilinear feature")
        ax.set_xlabel(labels[i])
        ax.set_ylabel(labels[j])
    axes[0, 0].legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _shown(fig)


def plot_scree(model: PPA, n_components: int | None = None, **figure_kwargs: Any) -> Figure:
    """The scree plot: each component's share of the variance, PPA beside its PCA, with North's rule-of-thumb errors.

    The bars are ``explained_variance_ratio_ +- explained_variance_error_ / total`` (``lambda sqrt(2 / n_eff)``, North
    et al. 1982, eofs' ``northTest``): components whose error bars overlap are mixed, and keeping one without its
    neighbour splits a pattern. Needs matplotlib (``ppa_xr[plot]``).

    Parameters
    ----------
    model : PPA
        A fitted model (a loaded one has no sample size, and so no error bars).
    n_components : int, optional
        Components drawn (default: up to 20).
    **figure_kwargs
        Passed to :class:`matplotlib.figure.Figure` (e.g. ``figsize``).

    Returns
    -------
    matplotlib.figure.Figure
        The figure, shown once as a notebook cell's value (kept out of pyplot).
    """
    require_matplotlib("plot_scree")
    from matplotlib.figure import Figure

    width = model.params_.n_features
    k = min(20, width) if n_components is None else model.kept(n_components)
    fig = Figure(figsize=figure_kwargs.pop("figsize", (6, 4)), **figure_kwargs)
    ax = fig.subplots()
    position = np.arange(1, k + 1)
    error = getattr(model, "explained_variance_error_", None)
    for shift, (name, ratio, variance) in zip((-0.15, 0.15), (("PPA", model.explained_variance_ratio_, model.explained_variance_),
                                                              ("PCA", model.pca_.explained_variance_ratio_, model.pca_.explained_variance_))):
        total = float(np.sum(variance)) or 1.0
        bars = None if error is None else variance[:k] * np.sqrt(2 / model.n_effective_) / total
        ax.errorbar(position + shift, 100 * ratio[:k], yerr=None if bars is None else 100 * bars, fmt="o", capsize=3, label=name)
    ax.set_xlabel("component")
    ax.set_ylabel("share of the variance (%)")
    ax.set_title("Scree plot with North's rule-of-thumb errors" if error is not None else "Scree plot")
    ax.legend(loc="best")
    fig.tight_layout()
    return _shown(fig)
