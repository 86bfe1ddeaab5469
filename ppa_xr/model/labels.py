"""What a model's features are called in a cube: one owner for the feature dimension, labels and coordinates.

A model fitted through the xarray layer keeps a :class:`FeatureLabels` as
``model.features_``: transforms use it to find, check and reorder the bands,
outputs of the inverse get the labels back, and model files store it.
"""

from __future__ import annotations

import numbers
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..core.checks import warn_user


#: labels a message lists before eliding the middle
SHOWN = 6


def as_text(labels: Any) -> list[str]:
    """Labels as their user wrote them: dates as dates (``2010-01-01``), not nanoseconds."""
    values = np.asarray(labels)
    return [str(v) for v in (np.datetime_as_string(values, unit="auto") if values.dtype.kind == "M" else values.tolist())]


def shown(labels: Any) -> str:
    """Labels as their user wrote them (:func:`as_text`), a long list cut in the middle."""
    text = as_text(labels)
    return "[" + ", ".join(text if len(text) <= SHOWN else text[: SHOWN - 2] + ["...", *text[-2:]]) + f"]{'' if len(text) <= SHOWN else f' ({len(text)} in all)'}"


def kinds(labels: Any) -> str:
    """The Python types of labels, e.g. ``int`` or ``int, str``: what tells labels of the same text apart."""
    values = np.asarray(labels)
    if values.dtype.kind == "M":  # as objects, nanoseconds would read as int
        return "datetime64"
    return ", ".join(sorted({type(v).__name__ for v in np.ravel(values.astype(object)).tolist()}))


def uniform(values: Any) -> np.ndarray:
    """Labels held as Python objects of one kind, all booleans, all whole numbers or all floats, as that numpy type
    (``bool``, ``int64``, ``float64``), pandas' dates (a stacked dimension's date level) as numpy's, which a model file
    stores exactly; numpy's variable-width strings (``StringDType``, as zarr gives them back) as fixed-width ones, as
    the cube fitted held them; other labels (strings, tuples, mixed kinds) as they are."""
    values = np.asarray(values)
    if values.dtype.kind == "T":
        return np.array(values.tolist(), dtype=str)
    items = values.ravel().tolist() if values.dtype == object else []
    return _of_one_kind(values, items) if items else values


def _of_one_kind(values: np.ndarray, items: list) -> np.ndarray:
    """:func:`uniform` of an array of Python objects, ``items`` its values."""
    if all(isinstance(v, (bool, np.bool_)) for v in items):
        return values.astype(bool)
    if all(isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_)) for v in items):
        return values.astype(np.int64) if all(-2**63 <= int(v) < 2**63 for v in items) else values
    if all(isinstance(v, (float, np.floating)) for v in items):
        return values.astype(np.float64)
    if all(isinstance(v, pd.Timestamp) and v.tzinfo is None for v in items):  # a stacked dimension's date level
        return np.array([v.to_datetime64() for v in items]).reshape(values.shape)
    return values


def _new_times(dim: Hashable, missing: np.ndarray, labels: np.ndarray, cube_labels: np.ndarray) -> str:
    """Why a model with time steps as features (T-mode) cannot take a cube of other time steps, and what can."""
    return (f"the cube lacks {len(missing)} of the model's time steps along {dim!r}: {shown(missing)} (the cube has "
            f"{shown(cube_labels)}). The {len(labels)} months "
            f"are the model's features (T-mode), so it cannot project others. To project new time steps, fit in S-mode (maps as "
            f"samples): model = cube.stack(cell=('lat', 'lon')).ppa.fit(dim='cell'), then new.stack(cell=('lat', 'lon')).ppa.transform(model)")


def calendar(labels: Any) -> tuple[str, bool] | None:
    """The calendar of dates as labels and whether they are cftime objects: ``("standard", False)`` for numpy's
    datetime64, ``(calendar, True)`` for cftime dates of one calendar; None for other labels."""
    values = np.asarray(labels)
    if values.dtype.kind == "M":
        return "standard", False
    found = {getattr(v, "calendar", None) for v in values.ravel().tolist()} if values.dtype == object and values.size else {None}
    return (str(found.pop()), True) if len(found) == 1 and None not in found else None


