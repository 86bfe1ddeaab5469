"""Which model made an output: the one text that names it, written into the output's attributes and read back.

A model is named by the digest of its parameters (:attr:`~ppa_xr.core.params.PPAParams.digest`), after the file it
was read from where it was: ``"model.nc (parameters 1a2b...)"``, or ``"parameters 1a2b..."``. Outputs keep the text as
their :data:`MODEL_ATTR` attribute (netCDF attributes, GeoTIFF tags), and whether their components are whitened as
:data:`WHITENED_ATTR`; the inverse reads both back to refuse components another model made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .estimator import PPA

#: the attribute of an output that names the model that made it (:func:`named`)
MODEL_ATTR = "ppa_xr_model"
#: the attribute of components that says whether they are whitened (1) or not (0)
WHITENED_ATTR = "ppa_xr_whitened"
#: what precedes the digest in the name
_PARAMETERS = "parameters "


def parameters(model: PPA) -> str:
    """``"parameters <digest>"``: the model's parameters, named by their digest."""
    return f"{_PARAMETERS}{model.params_.digest}"


def named(model: PPA) -> str:
    """The model's name in an output: its file where it was read from one, and :func:`parameters`."""
    source = getattr(model, "source_", None)
    return f"{source} ({parameters(model)})" if source else parameters(model)


def made_by(attrs: Mapping[Any, Any]) -> str | None:
    """The name (:func:`named`) in an output's attributes, or None where they hold none (a text)."""
    name = attrs.get(MODEL_ATTR)
    return name if isinstance(name, str) else None


def names(name: str, model: PPA) -> bool:
    """Whether a name written by :func:`named` names ``model``'s parameters: the digest after its last ``parameters``
    is theirs (whatever file either was read from)."""
    return name.rstrip(")").rsplit(_PARAMETERS, 1)[-1] == model.params_.digest
