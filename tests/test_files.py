"""Files that never surprise: saves beside anything in the folder, names as names, reports replaced whole, no output
that is an input. Each case with real processes, files and signals; each asserts the message and that no user file
changed."""

import multiprocessing
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, load_model
from ppa_xr.cli import main
from ppa_xr import _atomic as atomic

#: the longest file name Linux takes: a model may have it (its hidden siblings then use a hash of it)
LONG = "m" * 252 + ".nc"


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[:, 1] += X[:, 0] ** 2
    return PPA(degree=2, random_state=0).fit(X), PPA(degree=1).fit(X)


def listing(folder: Path) -> dict[str, bytes | str]:
    """Everything below ``folder`` (files by their bytes, other entries by their kind), to assert nothing changed."""
    out = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        key = str(path.relative_to(folder))
        if stat.S_ISREG(mode):
            out[key] = path.read_bytes() if mode & 0o400 else f"file {mode:o}"
        else:
            out[key] = "link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode) else "fifo" if stat.S_ISFIFO(mode) else "socket"
    return out


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".") and not p.name.endswith(".lock"))


def in_child(target, *args, timeout: float = 60) -> int:
    """``target(*args)`` in a forked process (the imports inherited); its exit code, or a failure if it hangs."""
    child = multiprocessing.get_context("fork").Process(target=target, args=args)
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
        pytest.fail(f"{target.__name__}{args} still running after {timeout} s")
    return child.exitcode


# --------------------------------------------------------------------------- saves cost what they write
def hostile_folder(folder: Path) -> socket.socket:
    """A folder holding what a save must not open: a FIFO (opening it blocks), a socket, a dangling symlink and an
    unreadable file, beside the model and below it, and 3,000 unrelated files."""
    (folder / "sub" / "deeper").mkdir(parents=True)
    os.mkfifo(folder / "sub" / "deeper" / "pipe")
    os.mkfifo(folder / "pipe")
    os.symlink(folder / "gone", folder / "dangling")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(folder / "sub" / "sock"))
    os.symlink(folder / "nowhere", folder / "sub" / "dangling")
    (folder / "sub" / "secret").write_text("mine")
    os.chmod(folder / "sub" / "secret", 0)
    for i in range(3000):
        (folder / f"data_{i:04d}.csv").write_text(str(i))
    return server


def _save(model, path):
    model.save(path, overwrite=True)


@pytest.fixture
def crowded(tmp_path):
    folder = tmp_path / "crowded"
    folder.mkdir()
    server = hostile_folder(folder)
    yield folder
    server.close()


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_saving_beside_a_fifo_a_socket_and_3000_files_completes_and_changes_nothing(crowded, models, name):
    before = listing(crowded)
    assert in_child(_save, models[0], crowded / name, timeout=30) == 0  # a FIFO below the folder once hung every save
    models[1].save(crowded / name, overwrite=True)
    assert load_model(crowded / name).degrees_.tolist() == models[1].degrees_.tolist()
    assert {k: v for k, v in listing(crowded).items() if not k.startswith((name, f".{name}"))} == before


def flushed_by_a_save(model, path: Path, monkeypatch) -> list[str]:
    """What a real save flushes to disk (each path given to ``os.fsync`` through the real call), relative to the folder:
    a hidden temporary shows as ``tmp``."""
    real, seen = atomic._fsync, []

    def counted(target: Path) -> None:
        seen.append(target)
        real(target)

    def short(target: Path) -> str:
        first, *rest = target.relative_to(path.parent).parts or ("folder",)
        return "/".join(["tmp" if ".tmp-" in first else first, *rest])

    monkeypatch.setattr(atomic, "_fsync", counted)
    model.save(path, overwrite=True)
    monkeypatch.undo()
    return sorted(map(short, seen))


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_a_save_flushes_what_it_wrote_and_nothing_of_the_folder(tmp_path, crowded, models, name, monkeypatch):
    """Durability costs the new file (every file and folder of a new store) and its directory entry, not the folder's
    other entries: a save beside 3,000 files once took 1.0 s against 0.085 s (benchmarks/bench_files.py times it)."""
    (tmp_path / "empty").mkdir()
    models[0].save(tmp_path / "empty" / name)
    quiet = flushed_by_a_save(models[0], tmp_path / "empty" / name, monkeypatch)
    models[0].save(crowded / name, overwrite=True)
    busy = flushed_by_a_save(models[0], crowded / name, monkeypatch)
    assert busy == quiet and quiet.count("folder") == 1  # beside 3,000 files and a FIFO: the same flushes
    written = 1 if name == "m.nc" else sum(1 for _ in (crowded / name).rglob("*")) + 1
    assert len(quiet) == written + 1  # the file (or the store's files and folders), and the folder's entry


