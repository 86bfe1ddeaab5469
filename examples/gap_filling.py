"""Gaps of a cloudy NDVI series filled by the curve
==================================================

The bundled Sentinel-2 NDVI series (68 dates, 40 x 40 px, no pixel clear on
every date) is fitted with ``missing="fill"`` and its cloudy values are filled.
To measure the fill, clear values are hidden under the scene's own cloud
shapes moved by half the scene (each date's mask rolled 20 px in y and x),
and the fill of those values is compared with the linear fill (the same fit
with ``degree=1``: the Gaussian conditional mean) and with per-pixel linear
interpolation in time.

From a checkout::

    python examples/gap_filling.py --output-dir docs/img    # the figure, gaps_ndvi.png
"""

# %%
# The series, its clear values and the ones hidden to measure the fill
# ---------------------------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

import ppa_xr

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
parser.add_argument("--output-dir", default="gap_filling", help="folder for the figure")
args, _ = parser.parse_known_args()
# sphinx_gallery_end_ignore

ds = ppa_xr.datasets.open_ndvi_series()
clear = ds.clear == 1
hidden = clear & ~clear.roll(y=20, x=20, roll_coords=False)  # clear values under the moved clouds
dates = ((clear & ~hidden).mean(("y", "x")) >= 0.05).values  # a date clear almost nowhere cannot be learnt
ds, clear, hidden = ds.isel(time=dates), clear.isel(time=dates), hidden.isel(time=dates)
series = ds.ndvi.where(clear & ~hidden)
print(f"{int(dates.sum())} dates; {float(clear.mean()):.0%} of the values clear, "
      f"{int(hidden.sum())} of them hidden to measure the fill")

# %%
# Fit with the gaps, fill, and compare
# ------------------------------------
model = series.ppa.fit(dim="time", random_state=0, missing="fill")
linear = series.ppa.fit(dim="time", random_state=0, missing="fill", degree=1)
filled, mask = series.ppa.fill(model, return_mask=True)
by_line = series.ppa.fill(linear)
days = (ds.time - ds.time[0]).dt.days.values.astype(float)


def interpolated(values):
    """Per-pixel linear interpolation in time of the clear values (the nearest one beyond the ends)."""
    observed = np.isfinite(values)
    return np.interp(days, days[observed], values[observed]) if observed.any() else values


in_time = series.copy(data=np.apply_along_axis(interpolated, 0, series.values))


def rmse(estimate):
    return float(np.sqrt(((estimate - ds.ndvi) ** 2).where(hidden).mean()))


errors = {"PPA fill": rmse(filled), "linear fill (degree 1)": rmse(by_line), "temporal interpolation": rmse(in_time)}
for name, value in errors.items():
    print(f"{name:24s} RMSE {value:.4f}")
print(f"PPA / linear {errors['PPA fill'] / errors['linear fill (degree 1)']:.3f}, "
      f"PPA / temporal interpolation {errors['PPA fill'] / errors['temporal interpolation']:.3f}")

# %%
# Before and after
# ----------------
date = int(np.argmin(np.abs((clear & ~hidden).mean(("y", "x")).values - 0.5)))  # a date half cloudy
most = np.unravel_index(int(np.argmax(hidden.sum("time").values)), (ds.sizes["y"], ds.sizes["x"]))
pixel = dict(y=int(most[0]), x=int(most[1]))  # the pixel with the most hidden values
fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1, 1, 2]})
style = dict(vmin=0, vmax=0.9, cmap="YlGn", add_colorbar=False)
series.isel(time=date).plot(ax=axes[0], **style)
filled.isel(time=date).plot(ax=axes[1], **style)
axes[0].set_title(f"{str(ds.time.values[date])[:10]}: clear values kept")
axes[1].set_title("filled by PPA")
when = ds.time.values
axes[2].plot(when, in_time.isel(**pixel), color="0.7", label="temporal interpolation")
axes[2].plot(when, filled.isel(**pixel), "-", color="tab:green", label="PPA fill")
axes[2].plot(when, series.isel(**pixel), "o", color="k", ms=3, label="clear, used")
axes[2].plot(when, ds.ndvi.where(hidden).isel(**pixel), "x", color="tab:red", label="clear, hidden")
axes[2].set_title("one pixel through time")
axes[2].legend(fontsize=8, loc="lower left")
for ax in axes[:2]:
    ax.set_xticks([]), ax.set_yticks([]), ax.set_xlabel(""), ax.set_ylabel("")
fig.tight_layout()

# sphinx_gallery_start_ignore
out = Path(args.output_dir)
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "gaps_ndvi.png", dpi=90)
# sphinx_gallery_end_ignore
