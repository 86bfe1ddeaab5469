"""Shared numpydoc parameter descriptions: written once, filled into the docstrings that use them.

A docstring line holding only ``{{name}}`` is replaced by the description
``name``, indented as that line is (:func:`shared`).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeAlias

#: the type of a ``chunks`` parameter handed to rioxarray or xarray, as :data:`PARTS` ``"chunks"`` describes it
Chunks: TypeAlias = int | tuple | dict | None

PARTS = {
    "model_x": """
model : PPA
    A fitted model.
X : array-like of shape (n, d)
    Points in input space.""",
    "component": """
component : int
    Which curvilinear feature (1..d).""",
    "kernel_x": """
x : np.ndarray
    Points (``...`` x d), float32 or float64, in any layout (a band-first chunk stays band-first).
params : PPAParams
    The fitted parameters.""",
    "threads": """
threads : int, optional
    Kernel threads (default: all cores; the cube layer passes 1 per dask task).""",
    "kept": """
n_components : int
    Components kept, 1..d.""",
    "kept_or_share": """
n_components : int or float
    Components kept, 1..d, or a share of the variance in (0, 1) (``0.95``: the fewest leading components whose
    ``explained_variance_ratio_`` sum to 95%), as :meth:`~ppa_xr.PPA.transform` reads it.""",
    "density_values": """
values : np.ndarray
    (..., d) values, one column per feature.""",
    "density_sums": """
Parameters
----------
values : np.ndarray
    (d, n) values, feature-major (a band-first chunk's layout).

Returns
-------
np.ndarray
    (n,) ``sum_j log2 p_j(v_j)`` of each column.""",
    "row_weights": """
weights : np.ndarray, optional
    (n,) the rows' weights.""",
    "entropies": """
Returns
-------
np.ndarray
    (d,) marginal entropies in bits.""",
    "cube_model": """
obj : xr.DataArray or xr.Dataset
    A cube with the model's features.
model : PPA
    A fitted model.""",
    "fitted_dim": """
dim : hashable, optional
    The feature dimension, when not the fitted one.""",
    "chunks": """
chunks : dict or int, optional
    dask chunks (None: opened lazily without dask).""",
    "masked": """
masked : bool
    Nodata (0) as NaN.""",
    "accessor": """
Parameters
----------
obj : xr.DataArray or xr.Dataset
    The object ``.ppa`` is read from (xarray passes it).""",
    "mi_reduction": """
Returns
-------
MIReduction
    ``total`` and ``per_dimension``, in bits.

Raises
------
ValueError
    Quantized ``X`` with ``R`` given as an array, or shapes that differ.

Examples
--------
>>> multi_information_reduction(X_test, model).per_dimension  # doctest: +SKIP""",
    "model_file": """
Parameters
----------
path : str or os.PathLike
    A ``.nc`` or ``.zarr`` model written by :meth:`PPA.save`.
format : {"netcdf", "zarr"}, optional
    When the suffix does not say.

Returns
-------
PPA
    The fitted model, every array checked against its checksum.

Raises
------
ValueError
    A corrupt, truncated, foreign or newer-format file, named.""",
}
#: the sections of a marginal density's ``log2_density`` (the spacing and the histogram estimators alike)
PARTS["log2_density"] = "Parameters\n----------" + PARTS["density_values"] + "\n\nReturns\n-------\nnp.ndarray\n    (..., d) ``log2 p_j(v_j)``."
#: the whole docstring of a marginal density's ``log2_product_density`` (the spacing and the histogram estimators alike)
PARTS["log2_product_density"] = ("``sum_j log2 p_j(v_j)`` of each row of ``values``; NaN where a value is NaN.\n\nParameters\n----------"
                                 + PARTS["density_values"] + "\n\nReturns\n-------\nnp.ndarray\n    (...) ``sum_j log2 p_j(v_j)``.")


def shared(func: Callable) -> Callable:
    """Fill the ``{{name}}`` lines of ``func``'s docstring with :data:`PARTS` (indented as the line)."""

    def fill(match: re.Match) -> str:
        return textwrap.indent(PARTS[match.group(2)].strip("\n"), match.group(1))

    func.__doc__ = re.sub(r"^([ \t]*)\{\{(\w+)\}\}$", fill, func.__doc__ or "", flags=re.M)
    return func