#: calendars whose dates from 1582-10-15 on are the same days (numpy's datetime64, labelled "standard", is proleptic Gregorian)
_GREGORIAN = {"standard", "gregorian", "proleptic_gregorian"}


def _other_calendar(dim: Hashable, model: tuple[str, bool], cube: tuple[str, bool]) -> str:
    """Why dates of another calendar (or other date objects) cannot be matched to the model's, and how to convert them."""
    def said(cal: tuple[str, bool]) -> str:
        return f"the {cal[0]!r} calendar as {'cftime dates' if cal[1] else 'numpy datetime64'}"
    align = ", align_on='date'" if "360_day" in (model[0], cube[0]) else ""
    gregorian = {model[0], cube[0]} <= _GREGORIAN and model[0] != cube[0]  # numpy's days are proleptic Gregorian
    why = ("the same days held as another type" if model[0] == cube[0] else "the same days from 1582-10-15 on, held as another type"
           if gregorian else "a date printed alike is another day in each")
    return (f"the model's labels along {dim!r} are dates of {said(model)}, the cube's of {said(cube)}: {why}, "
            f"so none can be matched. Convert the cube to the model's calendar: "
            f"cube.convert_calendar({model[0]!r}, dim={str(dim)!r}, use_cftime={model[1]}{align}) (xarray; dates the model's "
            f"calendar lacks are dropped), or fit the model on the cube's calendar")


def in_levels(index: pd.Index, levels: Any) -> pd.Index:
    """A stacked ``index`` with its levels in the order of ``levels`` (names) where it stacks the same levels in another
    order (``cell = (x, y)`` beside ``(y, x)``), so that tuples are compared level by level, by name: on a grid with the
    same labels along both, the tuples would match, transposed. Any other index as it is."""
    if (isinstance(index, pd.MultiIndex) and levels is not None and list(map(str, index.names)) != list(map(str, levels))
            and sorted(map(str, index.names)) == sorted(map(str, levels))):
        return index.reorder_levels([str(name) for name in levels])
    return index


def _duplicates(labels) -> list:
    values, counts = np.unique(np.asarray([str(v) for v in labels]), return_counts=True)
    return values[counts > 1].tolist()


def check_matrix_labels(matrix: Any, labels: Any, what: str = "noise_cov") -> None:
    """Refuse a labelled (d, d) matrix, a pandas DataFrame, whose rows or columns are not the features' ``labels`` in
    their order: it is read by position. One labelled 0..d-1 (pandas' default) or features without labels pass."""
    if labels is None or not hasattr(matrix, "index") or not hasattr(matrix, "columns"):
        return
    want = np.asarray(labels).tolist()
    for side, index in (("rows", matrix.index), ("columns", matrix.columns)):
        got = index.tolist()
        if got != want and got != list(range(len(got))):
            raise ValueError(f"{what}'s {side} are labelled {shown(got)}, and the features are {shown(want)}: a covariance is read "
                             f"by position, in the features' order; pass {what}=N.loc[labels, labels] with the features' labels "
                             "in order (e.g. cube.band.values)")


