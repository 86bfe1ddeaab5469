"""On a dask cluster, with cloud-friendly outputs
================================================

The same lazy transform on a ``distributed.LocalCluster`` (two single-threaded
worker processes; a remote cluster works the same way through its address):
fit, write the components as a tiled, compressed GeoTIFF with a lock that
works on a cluster (``ppa_xr.to_raster``, which uses ``ppa_xr.file_lock()``),
and as a chunked zarr store; read both back, compare them with the
in-process result, and draw the three components read from the GeoTIFF.

From a checkout::

    python examples/cluster_outputs.py                       # outputs in ./cluster_outputs/
"""

# %%
# Fit, and transform in this process
# ----------------------------------
# The reference result: the threaded scheduler, in this process. A script
# that starts worker processes is imported again by each of them (Python's
# "spawn" start method), so its work sits under ``if __name__ ==
# "__main__":``, which only the script itself runs (a notebook needs no
# guard).
import time

import numpy as np
import rioxarray
import xarray as xr
from distributed import Client, LocalCluster
from matplotlib.figure import Figure

import ppa_xr
from ppa_xr.datasets import open_landsat8_sample

# sphinx_gallery_start_ignore
import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # the figures are written as PNG files

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--output-dir", default="cluster_outputs", help="where the outputs go")
    out = Path(parser.parse_args().output_dir)
    out.mkdir(parents=True, exist_ok=True)
# sphinx_gallery_end_ignore
if __name__ == "__main__":
    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    local = cube.ppa.transform(model, n_components=3).values

# %%
# Write on a cluster
# ------------------
# Inside ``Client(cluster)`` every dask computation runs on the cluster's
# workers: the fitted parameters travel to them once, with the graph.
# ``ppa_xr.to_raster`` writes a tiled, DEFLATE-compressed GeoTIFF whose
# band descriptions name the components, under a lock that works across
# processes; zarr needs no lock, each chunk is its own object.
if __name__ == "__main__":
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0")  # any free port
    with cluster, Client(cluster):
        print(f"cluster: {len(cluster.workers)} workers")
        start = time.perf_counter()
        scores = cube.ppa.transform(model, n_components=3)
        tiles = {"blockxsize": 160, "blockysize": 160}
        ppa_xr.to_raster(scores, out / "components.tif", overwrite=True, **tiles)
        scores.to_dataset(name="components").to_zarr(out / "components.zarr", mode="w",
                                                      consolidated=False)
        print(f"wrote a tiled GeoTIFF and a zarr store in {time.perf_counter() - start:.1f} s")

# %%
# Read both back
# --------------
# The files hold the in-process result (float32 in both).
if __name__ == "__main__":
    tif = rioxarray.open_rasterio(out / "components.tif")
    zarr = xr.open_zarr(out / "components.zarr", consolidated=False)["components"]
    print(f"GeoTIFF: {dict(tif.sizes)}, {tif.rio.crs}, blocks {tif.encoding['preferred_chunks']}")
    print(f"band descriptions: {tif.attrs['long_name']}")
    print(f"zarr: {dict(zarr.sizes)}, chunks {zarr.data.chunksize}")
    print("largest difference from the in-process result: "
          f"GeoTIFF {float(np.abs(tif.values - local).max()):.3g}, "
          f"zarr {float(np.abs(zarr.values - local).max()):.3g}")

# %%
# What a GIS opens: the written file, with its band descriptions.
if __name__ == "__main__":
    fig = Figure(figsize=(9.5, 3.4), layout="constrained")
    for ax, component in zip(fig.subplots(1, 3), tif):
        component.plot.imshow(ax=ax, cmap="gray", robust=True, add_labels=False, add_colorbar=False)
        title = tif.attrs["long_name"][int(component.band) - 1]
        ax.set(title=title, aspect="equal", xticks=[], yticks=[])
    fig.savefig(out / "components_from_geotiff.png", dpi=100)