def _save_alternately(model, folder: Path, stem: str, rounds: int) -> None:
    for i in range(rounds):
        model.save(folder / f"{stem}{('.zarr', '.nc')[i % 2]}", overwrite=True)


def test_two_processes_saving_neighbours_with_pattern_names(tmp_path, models):
    """``m[12]`` is a glob pattern matching ``m1``: concurrent saves of the two once deleted each other's temporaries."""
    children = [multiprocessing.get_context("fork").Process(target=_save_alternately, args=(model, tmp_path, stem, 8))
                for model, stem in zip(models, ("m1", "m[12]"))]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [child.exitcode for child in children] == [0, 0]
    for model, stem in zip(models, ("m1", "m[12]")):
        for suffix in (".zarr", ".nc"):
            assert load_model(tmp_path / f"{stem}{suffix}").degrees_.tolist() == model.degrees_.tolist()
    assert hidden(tmp_path) == []


# --------------------------------------------------------------------------- hidden siblings by exact name
@pytest.mark.parametrize("name", ["m[1].zarr", "m?.nc", "m*.zarr", "a model ü.nc", "m]x[.zarr", LONG, "z" * 250 + ".zarr"])
def test_any_legal_name_saves_and_recovers_by_its_own_name(tmp_path, models, name):
    path = models[0].save(tmp_path / name)
    models[1].save(path, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, atomic.hidden_name(path, ".lock")])
    if len(name) < 200:  # short names keep their own name in their siblings'
        assert atomic.hidden_name(path, ".old-") == f".{name}.old-"
    else:  # a 255-byte name leaves no room: a hash of it, within the limit
        assert len(atomic.hidden_name(path, ".old-").encode()) + 8 <= 255 and name not in atomic.hidden_name(path, ".old-")
    backup = tmp_path / (atomic.hidden_name(path, ".old-") + "0123abcd")
    os.replace(path, backup)  # the state a process killed between a store's two renames leaves
    with pytest.warns(UserWarning, match="an earlier save was interrupted; the previous model was put back"):
        assert load_model(path).degrees_.tolist() == models[1].degrees_.tolist()
    assert not backup.exists()