@dataclass(frozen=True, eq=False)
class FeatureLabels:
    """The feature dimension ``dim``, its ``labels`` (None: by position) and other per-feature coordinates.

    ``levels`` names the levels when the labels are tuples of a stacked
    (MultiIndex) dimension, as in EOF analysis with grid cells as features;
    ``variables``: the features were a Dataset's data variables.

    Parameters
    ----------
    dim : hashable
        The feature dimension.
    labels : np.ndarray, optional
        One label per feature (None: features by position).
    coords : dict of str to np.ndarray
        Other per-feature coordinates (e.g. wavelengths).
    levels : tuple of str, optional
        Level names of a stacked (MultiIndex) dimension.
    variables : bool
        The features were a Dataset's data variables.
    """

    dim: Hashable
    labels: np.ndarray | None = None
    coords: dict[str, np.ndarray] = field(default_factory=dict)
    levels: tuple[str, ...] | None = None
    variables: bool = False

    def __post_init__(self) -> None:
        """Labels and coordinates of one kind as its numpy type (:func:`uniform`); refuse labels that could not find
        their features: NaN, or repeated."""
        if self.labels is not None and not self.levels:
            object.__setattr__(self, "labels", uniform(self.labels))
        object.__setattr__(self, "coords", {name: uniform(values) for name, values in self.coords.items()})
        if self.labels is not None and any(isinstance(v, (float, np.floating)) and np.isnan(v) for v in np.ravel(self.labels).tolist()):
            raise ValueError(f"a label along {self.dim!r} is NaN, which equals no label (a transform could never find that "
                             f"feature): give every feature a label, e.g. cube.assign_coords({self.dim}=[...])")
        if self.labels is not None and (dups := _duplicates(self.labels)):
            raise ValueError(
                f"the labels along {self.dim!r} repeat: {dups}; give every feature a distinct label, "
                f"e.g. cube.assign_coords({self.dim}=[...])"
            )

    @classmethod
    def of(cls, da: xr.DataArray, dim: Hashable, variables: bool = False) -> FeatureLabels:
        """The labels of ``da`` along ``dim`` (refusing repeated labels).

        Parameters
        ----------
        da : xr.DataArray
            A cube with its features along ``dim``.
        dim : hashable
            The feature dimension.
        variables : bool
            The features were a Dataset's data variables.

        Returns
        -------
        FeatureLabels
            Its labels (None where ``dim`` has no coordinate), stacked levels and other per-feature coordinates.
        """
        if dim not in da.coords:
            return cls(dim, variables=variables)
        index = da.indexes.get(dim)
        levels = tuple(str(n) for n in index.names) if isinstance(index, pd.MultiIndex) else None
        level_names = set(index.names) if isinstance(index, pd.MultiIndex) else set()
        coords = {
            str(name): coord.values for name, coord in da.coords.items()
            if coord.dims == (dim,) and name != dim and name not in level_names
        }
        return cls(dim, np.asarray(da[dim].values), coords, levels, variables)

    def renamed(self, dim: Hashable) -> FeatureLabels:
        """The same labels along another dimension.

        Parameters
        ----------
        dim : hashable
            The new feature dimension.

        Returns
        -------
        FeatureLabels
            These labels, coordinates and levels along ``dim``.
        """
        return FeatureLabels(dim, self.labels, self.coords, self.levels, self.variables)

    def select(self, da: xr.DataArray, n_features: int) -> xr.DataArray:
        """``da``'s features in the fitted order: reordered by label, the model's bands taken from a cube that
        has more (the others named in a warning), or refused with what is missing.

        Parameters
        ----------
        da : xr.DataArray
            A cube with its features along this ``dim``.
        n_features : int
            The features the model was fitted on.

        Returns
        -------
        xr.DataArray
            ``da`` with the model's features in the model's order.

        Raises
        ------
        ValueError
            Repeated labels, features the model needs that the cube lacks, or another count of unlabelled features.
        """
        if self.labels is not None and self.dim in da.coords:
            cube_labels = self._cube_labels(da)
            have, want = (labels.astype(np.result_type(cube_labels, self.labels)).tolist() if cube_labels.dtype.kind == self.labels.dtype.kind == "M"
                          else labels.tolist() for labels in (cube_labels, self.labels))  # dates as dates at any resolution (s, ns)
            if dups := _duplicates(cube_labels):  # as the cube holds them (dates as dates, not nanoseconds)
                raise ValueError(f"the cube's labels along {self.dim!r} repeat: {dups}; the model cannot tell those features apart: "
                                 f"keep one of each, cube.drop_duplicates({str(self.dim)!r})")
            if have != want:
                missing = self.labels[[label not in have for label in want]]
                extra = cube_labels[[label not in want for label in have]]
                if len(missing):
                    raise ValueError(self._lacking(missing, extra, cube_labels, n_features))
                if len(extra):
                    warn_user(f"the cube has {len(extra)} features along {self.dim!r} the model was not fitted on, left out: {shown(extra)}")
                order = [have.index(label) for label in want]
                da = da.isel({self.dim: order}).assign_attrs(_per_feature(da.attrs, order, len(have)))  # the model's features, in its order
            self._warn_unlike(da)
        else:
            self._warn_by_position(da)
        if da.sizes[self.dim] != n_features:
            raise ValueError(f"the model was fitted on {n_features} features, the cube has {da.sizes[self.dim]} along {self.dim!r}")
        return da

    def _warn_by_position(self, da: xr.DataArray) -> None:
        """Warn where only one side labels the features, so they are matched by position (scikit-learn warns alike of
        a table without the fitted feature names): a cube built from numpy arrays in another band order is silently
        another cube."""
        if self.labels is not None and self.dim not in da.coords:
            warn_user(f"the cube has no labels along {self.dim!r}, and the model was fitted on the labelled features "
                      f"{shown(self.labels)}: the cube's are taken by position, as the model's in its order. Check their "
                      f"order and label them so, cube.assign_coords({self.dim}=model.feature_labels_), to match them by label")
        elif self.labels is None and self.dim in da.coords:
            warn_user(f"the cube's features along {self.dim!r} are labelled {shown(da[self.dim].values)}, and the model was "
                      f"fitted without labels (on a numpy table or an unlabelled cube): they are taken by position. Check that "
                      f"they are the fitting features in their order; fitting on a labelled cube (or a DataFrame) matches them "
                      f"by label")

    def _cube_labels(self, da: xr.DataArray) -> np.ndarray:
        """The cube's labels along the feature dimension; a stacked one's tuples with their levels in the model's order
        (:func:`in_levels`); dates of another calendar than the model's refused, saying how to convert them."""
        index = da.indexes.get(self.dim)
        labels = in_levels(index, self.levels).to_numpy() if self.levels and isinstance(index, pd.MultiIndex) else da[self.dim].values
        if (ours := calendar(self.labels)) and (theirs := calendar(labels)) and ours != theirs:
            raise ValueError(_other_calendar(self.dim, ours, theirs))
        return labels

    def _warn_unlike(self, da: xr.DataArray) -> None:
        """Warn where a per-feature coordinate of the cube (e.g. ``wavelength``) differs from the model's under the same
        labels (another sensor's ``B5``): outputs carry the model's, and the features may not be the model's."""
        for name, values in self.coords.items():
            if name not in da.coords or da[name].dims != (self.dim,) or da[name].chunks is not None:  # a lazy one is not computed here
                continue
            cube = da[name].values
            if values.dtype.kind in "iuf" and cube.dtype.kind in "iuf":
                unlike = ~np.isclose(cube, values, rtol=0.01, equal_nan=True)
            elif values.dtype.kind in "UST" and cube.dtype.kind in "UST":  # names (common_name; "T": a zarr's); not per-scene metadata (proj:transform)
                unlike = cube != values
            else:
                continue
            if unlike.any():
                labels = as_text(da[self.dim].values[unlike])
                pairs = ", ".join(f"{label}: {a} (model {b})" for label, a, b in zip(labels, cube[unlike], values[unlike]))
                warn_user(f"the cube's {name!r} differs from the model's at features the labels match along {self.dim!r}: {pairs}; "
                          f"check that they are the features the model was fitted on (another sensor's bands under the same "
                          f"labels?): outputs carry the model's {name!r}", UserWarning)


    def _lacking(self, missing: np.ndarray, extra: np.ndarray, cube_labels: np.ndarray, n_features: int) -> str:
        """Why a cube that lacks some of the model's features cannot be transformed, and what to do."""
        assert self.labels is not None  # only labelled models miss labels
        if self.labels.dtype.kind == "M" and np.asarray(cube_labels).dtype.kind == "M":
            return _new_times(self.dim, missing, self.labels, cube_labels)
        same_text = set(as_text(missing)) & set(as_text(extra))
        types = (f" (the same text, other types: the model's labels are {kinds(self.labels)}, the cube's {kinds(cube_labels)})"
                 if same_text else "") + self._other_names(cube_labels) + self._other_longitudes(cube_labels)
        return (f"the cube lacks {len(missing)} of the model's {n_features} features along {self.dim!r}: {shown(missing)}; "
                f"the model has {shown(self.labels)}, the cube {shown(cube_labels)}{types}. Open a cube with those features; "
                + self._relabel_advice())

    def _relabel_advice(self) -> str:
        """How a cube of other labels is matched to the model: stacked grid cells by selecting the model's cells before
        stacking (by position, each cell would be read as another), other features by labelling them by position."""
        if self.levels:
            levels = ", ".join(f"{name}=grid.{name}" for name in self.levels)
            return (f"the cube's cells along {self.dim!r} are not the model's: select the model's cells before stacking, "
                    f"cube.sel({levels}).stack({self.dim}={self.levels}) with grid = model.to_xarray().components"
                    f".unstack({self.dim!r}) (regrid a cube of another grid onto it first), or fit a model on the cube's "
                    f"grid; not by position, which would read each cell as another")
        return (f"or, when the cube holds the model's features in its order under other labels (e.g. a file's 1..n), label "
                f"them as the model's (Python: cube.assign_coords({self.dim}=model.feature_labels_); command line: "
                f"--match-bands position)")

    def _other_longitudes(self, cube_labels: np.ndarray) -> str:
        """Where a stacked cube's longitudes are the model's in the other convention (-180..180 against 0..360), the
        conversion that matches them."""
        assert self.labels is not None
        for i, name in enumerate(self.levels or ()):
            if name.lower() not in ("lon", "longitude"):
                continue
            ours, theirs = ({float(label[i]) for label in labels} for labels in (self.labels, cube_labels))
            if ours != theirs and {v % 360 for v in ours} == {v % 360 for v in theirs}:
                to = f"cube.{name} % 360" if min(ours) >= 0 else f"(cube.{name} + 180) % 360 - 180"
                return (f" (the cube's {name!r} runs {min(theirs):g}..{max(theirs):g}, the model's {min(ours):g}..{max(ours):g}: "
                        f"the same longitudes in another convention; convert them before stacking, "
                        f"cube.assign_coords({name}={to}).sortby({name!r}))")
        return ""

    def _other_names(self, cube_labels: np.ndarray) -> str:
        """Where the cube's labels are the model's features under another of their per-feature coordinates (STAC's
        ``common_name``: odc-stac's ``blue`` for stackstac's ``B2``), the relabelling by name that matches them."""
        have = np.asarray(cube_labels).tolist()
        for name, values in self.coords.items():
            names = np.asarray(values).tolist()
            if len(set(names)) == len(names) and have and set(have) <= set(names):
                mapping = {n: label for n, label in zip(names, np.asarray(self.labels).tolist()) if n in have}
                return (f" (they are the model's features by their {name!r}: relabel them by name, e.g. cube.rename("
                        f"{dict(list(mapping.items())[:2])}...) for a Dataset's variables, or "
                        f"cube.assign_coords({self.dim}=[m[b] for b in cube.{self.dim}.values]) with m = "
                        f"dict(zip(model.features_.coords[{name!r}], model.feature_labels_)); not by position)")
        return ""

    def attach(self, out: xr.DataArray) -> xr.DataArray:
        """Put the labels and coordinates back on an output with the feature dimension.

        Parameters
        ----------
        out : xr.DataArray
            An output with the features along this ``dim``, in the model's order.

        Returns
        -------
        xr.DataArray
            ``out`` with the labels (a stacked dimension's levels too) and per-feature coordinates.
        """
        if self.labels is not None:
            if self.levels:
                index = pd.MultiIndex.from_tuples([tuple(v) for v in self.labels], names=list(self.levels))
                out = out.assign_coords(xr.Coordinates.from_pandas_multiindex(index, self.dim))
            else:
                out = out.assign_coords({self.dim: self.labels})
        return out.assign_coords({name: (self.dim, values) for name, values in self.coords.items()})


#: attributes that rioxarray reads and writes as one value per band (band descriptions, units)
_PER_FEATURE_ATTRS = ("long_name", "units")


def _per_feature(attrs: dict, order: list[int], n: int) -> dict:
    """The per-band attributes (:data:`_PER_FEATURE_ATTRS`, a tuple with one value per feature) taken in ``order``, as the
    features are: a reordered or reduced cube otherwise keeps them in the old order (``rio.to_raster`` would describe
    each band as another)."""
    return {key: tuple(attrs[key][i] for i in order) for key in _PER_FEATURE_ATTRS
            if isinstance(attrs.get(key), (tuple, list)) and len(attrs[key]) == n}
