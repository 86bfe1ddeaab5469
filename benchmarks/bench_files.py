"""What a model save costs beside many files: the same model saved into an empty folder and into one holding
3,000 unrelated files, a FIFO and a socket, interleaved. Durability flushes the new file and its directory entry
only, so both should take about as long (the test suite pins the flushes themselves; timings live here).

    python benchmarks/bench_files.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
from pathlib import Path

import numpy as np
from common import interleaved, machine, ratio, runs

from ppa_xr import PPA


def crowded(folder: Path) -> socket.socket:
    """3,000 files, a FIFO and a socket in ``folder``."""
    os.mkfifo(folder / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "sock"))
    for i in range(3000):
        (folder / f"data_{i:04d}.csv").write_text(str(i))
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 1] += X[:, 0] ** 2
    model = PPA(degree=2, random_state=0).fit(X)
    print(machine())
    with tempfile.TemporaryDirectory() as root:
        empty, busy = Path(root, "empty"), Path(root, "busy")
        empty.mkdir()
        busy.mkdir()
        server = crowded(busy)
        for suffix in (".nc", ".zarr"):
            times = interleaved({folder.name: lambda folder=folder: model.save(folder / f"m{suffix}", overwrite=True)
                                 for folder in (empty, busy)}, args.repeat)
            print(f"{suffix}: empty folder {runs(times['empty'])} s; beside 3,000 files {runs(times['busy'])} s; "
                  f"ratio {ratio(times['busy'], times['empty'])}")
        server.close()


if __name__ == "__main__":
    main()