def test_pattern_names_never_touch_their_neighbours_siblings(tmp_path, models):
    m1 = models[0].save(tmp_path / "m1.zarr")
    backup = tmp_path / ".m1.zarr.old-0123abcd"
    os.replace(m1, backup)  # m1.zarr was being replaced when its process was killed
    other_tmp = tmp_path / ".model1.nc.tmp-89abcdef"
    other_tmp.write_bytes(b"another process's save in progress")
    kept = listing(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no model at .*m\[12\].zarr"):
        load_model(tmp_path / "m[12].zarr")  # the glob m[12] matches m1: it adopted m1's backup
    for _ in range(2):
        models[1].save(tmp_path / "m[12].zarr", overwrite=True)  # and deleted it as its own stale backup
        models[1].save(tmp_path / "model?.nc", overwrite=True)  # and deleted model1.nc's temporary
    assert {k: v for k, v in listing(tmp_path).items() if k in kept} == kept
    with pytest.warns(UserWarning, match="previous model was put back"):
        np.testing.assert_array_equal(load_model(tmp_path / "m1.zarr").components_, models[0].components_)


# --------------------------------------------------------------------------- interrupted and failed replacements
def test_stale_temporaries_are_removed_and_the_newest_backup_restored(tmp_path, models):
    path = models[0].save(tmp_path / "m.zarr")
    older = tmp_path / ".m.zarr.old-ffffffff"  # the names sort opposite to the times: the newest is found by its mtime
    models[1].save(tmp_path / "older.zarr")
    os.replace(tmp_path / "older.zarr", older)
    os.utime(older, (1e9, 1e9))
    newer = tmp_path / ".m.zarr.old-00000000"
    os.replace(path, newer)  # two killed replacements: the newer backup holds the later model
    with pytest.warns(UserWarning, match="put back"):
        assert load_model(path).degrees_.tolist() == models[0].degrees_.tolist()
    (tmp_path / ".m.zarr.tmp-deadbeef").mkdir()  # a temporary of a save killed while writing
    (tmp_path / ".m.zarr.tmp-deadbeef" / "zarr.json").write_text("{}")
    models[1].save(path, overwrite=True)
    assert hidden(tmp_path) == []  # both left by killed processes: removed by the next save


def test_a_failure_between_the_two_renames_puts_the_old_store_back(tmp_path, models, monkeypatch):
    path = models[0].save(tmp_path / "m.zarr")
    before = listing(path)
    real, aside = os.replace, []

    def interrupted(src, dst):
        if len(aside) == 1:  # the old store is moved aside: one Ctrl-C before the new one takes its place
            aside.append(src)
            os.kill(os.getpid(), signal.SIGINT)
        real(src, dst)
        aside.extend([dst] if Path(src) == path else [])

    monkeypatch.setattr(atomic.os, "replace", interrupted)
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # pytest under nohup ignores SIGINT
    try:
        with pytest.raises(KeyboardInterrupt):
            models[1].save(path, overwrite=True)
    finally:
        signal.signal(signal.SIGINT, handler)
    monkeypatch.undo()
    assert aside and not Path(aside[0]).exists()  # interrupted in that window, and the backup was put back
    assert listing(path) == before and hidden(tmp_path) == []  # at once, not at the next load


def test_a_dangling_symlink_at_the_output_is_not_replaced(tmp_path, models):
    os.symlink(tmp_path / "nowhere.nc", tmp_path / "m.nc")
    with pytest.raises(FileExistsError, match="model .*m.nc exists; choose another path or allow replacing it"):
        models[0].save(tmp_path / "m.nc")
    assert os.readlink(tmp_path / "m.nc") == str(tmp_path / "nowhere.nc") and not (tmp_path / "nowhere.nc").exists()


def test_paths_are_checked_with_their_own_messages(tmp_path, models):
    with pytest.raises(ValueError, match=r"model path .*\.nc has no name before its suffix; name it, e.g. .*name\.nc"):
        models[0].save(tmp_path / ".nc")
    assert models[0].save(os.fsencode(tmp_path / "bytes.nc")) == tmp_path / "bytes.nc"  # a bytes path is a path
    assert load_model(os.fsencode(tmp_path / "bytes.nc")).degrees_.tolist() == models[0].degrees_.tolist()
    with pytest.raises(TypeError, match="model path must be a path \\(str, bytes or os.PathLike\\), got int"):
        models[0].save(3)
    (tmp_path / "file").write_text("mine")
    with pytest.raises(FileNotFoundError, match=r"the directory of model .*file/m.nc \(.*file\) is a file, not a directory"):
        models[0].save(tmp_path / "file" / "m.nc")
    with pytest.raises(FileNotFoundError, match=r"the directory of model .*absent/m.nc \(.*absent\) does not exist"):
        models[0].save(tmp_path / "absent" / "m.nc")
    assert (tmp_path / "file").read_text() == "mine" and not (tmp_path / ".nc").exists()


# --------------------------------------------------------------------------- model stores with user files
@pytest.mark.parametrize("foreign, named", [("mean/notes.txt", "mean/notes.txt"), ("feature_coord_mine/data.csv", "feature_coord_mine"),
                                            ("feature_coord_mine/", "feature_coord_mine"), ("rotation/c/0/notes", "rotation/c/0/notes"),
                                            ("notes.txt", "notes.txt"), ("mean/link", "mean/link")])
def test_a_model_store_holding_user_files_at_any_depth_is_not_replaced(tmp_path, models, foreign, named):
    path = models[0].save(tmp_path / "m.zarr")
    target = path / foreign
    target.parent.mkdir(parents=True, exist_ok=True)
    if foreign.endswith("/"):
        target.mkdir()  # an empty folder of the user's, named as a model's coordinate
    elif foreign.endswith("link"):
        os.symlink(tmp_path, target)
    else:
        target.write_text("mine")
    before = listing(path)
    with pytest.raises(FileExistsError, match=rf"files a model does not write \({named}\).*move them out of it"):
        models[1].save(path, overwrite=True)
    assert listing(path) == before


# --------------------------------------------------------------------------- the CLI: outputs never inputs, reports whole
@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A 64 x 64 crop of the Landsat scene as a GeoTIFF, a model of it, and a report of it (module-wide, read-only)."""
    from ppa_xr.datasets import open_landsat8_sample

    folder = tmp_path_factory.mktemp("scene")
    cube = open_landsat8_sample().isel(x=slice(0, 64), y=slice(0, 64), band=slice(0, 5)).drop_vars("wavelength")
    cube.rio.to_raster(folder / "scene.tif")
    ppa_xr.open_cube([folder / "scene.tif"]).ppa.fit(degree=(1, 2), random_state=0).save(folder / "m.nc")  # as the CLI fits
    assert main(["report", str(folder / "scene.tif"), str(folder / "m.nc"), str(folder / "rep"), "--n-components", "1"]) == 0
    return folder


def copied(scene: Path, to: Path, *names: str) -> None:
    to.mkdir(exist_ok=True)
    for name in names:
        target = to / name
        if (scene / name).is_dir():
            target.mkdir()
            for inner in (scene / name).iterdir():
                (target / inner.name).write_bytes(inner.read_bytes())
        else:
            target.write_bytes((scene / name).read_bytes())


def test_report_refuses_its_inputs_as_outputs(tmp_path, scene, capsys):
    copied(scene, tmp_path / "a", "m.nc", "rep")
    copied(scene, tmp_path / "b", "rep")
    a, b = tmp_path / "a" / "rep", tmp_path / "b" / "rep"
    ppa_xr.open_cube([scene / "scene.tif"]).load().to_dataset(name="scene").to_netcdf(a / "scene.nc")
    os.replace(a / "scene.nc", a / "report_maps.nc")  # the scene kept where the report's maps go
    (b / "report_maps.nc").write_bytes((scene / "m.nc").read_bytes())  # the model kept there
    before = listing(tmp_path)
    assert main(["report", str(a / "report_maps.nc"), str(tmp_path / "a" / "m.nc"), str(a), "--overwrite", "--variable", "scene"]) == 2
    assert f"the report folder {a} holds an input ({a / 'report_maps.nc'}); write it to another path" in capsys.readouterr().err
    assert main(["report", str(scene / "scene.tif"), str(b / "report_maps.nc"), str(b), "--overwrite"]) == 2
    assert f"the report folder {b} holds an input ({b / 'report_maps.nc'})" in capsys.readouterr().err
    assert main(["report", str(b / "report.md"), str(scene / "m.nc"), str(b / "report.md")]) == 2  # a folder over a file
    assert "is a file; name a directory" in capsys.readouterr().err
    os.symlink(b, tmp_path / "link")
    assert main(["report", str(scene / "scene.tif"), str(scene / "m.nc"), str(tmp_path / "link"), "--overwrite"]) == 2
    assert "is a link; name the folder it points to" in capsys.readouterr().err
    (tmp_path / "link").unlink()
    assert listing(tmp_path) == before


def test_report_folders_hold_only_a_report(tmp_path, scene, capsys):
    copied(scene, tmp_path, "rep")
    (tmp_path / "rep" / "thesis.tex").write_text("chapter 1")
    before = listing(tmp_path)
    argv = ["report", str(scene / "scene.tif"), str(scene / "m.nc"), str(tmp_path / "rep"), "--overwrite"]
    assert main(argv) == 2
    assert "holds files a report does not write (thesis.tex); a report replaces its folder whole" in capsys.readouterr().err
    (tmp_path / "rep" / "thesis.tex").unlink()
    assert main(argv[:-1]) == 2 and "holds a report; choose another folder or allow replacing it (--overwrite)" in capsys.readouterr().err
    assert listing(tmp_path) == {k: v for k, v in before.items() if k != "rep/thesis.tex"}
    assert main(argv) == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # replaced whole: no temporary beside it


_INTERRUPTED_REPORT = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent under nohup ignores SIGINT, and so would this child
import ppa_xr.information as information
draw = information.plot_report
def interrupted(report):  # Ctrl-C right after report.md is written
    os.kill(os.getpid(), signal.SIGINT)
    return draw(report)
information.plot_report = interrupted
from ppa_xr.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_an_interrupted_report_leaves_the_old_report_whole(tmp_path, scene):
    copied(scene, tmp_path, "rep")
    before = listing(tmp_path)
    run = subprocess.run([sys.executable, "-c", _INTERRUPTED_REPORT, "report", str(scene / "scene.tif"), str(scene / "m.nc"),
                          str(tmp_path / "rep"), "--overwrite", "--n-components", "2"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 130, run.stderr
    assert "ppa-xr report: interrupted; the output being written was removed, none is left half-written" in run.stderr
    assert listing(tmp_path) == before  # the old report.md, report.png and report_maps.nc, and nothing beside them


_INTERRUPTED_WRITE = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent under nohup ignores SIGINT, and so would this child
import ppa_xr
from ppa_xr.core import kernels

forward = kernels.forward
def slow(*args, **kwargs):  # each chunk's task still computing when Ctrl-C comes, writing after the removal took
    time.sleep(0.3)
    return forward(*args, **kwargs)
kernels.forward = slow
scene, model, out = sys.argv[1:]
scores = ppa_xr.open_cube([scene], chunks=8).ppa.transform(ppa_xr.load_model(model), check=False)
try:
    ppa_xr.write_cube(scores, out)
except KeyboardInterrupt:
    time.sleep(0.6)  # the session goes on (a notebook): a task still running would write into the removed store now
    sys.exit(130)
"""


def test_an_interrupted_zarr_write_leaves_nothing(tmp_path, scene):
    before = listing(scene)
    run = subprocess.Popen([sys.executable, "-c", _INTERRUPTED_WRITE, str(scene / "scene.tif"), str(scene / "m.nc"), str(tmp_path / "c.zarr")],
                           stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not any((tmp_path / name).is_dir() and any((tmp_path / name).rglob("c/*/*/*")) for name in os.listdir(tmp_path)):
        assert time.monotonic() < deadline and run.poll() is None, "no chunk was written"
        time.sleep(0.002)
    time.sleep(0.1)  # the next chunks' tasks are running (0.3 s each)
    run.send_signal(signal.SIGINT)  # Ctrl-C while the chunks of the temporary store are being computed and written
    err = run.communicate(timeout=60)[1]
    assert run.returncode == 130 and "Directory not empty" not in err, err  # once the removal failed, a partial store left
    assert os.listdir(tmp_path) == [] and listing(scene) == before  # and no task wrote into the store after it was removed


# --------------------------------------------------------------------------- results of Dataset models, rasters of inputs
@pytest.fixture(scope="module")
def variables(tmp_path_factory):
    """A netCDF of five variables (a Dataset's variables as features) and a model fitted on it by the CLI."""
    from ppa_xr.datasets import open_landsat8_sample

    folder = tmp_path_factory.mktemp("variables")
    cube = open_landsat8_sample().isel(x=slice(0, 64), y=slice(0, 64), band=slice(0, 5)).drop_vars("wavelength")
    xr.DataArray(cube.values.astype(np.float64), coords=cube.coords, dims=cube.dims).to_dataset("band").to_netcdf(folder / "vars.nc")
    assert main(["fit", str(folder / "vars.nc"), str(folder / "m.nc"), "--degree", "1", "2"]) == 0
    return folder


def test_inverse_of_a_dataset_model_writes_netcdf_zarr_and_geotiff(tmp_path, variables):
    source = xr.open_dataset(variables / "vars.nc").load()
    model = load_model(variables / "m.nc")
    assert model.features_.variables and list(model.feature_labels_) == list(source.data_vars)
    assert main(["transform", str(variables / "vars.nc"), str(variables / "m.nc"), str(tmp_path / "c.nc")]) == 0
    for name in ("back.nc", "back.zarr", "back.tif"):
        assert main(["inverse", str(tmp_path / "c.nc"), str(variables / "m.nc"), str(tmp_path / name)]) == 0
    for name in ("back.nc", "back.zarr"):
        back = xr.open_dataset(tmp_path / name, engine="zarr" if name.endswith("zarr") else None, decode_coords="all")
        assert list(back.data_vars) == list(source.data_vars)
        for var in source.data_vars:
            np.testing.assert_allclose(back[var].transpose(*source[var].dims).values, source[var].values, rtol=1e-5)
    import rasterio

    with rasterio.open(tmp_path / "back.tif") as raster:  # one band per variable, described by its name
        assert raster.descriptions == tuple(source.data_vars)
        np.testing.assert_allclose(raster.read(1), source["B1"].values, rtol=1e-5)
    back = xr.open_dataset(tmp_path / "c.nc")["ppa"].ppa.inverse_transform(model)
    assert isinstance(back, xr.Dataset) and ppa_xr.to_raster(back, tmp_path / "api.tif") == tmp_path / "api.tif"


def test_to_raster_never_writes_over_its_lazy_inputs(tmp_path, scene, models):
    import rioxarray

    (tmp_path / "scene.tif").write_bytes((scene / "scene.tif").read_bytes())
    model = load_model(scene / "m.nc")
    lazy = rioxarray.open_rasterio(tmp_path / "scene.tif", chunks={"x": 32, "y": 32})
    ppa_xr.open_cube([tmp_path / "scene.tif"]).load().to_dataset(name="scene").to_netcdf(tmp_path / "scene.nc")
    before = listing(tmp_path)
    with pytest.raises(ValueError, match=r"output .*scene.tif is also an input; write it to another path"):
        ppa_xr.to_raster(lazy.ppa.transform(model), tmp_path / "scene.tif", overwrite=True)
    from_nc = xr.open_dataset(tmp_path / "scene.nc", chunks={})["scene"].ppa.reconstruct(model, 2)
    with pytest.raises(ValueError, match=r"output .*scene.nc is also an input"):
        ppa_xr.write_cube(from_nc, tmp_path / "scene.nc", overwrite=True)
    with pytest.raises(FileExistsError, match=r"output .*scene.tif exists; choose another path or allow replacing it"):
        ppa_xr.to_raster(from_nc, tmp_path / "scene.tif")
    assert listing(tmp_path) == before
    assert ppa_xr.to_raster(from_nc, tmp_path / "scene.tif", overwrite=True) == tmp_path / "scene.tif"  # not an input of this one


# --------------------------------------------------------------------------- model files damaged on disk
@pytest.fixture(scope="module")
def labelled(landsat):
    """A model of a cube: labels B1 ... B11, wavelengths, a fitting sample."""
    return landsat.isel(x=slice(0, 64), y=slice(0, 64)).ppa.fit(degree=(1, 2), random_state=0)


def flipped(path: Path, old: bytes, new: bytes) -> None:
    """``path`` with the first ``old`` bytes replaced by ``new`` (as long): a byte flipped on disk."""
    data = path.read_bytes()
    at = data.index(old)
    path.write_bytes(data[:at] + new + data[at + len(new):])


def rewritten(path: Path, change) -> Path:
    """The model file at ``path`` rewritten with ``change(ds)``, its checksums recomputed: a writer that knew the format."""
    from ppa_xr.model import file as model_io

    from .conftest import resealed

    with xr.open_dataset(path, engine="h5netcdf") as ds:
        ds = change(ds.load())
    for name in ds.variables:
        ds[name].attrs["sha256"] = model_io._checksum(str(name), ds[name].values)
    out = path.with_name("re_" + path.name)
    resealed(ds).to_netcdf(out, engine="h5netcdf")
    return out


def test_labels_damaged_on_disk_are_caught_and_blamed_on_the_file(tmp_path, labelled):
    path = labelled.save(tmp_path / "m.nc")
    saved = path.read_bytes()
    flipped(path, b"B1\x00", b"B0")  # B1 becomes B0: the model would be matched to the wrong band
    with pytest.raises(ValueError, match=rf"{path} is corrupt: the checksum of 'feature' does not match its values"):
        load_model(path)
    path.write_bytes(saved)
    twice = rewritten(path, lambda ds: ds.assign_coords(feature=["B1", "B1", *ds["feature"].values[2:]]))
    with pytest.raises(ValueError, match=r"is corrupt: its feature labels are not usable \(the labels along 'band' repeat: \['B1'\]"):
        load_model(twice)
    at = saved.index(b'"key_max": ') + len(b'"key_max": ')
    path.write_bytes(saved[:at] + b"-" + saved[at + 1:])  # a digit of the largest key flipped to a minus sign
    with pytest.raises(ValueError, match=r"is corrupt: the checksum of its attributes \(parameters, labels, fitting sample\)"):
        load_model(path)
    path.write_bytes(saved)
    negative = rewritten(path, lambda ds: ds.assign_attrs(fit_sample=ds.attrs["fit_sample"].replace('"key_max": ', '"key_max": -')))
    with pytest.raises(ValueError, match=r"is corrupt: its fit_sample attribute is not readable \(seed, key_max, size or shape out of range"):
        load_model(negative)
    assert load_model(path).sample_ == labelled.sample_


def test_a_noise_covariance_damaged_on_disk_is_caught(tmp_path):
    import h5py

    model = PPA(degree=1, noise_cov=np.diag([1.0, 2.0, 3.0])).fit(np.random.default_rng(0).normal(size=(500, 3)))
    path = model.save(tmp_path / "m.nc")
    with h5py.File(path, "r+") as f:
        f["noise_cov"][0, 0] = np.nextafter(1.0, 2.0)  # the last bit of one entry
    with pytest.raises(ValueError, match="checksum of 'noise_cov' does not match"):
        load_model(path)


@pytest.mark.parametrize("version", [3, 4, 5, 6, 7])
def test_older_files_of_a_standardized_cube_model_read_as_written(tmp_path, landsat, version):
    """Formats 3-6 stored the standardizing scales (format 3 included); formats before 6 one fitting record, 6 on a list."""
    from .conftest import as_older_file

    cube = landsat.isel(x=slice(0, 64), y=slice(0, 64))
    model = cube.ppa.fit(degree=(1, 2), standardize=True, random_state=0)
    as_older_file(model.to_dataset(), version).to_netcdf(tmp_path / "old.nc", engine="h5netcdf")
    loaded = load_model(tmp_path / "old.nc")
    np.testing.assert_allclose(loaded.scale_, model.scale_, rtol=1e-15)
    np.testing.assert_allclose(cube.ppa.transform(loaded).values, cube.ppa.transform(model).values, rtol=1e-6)
    assert loaded.sample_ == model.sample_


@pytest.mark.parametrize("fmt", ["nc", "zarr"])
def test_an_s_mode_model_with_left_out_features_round_trips(tmp_path, fmt):
    """A reduced model (fewer samples than features, feature weights, a feature NaN in every sample) saves its basis and
    feature weights (format 9) and loads to the same maps; a basis that disagrees with the whitening is refused."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, 120))
    X[:, 7] = np.nan
    model = PPA(degree=(1, 2)).fit(X, feature_weight=np.linspace(0.1, 1, 120))
    path = model.save(tmp_path / f"smode.{fmt}")
    loaded = ppa_xr.load_model(path)
    assert loaded.params_.n_features == model.params_.n_features < 120 and loaded.n_features_in_ == 120
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    np.testing.assert_array_equal(loaded.inverse_transform(model.transform(X)), model.inverse_transform(model.transform(X)))
    assert np.isnan(loaded.components_[:, 7]).all() and np.isnan(loaded.inverse_transform(model.transform(X))[:, 7]).all()
    ds = model.to_dataset()
    ds["basis"] = ds["basis"][::-1].assign_attrs(ds["basis"].attrs)
    ds["basis"].attrs["sha256"] = ppa_xr.model.file._checksum("basis", ds["basis"].values)
    with pytest.raises(ValueError, match="whitening matrix does not match"):
        PPA.from_dataset(ds)


@pytest.mark.parametrize("fmt", ["nc", "zarr"])
def test_norths_errors_survive_a_save(tmp_path, fmt):
    """The fitting sample's effective size (Kish's with sample weights) is saved, so a loaded model keeps North's errors
    and says its samples were weighted; a file without it (before this record) loads without them; a changed size is refused."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 4)) * [3, 2, 1, 0.5]
    for weights in (None, rng.uniform(0.5, 2, 400)):
        model = PPA(degree=1).fit(X, sample_weight=weights)
        loaded = ppa_xr.load_model(model.save(tmp_path / f"m.{fmt}", overwrite=True))
        assert loaded.n_effective_ == model.n_effective_ and loaded.weighted_samples_ == (weights is not None)
        np.testing.assert_array_equal(loaded.explained_variance_error_, model.explained_variance_error_)
    assert model.n_effective_ < 400  # Kish's size of unequal weights
    older = ppa_xr.model.file.sealed(model.to_dataset().drop_vars("sample_size"))
    assert not hasattr(PPA.from_dataset(older), "n_effective_")
    changed = model.to_dataset()
    changed["sample_size"] = changed["sample_size"] * 2
    with pytest.raises(ValueError, match="checksum of 'sample_size'"):
        PPA.from_dataset(changed)
