"""Shared fixtures, and which ppa_xr the suite tests.

The suite tests the installed package, so a file missing from the wheel fails it: where ppa_xr is installed
(not editable), the checkout that ``python3 -m pytest`` puts first on ``sys.path`` goes last, before
anything imports ppa_xr (pytest runs with ``--import-mode=importlib``, which adds no path of its own), and
``PYTHONSAFEPATH=1`` keeps the ``python -c`` subprocesses of the tests from adding it back. An editable
install (``pip install -e .``) is the checkout, so there the checkout is tested, as before. Tests reading
files of the repository (docs, examples) find them from their own path, never from ``ppa_xr.__file__``.
"""

import json
import os
import sys
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

CHECKOUT = Path(__file__).resolve().parents[1]


def _outside_checkout(path: str) -> bool:
    return Path(path or os.curdir).resolve() != CHECKOUT


def _installed_not_editable() -> bool:
    """ppa_xr is installed outside the checkout as a copy (a wheel), not as an editable link to a checkout
    (PEP 610's ``direct_url.json``)."""
    for dist in metadata.distributions(name="ppa_xr", path=[p for p in sys.path if _outside_checkout(p)]):
        return not json.loads(dist.read_text("direct_url.json") or "{}").get("dir_info", {}).get("editable", False)
    return False


if "ppa_xr" not in sys.modules and _installed_not_editable():
    # last, not gone: ``tests`` stays importable (dask workers unpickle functions of the test modules)
    sys.path[:] = [p for p in sys.path if _outside_checkout(p)] + [str(CHECKOUT)]
    os.environ["PYTHONSAFEPATH"] = "1"


def pytest_xdist_auto_num_workers(config):
    """pyproject's ``-n auto``: a run of several files runs them side by side, one worker per core (xdist's
    count); a run of one file stays in this process, since ``--dist loadfile`` would give it one worker anyway."""
    files = {str(arg).split("::")[0] for arg in config.args}
    return 0 if len(files) == 1 and files.pop().endswith(".py") else None


#: the files that take longest (the docs build, the other-user installs, the pages' code, the cluster and
#: process schedulers, the durable saves), run first, so that the workers of ``-n auto`` finish together
LONGEST_FIRST = ("test_docs.py", "test_install.py", "test_doc_snippets.py", "test_compiled.py", "test_schedulers.py", "test_cluster_passes.py",
                 "test_files.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_report_header(config):
    import ppa_xr

    return f"ppa_xr: {Path(ppa_xr.__file__).parent}"


# property tests are reproducible and leave no example database in the repository
settings.register_profile("ppa_xr", derandomize=True, database=None)
settings.load_profile("ppa_xr")


def curved_sample(n: int, d: int = 4, noise: float = 0.05, seed: int = 0) -> np.ndarray:
    """Points around a curve (parabola, sine, cubic ...) in d dimensions: what PPA is for."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, n)
    cols = [t, t**2, np.sin(2 * t), 0.3 * t**3, np.cos(t)]
    cols = [cols[i % len(cols)] * (1 + i // len(cols)) for i in range(d)]
    return np.column_stack(cols) + noise * rng.normal(size=(n, d))


@pytest.fixture
def curved():
    return curved_sample(3000)


@pytest.fixture(scope="session")
def landsat():
    """The bundled Landsat 8 sample, opened eagerly (10 bands, 320 x 320)."""
    from ppa_xr.datasets import open_landsat8_sample

    return open_landsat8_sample()


@pytest.fixture(scope="session")
def cluster():
    """A ``distributed.LocalCluster`` of two single-threaded worker processes, started once for the tests that
    need an intact cluster (each connects its own ``Client``); a test that kills a worker starts its own."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local:
        yield local


def as_older_file(ds, version: int, validation: str = "groups"):
    """A model Dataset as a format-``version`` file wrote it: without what later versions added (the spec's
    ``since``, the file's ``SINCE``), with the standardizing scales of formats 3-6, the retired
    ``validation`` parameter where its format recorded it, and the fitting sample as one record before format 6."""
    import json

    from ppa_xr.core import spec
    from ppa_xr.model import file as model_io

    init = {k: v for k, v in json.loads(ds.attrs["estimator_params"]).items() if k not in spec.implied_by(version)}
    low, high = spec.RETIRED["validation"]
    if low <= version <= high:
        init["validation"] = validation
    old = ds.drop_vars([name for name, since in model_io.SINCE.items() if since > version and name in ds])
    low, high = model_io.LEGACY["feature_scale"]
    if low <= version <= high:  # those versions stored the standardizing scales D, W = diag(1 / D)
        scales = 1 / np.diag(ds["whitening"].values)
        old["feature_scale"] = ("feature", scales, {"sha256": model_io._checksum("feature_scale", scales)})
    if version < 6 and ds.attrs.get("fit_sample"):  # one cube's record itself, not a list of them
        (record,) = json.loads(ds.attrs["fit_sample"])
        old = old.assign_attrs(fit_sample=json.dumps(record))
    if version < 12 and "configuration" in old.attrs:  # the runs turned came with format 12
        old.attrs["configuration"] = json.dumps({k: v for k, v in json.loads(old.attrs["configuration"]).items() if k != "turned"})
        old.attrs["attrs_sha256"] = model_io._attrs_digest(old.attrs)  # format 8's checksum of its attributes
    old.attrs.pop("record_sha256", None)  # format 9's, over the whole record: again below for a format that has it
    old = old.assign_attrs(ppa_xr_format_version=version, estimator_params=json.dumps(init))
    return model_io.sealed(old) if version >= 9 else old


def resealed(ds):
    """A model Dataset whose attributes were changed by a writer that recomputed their checksum: what only
    the checks beyond the checksums can catch."""
    from ppa_xr.model import file as model_io

    return model_io.sealed(ds)
