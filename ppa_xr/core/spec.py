"""The parameters of PPA, declared once.

Each field of :class:`Spec` is one parameter: its default, its check, the
model-file format version it appeared in (and the value a file written
before then implies), its documentation and its ``ppa-xr fit`` option. From
this one declaration come the estimator's ``__init__`` and docstring
(:class:`ppa_xr.PPA`), the core fit's arguments (:func:`ppa_xr.core.ppa.fit_params`
takes a ``Spec``), the model file's defaults for older formats, the command
line's options and the PCA baseline (:meth:`Spec.pca`).

A ``Spec`` is checked when it is made: every value passes its check (and
comes out as the plain Python value it stands for), so a ``Spec`` handed
between layers is valid and is never checked again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import checks
from .basis import TAILS
from .leading import LEADING_VECTORS

#: the highest polynomial degree accepted: the float64 round trip stays below
#: 1e-12 relative up to about 15 and reaches 1e-6 at 30 (Legendre fit, monomial kernels)
MAX_DEGREE = 20
#: rows the degree selection cross-validates on by default (``selection_samples``)
SELECTION_SAMPLES = 20_000
#: the first model-file format; parameters with no ``since`` have been in every file
FIRST_FORMAT = 2
#: every ``random_state``'s default (the estimator, the cube fit and sample, evaluate, the report, the CLI's
#: ``--seed``): the same call on the same data gives the same result; None draws fresh randomness
RANDOM_STATE = 0


@dataclass(frozen=True)
class Option:
    """How a parameter appears on the ``ppa-xr fit`` command line: ``--flag``, its help, and the form of
    its value (``type``, ``nargs``, ``choices``; ``switch``: a flag without value that sets True). A ``default``
    other than None replaces the parameter's default on the command line."""

    flag: str
    help: str
    type: Callable[[str], Any] | None = None
    nargs: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False
    default: Any = None


def parameter(default: Any, check: checks.Check, doc: str, since: int = FIRST_FORMAT, implied: Any = dataclasses.MISSING,
              option: Option | None = None) -> Any:
    """One parameter of :class:`Spec` (a dataclass field): ``implied`` is the value a model file older than
    format ``since`` stands for (default: ``default``)."""
    return field(default=default, metadata={
        "check": check, "doc": doc, "since": since, "implied": default if implied is dataclasses.MISSING else implied, "option": option,
    })


def _degree(value: Any) -> int | tuple[int, ...]:
    """An int in ``[1, MAX_DEGREE]``, or a non-empty sequence of them (sorted, without repeats, as a tuple)."""
    values = [value] if np.ndim(value) == 0 else list(np.asarray(value, dtype=object).ravel())
    if (isinstance(value, str) or not values
            or any(isinstance(g, (bool, np.bool_)) or not isinstance(g, (int, np.integer)) or not 1 <= g <= MAX_DEGREE for g in values)):
        raise ValueError(f"The 'degree' parameter of PPA must be an int in [1, {MAX_DEGREE}] or a non-empty sequence of them, got {value!r}")
    return int(values[0]) if np.ndim(value) == 0 else tuple(sorted({int(g) for g in values}))


_MATRIX = checks.square_matrix("noise_cov")


