"""How a fitted model shows itself: one summary, as a line of text (``repr``) and as HTML (notebooks).

The facts shown: the features and their labels, the degree of each step,
the tails, the whitening (standardized or noise units), the fitting sample
(its size and cubes) and the fitting sample's error curve against its own
PCA, ``100 e_PPA(k) / e_PCA(k)``, measured when the model was fitted
(``fit_error_ratio_``, stored in the model file; ``cube.ppa.evaluate(model)``
measures it on any cube).
"""

from __future__ import annotations

import html

import numpy as np

from .labels import as_text

#: features, steps and error-curve entries a summary lists before eliding the rest
SHOWN = 12


def _elided(values, n: int = SHOWN) -> str:
    values = list(values)
    return ", ".join(map(str, values[:n])) + (", ..." if len(values) > n else "")


def facts(model) -> dict[str, str]:
    """The summary of a fitted :class:`~ppa_xr.PPA`, name -> text, in display order."""
    labels = model.feature_labels_
    sample = model.sample_
    out = {
        "features": f"{model.n_features_in_} ({_elided(as_text(labels)) if labels is not None else 'unlabelled'})"
        + (f" along {model.feature_dim_!r}" if model.feature_dim_ is not None else ""),
        "degrees per step": f"[{_elided(model.degrees_.tolist())}], {int((model.degrees_ > 1).sum())} curved",
        "tails": model.tails,
        **({"configuration": _configuration(model.configuration_)} if hasattr(model, "configuration_") else {}),
        "units": _units(model),
    }
    params = model.params_
    if params.reduced:
        out["subspace"] = _subspace(model)
    weighed = _weights(model)
    if weighed:
        out["weights"] = weighed
    if getattr(model, "noise_cov_", None) is not None:
        out["noise covariance"] = noise_description(model.noise_cov_)
    if sample is not None:
        cubes = len(sample.cubes)
        out["fitting sample"] = f"{sample.size} pixels" + (f" pooled over {cubes} cubes" if cubes > 1 else "")
    if hasattr(model, "snr_"):
        out["SNR per component"] = _elided(np.round(model.snr_, 2).tolist())
    curve = getattr(model, "fit_error_ratio_", None)
    out["error vs its PCA (fitting sample)"] = (
        _elided(f"k={k}: {v:.1f}%" for k, v in enumerate(curve, start=1)) if curve is not None else "not stored (cube.ppa.evaluate(model))"
    )
    return out


def _subspace(model) -> str:
    """``S-mode: fitted in the 35-dimensional span of the samples; curves on the leading 3``: a reduced model's span."""
    params = model.params_
    r, d = params.n_features, params.n_inputs
    used = d if params.used is None else int(params.used.sum())
    curved = params.curved_steps()
    where = f"curves on the leading {curved[-1] + 1}" if curved else "no curve (degree selection kept the EOFs)"
    kind = "S-mode" if r < used else "features weighed"
    dropped = f"; {d - used} features left out (NaN at every sample or weight 0: NaN in patterns and reconstructions)" if used < d else ""
    return f"{kind}: fitted in the {r}-dimensional span of the samples; {where}{dropped}"


def _weights(model) -> str | None:
    """Which kind of weights the fit used: the samples' (rows, pixels) or the features' (grid-cell areas)."""
    root = model.params_.feature_root
    if root is not None and not np.all((root == 0) | (root == 1)):
        return "features (e.g. grid-cell areas): the covariance of the data times sqrt(w_j)"
    if getattr(model, "weighted_samples_", False):
        return "samples (e.g. pixel areas): weighted mean, covariances and fits"
    return None


def _units(model) -> str:
    """What components and errors are measured in: ``noise units (errors in squared noise units)``."""
    units = model.whitened_units_ or "input units"
    return f"{units} (variances and errors in squared {units})"


def noise_description(noise: np.ndarray) -> str:
    """A noise covariance in one line, for a summary in place of its ``d x d`` values: shape, trace, condition number."""
    eigenvalues = np.linalg.eigvalsh(noise)
    condition = eigenvalues[-1] / eigenvalues[0] if eigenvalues[0] > 0 else np.inf
    return f"{noise.shape[0]} x {noise.shape[1]}, trace {np.trace(noise):.4g}, condition number {condition:.3g}"


class Described:
    """A parameter shown by a description instead of its value (a ``d x d`` noise covariance in the parameter repr)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"<{self.text}>"


def _configuration(choice: dict) -> str:
    """``robust=False, max_curved=3 (validated on held-out groups)``: the configuration fitted and how it was chosen, with
    ``, last curve x0.4`` where the last curve was shrunk and ``, tied components 8-9 turned toward PCA's`` where runs of
    tied straight components were turned (the first three runs named, the rest counted)."""
    how = "validated on held-out groups" if choice.get("validated") else "as given"
    shrunk = f", last curve x{choice['shrink']:g}" if choice.get("shrink", 1.0) < 1 else ""
    return f"robust={choice.get('robust')}, max_curved={choice.get('max_curved')}{shrunk}{_turned(choice.get('turned', []))} ({how})"


def _turned(runs: list) -> str:
    """``, tied components 8-9, 12-14 turned toward PCA's`` for the recorded runs; ``, ... and 22 more runs`` past
    three."""
    if not runs:
        return ""
    named = ", ".join(f"{first}-{last}" for first, last in runs[:3])
    more = f" and {len(runs) - 3} more runs" if len(runs) > 3 else ""
    return f", tied components {named}{more} turned toward PCA's"


def text(model) -> str:
    """The summary as indented lines, for ``repr``."""
    return "\n".join(f"  {name}: {value}" for name, value in facts(model).items())


def html_table(model) -> str:
    """The summary as an HTML table, shown above scikit-learn's parameter widget in a notebook."""
    rows = "".join(
        f"<tr><th style='text-align:left;padding-right:1em'>{html.escape(name)}</th><td style='text-align:left'>{html.escape(value)}</td></tr>"
        for name, value in facts(model).items()
    )
    return f"<div><strong>PPA, fitted</strong><table>{rows}</table></div>"
