"""On a dask cluster, with cloud-friendly outputs
================================================

The same lazy transform on a ``distributed.LocalCluster`` (two single-threaded
worker processes; a remote cluster works the same way through its address):
fit, write the components as a tiled, compressed GeoTIFF with a lock that
works on a cluster (``ppa_xr.to_raster``, which uses ``ppa_xr.file_lock()``), and as a chunked zarr store;
read both back, compare them with the in-process result, and draw the three
components read from the GeoTIFF.

From a checkout::

    python examples/cluster_outputs.py                       # outputs in ./cluster_outputs/
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib
import numpy as np
import rioxarray
import xarray as xr
from distributed import Client, LocalCluster

import ppa_xr
from ppa_xr.datasets import open_landsat8_sample

matplotlib.use("Agg")


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", default="cluster_outputs")
    args = parser.parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    local = cube.ppa.transform(model, n_components=3).values  # the threaded scheduler, in this process
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
        print(f"cluster: {len(cluster.workers)} workers; dashboard {client.dashboard_link}")
        start = time.perf_counter()
        scores = cube.ppa.transform(model, n_components=3)
        ppa_xr.to_raster(scores, out / "components.tif", blockxsize=160, blockysize=160)  # tiled, DEFLATE, a cluster-safe lock
        scores.to_dataset(name="components").to_zarr(out / "components.zarr", mode="w", consolidated=False)
        print(f"wrote a tiled GeoTIFF and a zarr store on the cluster in {time.perf_counter() - start:.1f} s")
    tif = rioxarray.open_rasterio(out / "components.tif")
    zarr = xr.open_zarr(out / "components.zarr", consolidated=False)["components"]
    print(f"GeoTIFF: {dict(tif.sizes)}, {tif.rio.crs}, blocks {tif.encoding.get('preferred_chunks')}")
    print(f"zarr: {dict(zarr.sizes)}, chunks {zarr.data.chunksize}")
    print(f"largest difference from the in-process result: GeoTIFF {float(np.abs(tif.values - local).max()):.3g}, "
          f"zarr {float(np.abs(zarr.values - local).max()):.3g}")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6), layout="constrained")
    for ax, component in zip(fig.subplots(1, 3), tif):  # what a GIS opens: the written file, with its band descriptions
        component.plot.imshow(ax=ax, cmap="gray", robust=True, add_labels=False)
        ax.set(title=tif.attrs["long_name"][int(component.band) - 1], aspect="equal", xticks=[], yticks=[])
    fig.savefig(out / "components_from_geotiff.png", dpi=80)
    return out


if __name__ == "__main__":
    main()