@dataclass(frozen=True, eq=False)
class Spec:
    """The parameters of a PPA fit, checked (module docstring). Field order is the estimator's signature."""

    n_components: int | float | None = parameter(None, checks.optional(checks.components_or_share("n_components")), """
        Components returned by :meth:`~ppa_xr.PPA.transform` (default: all ``d``), or a share of the variance in
        (0, 1): ``0.95`` keeps the fewest leading components whose variances sum to 95% of the total. A count is
        also where the default's validation checks its choice against PCA (``configuration="validated"``).""")
    degree: int | tuple[int, ...] = parameter((1, 2, 3, 4, 5), _degree, f"""
        A fixed polynomial degree for every step (1..{MAX_DEGREE}), or candidates from which each step picks
        one by cross-validation: the sample is split into ``n_folds`` folds of whole groups (``groups`` in
        :meth:`~ppa_xr.PPA.fit`, e.g. spatial blocks; random otherwise), and a higher degree than the lowest candidate
        is kept only when it lowers the held-out squared error by more than one standard error (groups as
        units). The selection uses at most ``selection_samples`` rows, drawn at random from a larger
        sample; the chosen polynomials are fitted on every row.""",
        option=Option("--degree", "polynomial degree, or candidates", type=int, nargs="+"))
    tails: str = parameter("clamp", checks.one_of("tails", TAILS), """
        The conditional mean beyond the projections seen in fit: held at its boundary value (``"clamp"``),
        continued along its tangent (``"linear"``), or the raw polynomial (``"polynomial"``, the paper;
        explodes far from the data).""", option=Option("--tails", "the curves beyond the fitted range", choices=TAILS))
    leading: str | Callable[..., np.ndarray] = parameter("pca", checks.one_of("leading", tuple(LEADING_VECTORS), callable_ok=True), """
        How each step's leading vector is found: ``"pca"`` (the leading eigenvector of the residual),
        ``"gd"`` (PPA-GD: gradient ascent on the sphere of the energy the step's polynomial explains, kept
        only where it beats ``"pca"`` on held-out groups), or a callable ``(covariance, residual) -> unit
        vector`` (m x m, n x m).""", option=Option("--leading", "how each step's leading vector is found", choices=tuple(LEADING_VECTORS)))
    n_folds: int = parameter(5, checks.count("n_folds", 2), """
        Folds of the degree selection (at most the number of groups).""",
        option=Option("--n-folds", "folds of the degree selection", type=int))
    max_curved: int | None = parameter(None, checks.optional(checks.count("max_curved", 0)), """
        At most this many steps get a polynomial; after them the fit is the PCA of the residual (no
        polynomial search), which makes fits at hundreds of bands fast where the curvature sits in the
        first steps.""", option=Option("--max-curved", "at most this many steps get a polynomial (faster at hundreds of bands)", type=int))
    selection_samples: int | None = parameter(SELECTION_SAMPLES, checks.optional(checks.count("selection_samples", 2)), """
        Rows the degree selection cross-validates on, drawn at random (with their groups) from a larger
        sample; ``None``: every row. Straight steps then cost no pass over the whole sample; more rows
        resolve fainter curves at a fit cost that grows with them.""",
        since=4, implied=None, option=Option("--selection-samples", "sampled pixels the degree selection uses", type=int))
    configuration: str = parameter("validated", checks.one_of("configuration", ("validated", "fixed")), """
        How the fit's configuration (``robust``, ``max_curved``) is chosen. ``"validated"``: by validating whole
        fits (``ppa_xr.core.candidates``): a fit on half of the groups (``groups`` in :meth:`~ppa_xr.PPA.fit`, a cube's
        spatial blocks; random rows otherwise) is measured on the other half, truncated after each of its
        curved steps (after none: PCA); a truncation is admitted where its held-out error is nowhere
        significantly more than 1% above its PCA's; the uncapped fit stands while admitted, unless a
        truncation lowers the held-out error relative to PCA, averaged over ``k``, by more than one standard
        error; otherwise the robust fit's truncations join, and the admitted candidate with the lowest
        average is fitted on the whole sample (``configuration_`` records it). Nothing is searched where the
        configuration is given (``robust=True``, a ``max_curved``, a single ``degree``) or with ``"fixed"``.""",
        since=8, implied="fixed", option=Option("--configuration", "how robust and max_curved are chosen: validated on held-out "
                                                                    "groups, or fixed as given (--robust or --max-curved fix them)",
                                                choices=("validated", "fixed")))
    whiten: bool = parameter(False, checks.flag("whiten"), """
        :meth:`~ppa_xr.PPA.transform` divides each component by its standard deviation on the fitting sample (and
        :meth:`~ppa_xr.PPA.inverse_transform` multiplies it back): Euclidean distances between whitened PPA features
        are the PPA metric (:func:`ppa_xr.geometry.metric`) to first order, so k-NN in a Pipeline uses it.
        Cube transforms (``.ppa``) stay in input units.""")
    standardize: bool = parameter(False, checks.flag("standardize"), """
        Divide each centred feature by its standard deviation on the fitting sample before the map
        (stored in the model as ``scale_``, undone by the inverse), for features in units of very
        different size, e.g. geopotential beside wind. Components, variances and reconstruction errors
        are then in standardized units, reconstructions in input units.""",
        since=3, option=Option("--standardize", "divide each band by its standard deviation first (bands in different "
                                                 "units); stored in the model and undone by inverse", switch=True))
    robust: bool = parameter(False, checks.flag("robust"), """
        Each step's degree is validated separately along every principal axis of its residual (a curve
        predicts only the axes where it wins on held-out groups, at a significance shared among the
        axes), and its polynomial is fitted within Tukey's far-out fences of the projections (beyond them
        the tails apply, so a few extreme pixels cannot lever it): for hundreds of bands, anomalous
        pixels and heavy-tailed noise (:doc:`/fidelity`).""",
        since=5, option=Option("--robust", "validate curves axis by axis and fit them within robust fences "
                                           "(hundreds of bands, anomalous pixels, heavy tails)", switch=True))
    noise_cov: np.ndarray | None = parameter(None, checks.optional(_MATRIX), """
        The noise covariance of the features (from a dark frame, a uniform area, or shift differences:
        ``cube.ppa.fit(noise_cov="shift")``). The map then acts on the noise-whitened ``W (x - mean)``
        (``W N W^T = I``), so components come ordered by signal-to-noise ratio (``snr_``): ``degree=1`` is
        the minimum noise fraction transform (MNF, Green et al. 1988), curved degrees a noise-adjusted
        PPA. Errors and variances are in noise units; the inverse returns input units. Not combined with
        ``standardize``.""",
        since=7, option=Option("--noise-cov", "noise-adjusted PPA (MNF with --degree 1): whiten the noise estimated from "
                                              "differences of neighbouring pixels, so components come ordered by signal-to-noise ratio",
                               choices=("shift",)))
    random_state: Any = parameter(RANDOM_STATE, checks.random_state, f"""
        Seeds the folds and draws: an int, a numpy ``Generator`` (used as it is, not saved) or None (fresh
        randomness: two fits of the same data may then choose other degrees). The default, {RANDOM_STATE}, is every
        ``random_state``'s in ppa_xr: the same call on the same data gives the same model.""",
        option=Option("--seed", "seed of the pixel sample and the folds", type=int))

    def __post_init__(self) -> None:
        for spec_field in dataclasses.fields(self):
            object.__setattr__(self, spec_field.name, spec_field.metadata["check"](getattr(self, spec_field.name)))
        if self.standardize and self.noise_cov is not None:
            raise ValueError("pass standardize=True or noise_cov, not both: noise whitening already puts every direction in noise units")

    @property
    def candidates(self) -> list[int]:
        """The candidate degrees, ascending."""
        return [self.degree] if isinstance(self.degree, int) else list(self.degree)

    @property
    def min_samples(self) -> int:
        """Smallest sample that determines every candidate polynomial (on each training part when selecting)."""
        top = max(self.candidates) + 1
        return 2 * top if len(self.candidates) > 1 else top + 1

    def for_data(self, n_samples: int | None, n_features: int) -> Spec:
        """Check what depends on the data: ``n_components``, ``noise_cov``'s shape, enough samples."""
        if isinstance(self.n_components, int):
            checks.check_components(self.n_components, n_features)
        if self.noise_cov is not None and self.noise_cov.shape != (n_features, n_features):
            raise ValueError(f"noise_cov must be ({n_features}, {n_features}) for {n_features} features, got shape {self.noise_cov.shape}")
        selecting = len(self.candidates) > 1
        if n_samples is not None and n_samples < self.min_samples:
            raise ValueError(
                f"degree up to {max(self.candidates)} needs at least {self.min_samples} samples "
                f"({'every training part of the cross-validation determines' if selecting else 'to determine'} each polynomial), "
                f"got {n_samples}; pass more samples or a lower degree."
            )
        if selecting and self.selection_samples is not None and self.selection_samples < self.min_samples:
            raise ValueError(f"selection_samples={self.selection_samples} cannot select among degrees up to {max(self.candidates)}: "
                             f"pass at least {self.min_samples} (or None for every sample)")
        return self

    def values(self) -> dict[str, Any]:
        """Every parameter, name -> value."""
        return {name: getattr(self, name) for name in names()}

    def replace(self, **changes: Any) -> Spec:
        """The same parameters with ``changes`` (checked)."""
        return dataclasses.replace(self, **changes)

    def pca(self) -> Spec:
        """The spec of the PCA baseline: the same parameters with straight steps only."""
        return self.replace(degree=1, leading="pca", robust=False, max_curved=None)


def names() -> list[str]:
    """The parameter names, in the estimator's signature order."""
    return [spec_field.name for spec_field in dataclasses.fields(Spec)]



def fields_of() -> tuple[dataclasses.Field, ...]:
    """The parameters' declarations (default, ``metadata``: check, doc, since, implied, option)."""
    return dataclasses.fields(Spec)


def implied_by(version: int) -> dict[str, Any]:
    """The parameters a model file of format ``version`` does not record (they appeared later), with the values it implies."""
    return {f.name: f.metadata["implied"] for f in fields_of() if f.metadata["since"] > version}


#: parameters that were once part of the spec, with the format versions that recorded them: files of those
#: versions still load, and the value they stored is dropped (it changed how the model was fitted, not the model)
RETIRED = {"validation": (6, 7)}
#: what to pass instead of a parameter that is gone or was renamed
INSTEAD = {
    "validation": "validation='transfer' is gone: where curves must not be trusted on other scenes use degree=1 (PCA) or "
                  "model.pca_, and check a scene with cube.ppa.evaluate(model)",
    "noise": "noise is now noise_cov: noise_cov='shift', a (d, d) covariance, or a cube of noise samples",
    "selection_rows": "selection_rows is selection_samples",
}


def check_names(given: Iterable[str]) -> None:
    """Refuse parameter names the spec does not declare, saying what to pass instead where that is known."""
    unknown = [name for name in given if name not in names()]
    if unknown:
        advice = "; ".join(INSTEAD.get(name, f"{name!r} is not a parameter of PPA") for name in unknown)
        raise TypeError(f"{advice} (the parameters are {', '.join(names())})")


def documented() -> str:
    """The numpydoc ``Parameters`` section of every parameter, from the declarations."""
    lines = ["Parameters", "----------"]
    for spec_field in fields_of():
        lines.append(f"{spec_field.name} : {_type_text(spec_field)}")
        lines.extend("    " + line.strip() for line in spec_field.metadata["doc"].strip("\n").splitlines())
    return "\n".join(lines)


def _type_text(spec_field: dataclasses.Field) -> str:
    default = spec_field.default
    kind = str(spec_field.type).replace(" | None", "").replace("Callable[..., np.ndarray]", "callable")
    kind = {"Any": "int, Generator or None", "np.ndarray": "array-like of shape (d, d)"}.get(kind, kind)
    return f"{kind}, default={default!r}"


Spec.__doc__ = f"""{Spec.__doc__}

{documented()}
"""
