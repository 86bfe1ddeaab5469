"""Files as a hostile user leaves them: outputs that are inputs' zarr stores, labels that would not reload, a full
disk, arrays of two saves in one store, FIFOs where files belong, links, long non-ASCII names, kills and Ctrl-C
mid-save. Each case with real files, mounts, processes and signals, and each asserts what is left on disk."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, load_model
from ppa_xr import _atomic as atomic
from ppa_xr.cli import main

from .test_files import hidden, listing, models, scene  # noqa: F401 (models, scene: fixtures)


@pytest.fixture(scope="module")
def cube_model():
    """A small labelled cube and a model of it."""
    rng = np.random.default_rng(1)
    values = rng.normal(size=(3, 16, 16))
    values[1] += values[0] ** 2
    cube = xr.DataArray(values, dims=("band", "y", "x"), coords={"band": [1, 2, 3]})
    return cube, cube.ppa.fit(degree=(1, 2), random_state=0)


def _report(conn, target, args) -> None:
    try:
        conn.send(("value", target(*args)))
    except BaseException as err:  # noqa: BLE001 - handed to the parent
        conn.send(("error", (type(err), str(err))))


def finished(target, *args, timeout: float = 30):
    """``target(*args)`` in a forked process (a thread cannot help: h5py holds the GIL while it opens a FIFO); what it
    returned, or what it raised raised again here (its type and message), or a failure, not a hang, if it still runs."""
    parent, child_end = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_report, args=(child_end, target, args))
    child.start()
    child_end.close()
    name = getattr(target, "__name__", target)
    if not parent.poll(timeout):
        child.kill()
        child.join()
        pytest.fail(f"{name} still running after {timeout} s: it hangs")
    try:
        kind, value = parent.recv()
    except EOFError:
        child.join()
        pytest.fail(f"{name} crashed the process (exit code {child.exitcode})")
    child.join()
    if kind == "error":
        raise value[0](value[1])
    return value


# --------------------------------------------------------------------------- outputs never replace a zarr input
def test_write_cube_never_replaces_the_zarr_store_it_reads(tmp_path, cube_model):
    cube, model = cube_model
    (tmp_path / "outer.zarr").mkdir()
    cube.to_dataset(name="cube").to_zarr(tmp_path / "src.zarr", consolidated=False)
    cube.to_dataset(name="cube").to_zarr(tmp_path / "outer.zarr", group="inner", consolidated=False)
    before = listing(tmp_path)
    lazy = xr.open_zarr(tmp_path / "src.zarr")["cube"]
    with pytest.raises(ValueError, match=r"output .*src.zarr is also an input; write it to another path"):
        ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "src.zarr", overwrite=True)
    with pytest.raises(ValueError, match=r"output .*out.nc lies inside an input \(.*src.zarr\)"):
        ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "src.zarr" / "out.nc")
    grouped = xr.open_zarr(tmp_path / "outer.zarr", group="inner")["cube"]  # the store is the parent of the group read
    with pytest.raises(ValueError, match=r"output .*outer.zarr is also an input"):
        ppa_xr.write_cube(grouped.ppa.transform(model), tmp_path / "outer.zarr", overwrite=True)
    assert listing(tmp_path) == before
    nested = tmp_path / "a.zarr" / "b.zarr"
    cube.to_dataset(name="cube").to_zarr(nested, consolidated=False)
    with pytest.raises(ValueError, match=r"output .*a.zarr holds an input \(.*b.zarr\)"):
        ppa_xr.write_cube(xr.open_zarr(nested)["cube"].ppa.transform(model), tmp_path / "a.zarr", overwrite=True)
    xr.testing.assert_identical(xr.open_zarr(tmp_path / "src.zarr").load(), cube.to_dataset(name="cube"))
    assert ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "out.zarr") == tmp_path / "out.zarr"


# --------------------------------------------------------------------------- labels that reload as they were
def labelled_cube(labels) -> xr.DataArray:
    rng = np.random.default_rng(2)
    values = rng.normal(size=(3, 12, 12))
    values[1] += values[0] ** 2
    return xr.DataArray(values, dims=("band", "y", "x"), coords={"band": labels})


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("labels, dtype", [([1, 2, 3], np.int64), ([1.5, 2.5, 3.5], np.float64), ([True, False, np.True_], bool)])
def test_labels_held_as_python_objects_of_one_kind_reload_exactly(tmp_path, name, labels, dtype):
    cube = labelled_cube(np.array(labels, dtype=object))
    model = cube.ppa.fit(degree=1, random_state=0) if dtype is not bool else None
    if model is None:  # two equal booleans: refused as repeated labels
        with pytest.raises(ValueError, match="labels along 'band' repeat"):
            cube.ppa.fit(degree=1)
        return
    loaded = load_model(model.save(tmp_path / name))
    assert loaded.feature_labels_.dtype == dtype and loaded.feature_labels_.tolist() == labels
    assert model.feature_labels_.dtype == dtype  # the model in memory holds what its file holds
    xr.testing.assert_allclose(cube.ppa.transform(loaded), cube.ppa.transform(model))


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("labels, types", [([1.5, None, 3], "NoneType, float, int"), (["a", "b", None], "NoneType, str"),
                                           ([1, "b", 3.0], "float, int, str"), ([True, 0.5, 2], "bool, float, int")])
def test_labels_of_mixed_types_are_refused_at_save_with_what_to_do(tmp_path, name, labels, types):
    model = labelled_cube(np.array(labels, dtype=object)).ppa.fit(degree=1, random_state=0)
    with pytest.raises(ValueError, match=rf"labels along 'band' are of types {types}, which a model file cannot store and read "
                                         r"back .* one type .*cube.assign_coords\(band="):
        model.save(tmp_path / name)
    assert os.listdir(tmp_path) == []  # refused before anything is written


def test_labels_of_the_same_text_and_other_types_are_named_by_type(cube_model):
    cube, model = cube_model
    with pytest.raises(ValueError, match=r"the model has \[1, 2, 3\], the cube \[1, 2, 3\] \(the same text, other types: the "
                                         r"model's labels are int, the cube's str\)"):
        cube.assign_coords(band=["1", "2", "3"]).ppa.transform(model)


# --------------------------------------------------------------------------- one save's arrays, together
def test_a_store_holding_arrays_of_two_saves_is_refused(tmp_path, models):
    """Each array matches its own checksum; the record's checksum ties them to their save."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    X[:, 1] += X[:, 0] ** 2
    first = PPA(degree=2, random_state=0).fit(X).save(tmp_path / "a.zarr")
    other = PPA(degree=2, random_state=0).fit(X + rng.normal(scale=0.1, size=X.shape)).save(tmp_path / "b.zarr")
    shutil.rmtree(first / "rotation")
    shutil.copytree(other / "rotation", first / "rotation")  # the same shape and dtype, another save's values
    with pytest.raises(ValueError, match=r"a.zarr is corrupt: its arrays are not those of one save \(the checksum over the whole "
                                         r"record does not match"):
        load_model(first)
    shutil.rmtree(other / "fit_error_ratio")  # an optional array removed: the model would load without its error curve
    with pytest.raises(ValueError, match=r"b.zarr is corrupt: its arrays are not those of one save"):
        load_model(other)
    models[0].save(tmp_path / "whole.zarr")
    np.testing.assert_array_equal(load_model(tmp_path / "whole.zarr").components_, models[0].components_)


@pytest.mark.parametrize("version", [8, 9])
def test_older_files_without_the_record_checksum_still_load(tmp_path, models, version):
    from ppa_xr.model import file as model_io

    from .conftest import as_older_file

    ds = as_older_file(models[0].to_dataset(), version) if version < model_io.FORMAT_VERSION else models[0].to_dataset()
    assert ("record_sha256" in ds.attrs) == (version >= 9)
    ds.to_netcdf(tmp_path / "m.nc", engine="h5netcdf")
    np.testing.assert_array_equal(load_model(tmp_path / "m.nc").components_, models[0].components_)
    if version >= 9:
        ds.attrs.pop("record_sha256")
        with pytest.raises(ValueError, match="not those of one save"):
            PPA.from_dataset(ds)


# --------------------------------------------------------------------------- FIFOs, sockets and directories where files belong
@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_a_fifo_at_the_model_path_is_refused_not_waited_on(tmp_path, models, name):
    os.mkfifo(tmp_path / name)
    with pytest.raises(FileExistsError, match=rf"{name} exists and is not a ppa_xr model; refusing to replace it"):
        finished(models[0].save, tmp_path / name, None, True)
    with pytest.raises(ValueError, match=rf"{name} is a FIFO \(named pipe\), not a file of a ppa_xr model"):
        finished(load_model, tmp_path / name)
    assert (tmp_path / name).is_fifo()


def test_a_fifo_in_place_of_a_stores_metadata_is_refused_not_waited_on(tmp_path, models):
    path = models[0].save(tmp_path / "m.zarr")
    for meta in (path / "zarr.json", path / "rotation" / "zarr.json"):
        kept = meta.read_bytes()
        meta.unlink()
        os.mkfifo(meta)
        with pytest.raises(ValueError, match=rf"{meta.relative_to(path)} in .*m.zarr is a FIFO \(named pipe\), not a file of a "
                                             "ppa_xr model"):
            finished(load_model, path)
        with pytest.raises(FileExistsError, match="m.zarr exists and is not a ppa_xr model"):
            finished(models[1].save, path, None, True)
        meta.unlink()
        meta.write_bytes(kept)
    np.testing.assert_array_equal(load_model(path).components_, models[0].components_)


def test_a_lock_file_that_is_a_directory_is_named(tmp_path, models):
    lock = tmp_path / atomic.hidden_name(tmp_path / "m.nc", ".lock")
    lock.mkdir()
    (lock / "mine.txt").write_text("kept")
    for act in (lambda: models[0].save(tmp_path / "m.nc"), lambda: load_model(tmp_path / "m.nc")):
        with pytest.raises(OSError, match=rf"the lock file of .*m.nc \(.*\.m\.nc\.lock\) is a directory; ppa_xr keeps a plain lock "
                                          "file there .* move it away"):
            finished(act)
    assert (lock / "mine.txt").read_text() == "kept" and sorted(os.listdir(tmp_path)) == [lock.name]


# --------------------------------------------------------------------------- a full disk
@pytest.fixture
def small_disk(tmp_path):
    """A real 4 MiB file system (tmpfs), mounted for the test; skipped where mounting is not permitted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=True)


def filled(disk: Path, leave: int) -> None:
    """``disk`` filled by a file of ours until ``leave`` bytes are free."""
    with open(disk / "filler", "ab") as f:
        f.write(b"\0" * (shutil.disk_usage(disk).free - leave))
        f.flush()
        os.fsync(f.fileno())


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_a_full_disk_refuses_the_save_and_keeps_the_old_model(small_disk, models, name):
    path = models[0].save(small_disk / name)
    filled(small_disk, 256 << 10)
    before = listing(small_disk)
    with pytest.raises(OSError, match=rf"model .*{name} needs about [0-9,]+ bytes and its disk has [0-9,]+ free; free some space"):
        finished(models[1].save, path, None, True)  # h5py crashed the process here
    assert listing(small_disk) == before
    np.testing.assert_array_equal(load_model(path).components_, models[0].components_)


@pytest.mark.parametrize("name", ["c.tif", "c.nc", "c.zarr"])
def test_a_full_disk_refuses_an_output_before_writing_it(small_disk, name):
    """3 x 300 x 300 float64 (2.2 MB) where 2 MiB are free: the GeoTIFF was written truncated without an error, the netCDF
    crashed h5py."""
    cube = xr.DataArray(np.random.default_rng(0).normal(size=(3, 300, 300)), dims=("band", "y", "x"),
                        coords={"band": [1, 2, 3]}).chunk({"x": 256, "y": 256})  # tiles' edges
    filled(small_disk, 2 << 20)
    before = listing(small_disk)
    with pytest.raises(OSError, match=rf"output .*{name} needs about [0-9,]+ bytes and its disk has [0-9,]+ free"):
        finished(ppa_xr.write_cube, cube, small_disk / name)
    assert listing(small_disk) == before
    (small_disk / "filler").unlink()
    assert finished(ppa_xr.write_cube, cube, small_disk / name) == small_disk / name  # with room, written


@pytest.fixture
def read_only(tmp_path):
    """A folder nothing can be created in: a read-only tmpfs mounted for the test (root writes through permissions), else
    a folder without write permission; skipped where neither holds."""
    folder = tmp_path / "read_only"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)], capture_output=True, text=True)
    if mounted.returncode:
        folder.chmod(0o555)
        if os.access(folder, os.W_OK):
            pytest.skip(f"no read-only folder here: cannot mount ({mounted.stderr.strip()}) and permissions do not bind")
    yield folder
    if mounted.returncode:
        folder.chmod(0o755)
    else:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.mark.parametrize("command", ["fit", "transform", "fill", "report", "report_deeper"])
def test_an_output_in_a_folder_that_cannot_be_written_is_refused_before_any_work(read_only, scene, capsys, command):
    """Every command's output checked once, before its work: a fit or a report into a read-only folder was computed,
    then failed at its write ("Operation not permitted"), the work lost."""
    inputs = [str(scene / "scene.tif"), str(scene / "m.nc")]
    output = {"fit": "m2.nc", "transform": "c.tif", "fill": "f.nc", "report": "rep", "report_deeper": "a/b/rep"}[command]
    args = [command.split("_")[0], *(inputs[:1] if command == "fit" else inputs), str(read_only / output)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{read_only / output} cannot be written: nothing can be created in {read_only}" in err
    assert "PPA fit" not in err and "report on" not in err  # refused before the fit's steps, before the report's pass
    assert os.listdir(read_only) == []
    with pytest.raises(OSError, match="cannot be written: nothing can be created in"):
        load_model(scene / "m.nc").save(read_only / "m.zarr")


def test_a_write_that_fills_the_disk_without_an_error_is_refused(small_disk):
    """What GDAL does on a full disk: its writes fail, reported on stderr only, and the file is closed as complete."""
    def silent(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            try:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
            except OSError:
                pass

    with pytest.raises(OSError, match=r"the disk of output .*c.tif filled up while it was written; free some space"):
        atomic.replace_atomically(small_disk / "c.tif", silent)
    assert os.listdir(small_disk) == []


# --------------------------------------------------------------------------- Ctrl-C and kills mid-save
_CTRL_C_WHILE_THE_OLD_STORE_IS_REMOVED = """
import signal, os, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a parent under nohup ignores SIGINT, and so would this child
import numpy as np
from ppa_xr import PPA
from ppa_xr import _atomic as atomic
remove, pressed = atomic._remove, []
def interrupted(path):  # one Ctrl-C as the old store, moved aside, is being deleted
    if ".old-" in path.name and not pressed:
        pressed.append(path)
        os.kill(os.getpid(), signal.SIGINT)
    remove(path)
atomic._remove = interrupted
X = np.random.default_rng(0).normal(size=(200, 3))
PPA(degree=2).fit(X).save(sys.argv[1])
try:
    PPA(degree=1).fit(X).save(sys.argv[1], overwrite=True)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_a_ctrl_c_while_the_old_store_is_removed_leaves_no_hidden_copy(tmp_path):
    path = tmp_path / "m.zarr"
    run = subprocess.run([sys.executable, "-c", _CTRL_C_WHILE_THE_OLD_STORE_IS_REMOVED, str(path)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 130, run.stderr
    assert hidden(tmp_path) == []  # once a hidden .m.zarr.old-* copy stayed until the next save
    assert load_model(path).degrees_.tolist() == [1, 1]  # the new model, in place


def test_an_interrupted_saves_leftovers_are_removed_by_the_next_load(tmp_path, models):
    """A process killed between the new store's rename and the old one's removal: the next load cleans up."""
    path = models[0].save(tmp_path / "m.zarr")
    shutil.copytree(path, tmp_path / ".m.zarr.old-0123abcd")
    (tmp_path / ".m.zarr.tmp-89abcdef").mkdir()
    (tmp_path / ".m.zarr.tmp-notes").write_text("mine")  # named like a temporary, but not one: kept
    np.testing.assert_array_equal(load_model(path).components_, models[0].components_)
    assert hidden(tmp_path) == [".m.zarr.tmp-notes"]


_KILLED = """
import os, signal, sys
import numpy as np
from ppa_xr import PPA
from ppa_xr import _atomic as atomic
path, when = sys.argv[1:]
X = np.random.default_rng(0).normal(size=(200, 3))
model = PPA(degree=1).fit(X)
if when == "writing":  # kill -9 while the new store's files are being written (the fifth of them)
    import pathlib
    write, written = pathlib.Path.write_bytes, []
    def killed(self, data):
        written.append(self)
        if len(written) == 5:
            os.kill(os.getpid(), signal.SIGKILL)
        return write(self, data)
    pathlib.Path.write_bytes = killed
else:  # kill -9 between the two renames: the old store moved aside, the new one not yet in its place
    replace = os.replace
    def killed(src, dst):
        replace(src, dst)
        if ".old-" in os.fspath(dst):
            os.kill(os.getpid(), signal.SIGKILL)
    atomic.os.replace = killed
model.save(path, overwrite=True)
"""


@pytest.mark.parametrize("when", ["writing", "between the renames"])
def test_a_zarr_model_save_killed_mid_way_leaves_the_old_model(tmp_path, models, when):
    path = models[0].save(tmp_path / "m.zarr")
    run = subprocess.run([sys.executable, "-c", _KILLED, str(path), when], capture_output=True, text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stderr
    assert hidden(tmp_path)  # the killed save's temporary or backup
    if when == "writing":
        np.testing.assert_array_equal(load_model(path).components_, models[0].components_)
    else:
        assert not path.exists()
        with pytest.warns(UserWarning, match="an earlier save was interrupted; the previous model was put back"):
            np.testing.assert_array_equal(load_model(path).components_, models[0].components_)
    assert hidden(tmp_path) == []  # the load cleaned up after the killed save


# --------------------------------------------------------------------------- names and links
@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_non_ascii_names_up_to_255_bytes_save_recover_and_keep_lookalikes(tmp_path, models, suffix):
    name = "é" * ((255 - len(suffix)) // 2) + "x" * ((255 - len(suffix)) % 2) + suffix  # 255 bytes in UTF-8, fewer characters
    assert len(name.encode()) == 255 and len(name) < 255
    path = models[0].save(tmp_path / name)
    lookalike = tmp_path / f".{name[-20:]}.tmp-notes"  # a user's file named like a temporary
    lookalike.write_text("mine")
    models[1].save(path, overwrite=True)  # its temporary's name is a hash: the full name has no room for the prefix
    assert load_model(path).degrees_.tolist() == models[1].degrees_.tolist()
    assert lookalike.read_text() == "mine"
    user = tmp_path / f".{name[:3]}.nc.tmp-notes"
    user.write_text("mine")
    models[0].save(tmp_path / f"{name[:3]}.nc")
    models[1].save(tmp_path / f"{name[:3]}.nc", overwrite=True)
    assert user.read_text() == "mine"  # ".m.nc.tmp-notes" is not a temporary of m.nc: it survives every save
    too_long = "é" + name
    with pytest.raises(OSError, match="File name too long"):
        models[0].save(tmp_path / too_long)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == sorted(
        [name, lookalike.name, user.name, f"{name[:3]}.nc"])


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_a_link_at_the_model_path_is_replaced_itself_never_written_through(tmp_path, models, suffix):
    """Documented: with overwrite, a link at the path is replaced by the new model; what it pointed to stays as it was."""
    elsewhere = tmp_path / "kept" / f"m{suffix}"
    elsewhere.parent.mkdir()
    models[0].save(elsewhere)
    before = listing(elsewhere.parent)
    link = tmp_path / f"link{suffix}"
    os.symlink(elsewhere, link)
    with pytest.raises(FileExistsError, match="exists; choose another path or allow replacing it"):
        models[1].save(link)
    models[1].save(link, overwrite=True)
    assert not link.is_symlink() and load_model(link).degrees_.tolist() == models[1].degrees_.tolist()
    assert listing(elsewhere.parent) == before


def test_a_link_at_an_output_is_replaced_itself_and_a_link_to_an_input_is_refused(tmp_path, cube_model):
    cube, model = cube_model
    cube.to_dataset(name="cube").to_netcdf(tmp_path / "src.nc")
    lazy = xr.open_dataset(tmp_path / "src.nc", chunks={})["cube"]
    os.symlink(tmp_path / "src.nc", tmp_path / "alias.nc")
    before = listing(tmp_path)
    with pytest.raises(ValueError, match=r"output .*alias.nc is also an input"):
        ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "alias.nc", overwrite=True)
    assert listing(tmp_path) == before
    (tmp_path / "other.nc").write_bytes(b"theirs")
    os.symlink(tmp_path / "other.nc", tmp_path / "out.nc")
    ppa_xr.write_cube(lazy.ppa.transform(model), tmp_path / "out.nc", overwrite=True)
    assert not (tmp_path / "out.nc").is_symlink() and (tmp_path / "other.nc").read_bytes() == b"theirs"


def test_an_input_nc_that_is_text_or_a_fifo_is_named(tmp_path, capsys):
    (tmp_path / "notes.nc").write_text("hello, this is text\n")
    with pytest.raises(ValueError, match=r"input .*notes.nc is not a netCDF file: it begins with b'hello, t', not netCDF's"):
        ppa_xr.open_cube([tmp_path / "notes.nc"])
    assert main(["fit", str(tmp_path / "notes.nc"), str(tmp_path / "m.nc")]) == 2
    assert "notes.nc is not a netCDF file" in capsys.readouterr().err
    os.mkfifo(tmp_path / "pipe.nc")
    with pytest.raises(ValueError, match=r"input .*pipe.nc is a FIFO \(named pipe\), not a netCDF file"):
        finished(ppa_xr.open_cube, [tmp_path / "pipe.nc"])
    cube = xr.DataArray(np.ones((2, 3, 3)), dims=("band", "y", "x")).to_dataset(name="c")
    cube.to_netcdf(tmp_path / "h5.nc", engine="h5netcdf")
    cube.to_netcdf(tmp_path / "classic.nc", engine="scipy")
    for name in ("h5.nc", "classic.nc"):
        assert ppa_xr.open_cube([tmp_path / name]).name == "c" and ppa_xr.open_cube([tmp_path / name]).shape == (2, 3, 3)
    for one in (tmp_path / "h5.nc", str(tmp_path / "h5.nc")):  # a name alone: it was read as names of one character each
        assert ppa_xr.open_cube(one).shape == (2, 3, 3)


def test_overwrite_replaces_only_what_the_output_would_be(tmp_path, cube_model):
    """overwrite=True at a .zarr path that is a folder of other files replaced it whole (they were lost, silently); at a
    .tif path that is a folder it failed with "Is a directory". Both are refused, naming what is there; a zarr store
    and a file are replaced as before."""
    cube, model = cube_model
    scores = cube.ppa.transform(model)
    (tmp_path / "notes.zarr").mkdir()
    (tmp_path / "notes.zarr" / "notes.txt").write_text("precious")
    (tmp_path / "folder.tif").mkdir()
    with pytest.raises(FileExistsError, match=r"notes.zarr is not a zarr store \(a folder holding notes.txt\)"):
        ppa_xr.write_cube(scores, tmp_path / "notes.zarr", overwrite=True)
    with pytest.raises(FileExistsError, match=r"folder.tif is a folder; overwriting replaces only a file"):
        ppa_xr.write_cube(scores, tmp_path / "folder.tif", overwrite=True)
    assert (tmp_path / "notes.zarr" / "notes.txt").read_text() == "precious" and (tmp_path / "folder.tif").is_dir()
    for name in ("out.zarr", "out.tif"):
        ppa_xr.write_cube(scores, tmp_path / name)
        ppa_xr.write_cube(scores, tmp_path / name, overwrite=True)


def test_overwrite_of_a_zarr_store_holding_other_files_is_refused(tmp_path, cube_model):
    """overwrite=True at a zarr store where the user put files of their own (notes beside the arrays, a file inside an
    array's folder) replaced the store whole, and they were lost, silently, as a model's save refuses: refused, naming
    them; stores of arrays only (zarr v2 or v3, a Dataset's) are replaced as before."""
    cube, model = cube_model
    scores = cube.ppa.transform(model)
    for inner in ("notes.txt", "ppa/notes.txt"):
        ppa_xr.write_cube(scores, tmp_path / "out.zarr", overwrite=True)
        (tmp_path / "out.zarr" / inner).write_text("precious")
        with pytest.raises(FileExistsError, match=rf"out.zarr is a zarr store holding files zarr does not write \({inner}\).*"
                                                  r"move them out of it"):
            ppa_xr.write_cube(scores, tmp_path / "out.zarr", overwrite=True)
        assert (tmp_path / "out.zarr" / inner).read_text() == "precious"
        (tmp_path / "out.zarr" / inner).unlink()
    scores.to_dataset(name="ppa").drop_vars("spatial_ref", errors="ignore").to_zarr(tmp_path / "v2.zarr", zarr_format=2)
    for name in ("out.zarr", "v2.zarr"):
        ppa_xr.write_cube(scores.to_dataset(name="ppa"), tmp_path / name, overwrite=True)
        ppa_xr.write_cube(scores, tmp_path / name, overwrite=True)


# --------------------------------------------------------------------------- labels of any resolution and origin


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("unit", ["s", "ms", "ns"])
def test_dates_as_features_at_any_resolution_save_and_reload(tmp_path, name, unit):
    """Months as features held as ``datetime64[s]`` (a file's resolution, which xarray keeps) come back from the file as
    ``datetime64[ns]``: their checksum is of the dates, not of their resolution (the file was refused as corrupt)."""
    times = np.array([f"2000-{m:02d}-01" for m in range(1, 7)], dtype=f"datetime64[{unit}]")
    rng = np.random.default_rng(2)
    cube = xr.DataArray(rng.normal(size=(6, 12, 12)), dims=("time", "y", "x"), coords={"time": times})
    model = cube.ppa.fit(dim="time", degree=1, random_state=0)
    loaded = load_model(model.save(tmp_path / name))
    assert (loaded.feature_labels_ == times).all() and loaded.feature_labels_.dtype == times.dtype  # and at their resolution
    np.testing.assert_array_equal(cube.ppa.transform(loaded).values, cube.ppa.transform(model).values)
    xr.testing.assert_identical(cube.ppa.reconstruct(loaded, 2).time, cube.time)
    if unit != "ns":  # a file of the previous version: the checksum of the dates at their own resolution, and no record of it
        from ppa_xr.model import file as model_io

        old = model.to_dataset()
        old["feature"].attrs = {"sha256": model_io._digest(times, unit=unit)}
        old.attrs["ppa_xr_format_version"] = 10
        model_io.sealed(old).to_netcdf(tmp_path / "old.nc", engine="h5netcdf")
        np.testing.assert_array_equal(load_model(tmp_path / "old.nc").feature_labels_, times)


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("unit", ["s", "ns"])
def test_stacked_features_with_a_date_level_save_and_reload(tmp_path, name, unit):
    """Features stacked from dates and sites (``stack(feature=("time", "site"))``) hold pandas' dates in their tuples: the
    save was refused ("types Timestamp"), suggesting string labels, which would undo the stacking."""
    pd = pytest.importorskip("pandas")
    times = pd.date_range("2000-01-01", periods=3).values.astype(f"datetime64[{unit}]")
    rng = np.random.default_rng(7)
    cube = xr.DataArray(rng.normal(size=(3, 2, 60)), dims=("time", "site", "pixel"), coords={"time": times, "site": ["a", "b"]})
    stacked = cube.stack(feature=("time", "site"))
    model = stacked.ppa.fit(dim="feature", degree=1, random_state=0)
    loaded = load_model(model.save(tmp_path / name))
    assert [tuple(label) for label in loaded.feature_labels_] == [tuple(label) for label in model.feature_labels_]
    np.testing.assert_array_equal(stacked.ppa.transform(loaded).values, stacked.ppa.transform(model).values)
    xr.testing.assert_identical(stacked.ppa.reconstruct(loaded, 2).feature, stacked.ppa.reconstruct(model, 2).feature)


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_a_dataframe_models_column_names_survive_a_save(tmp_path, name):
    """A model fitted on a DataFrame keeps ``feature_names_in_`` through its file, so a DataFrame of its columns in
    another order is refused after a load as before it (it went through the map by position, silently)."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    table = pd.DataFrame(rng.normal(size=(300, 4)) * [1, 2, 3, 4], columns=["a", "b", "c", "d"])
    model = PPA(degree=1, random_state=0).fit(table)
    loaded = load_model(model.save(tmp_path / name))
    assert loaded.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(loaded.transform(table), model.transform(table))
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        loaded.transform(table[["d", "c", "b", "a"]])


@pytest.mark.parametrize("columns", [[450.0, 550.0, 650.0, 850.0], [2001, 2002, 2003, 2004], "multi"])
def test_a_dataframe_of_columns_other_than_strings_warns_that_it_is_read_by_position(columns):
    """A DataFrame whose columns are numbers (wavelengths, years) or a MultiIndex's tuples: scikit-learn keeps no names
    for them, so the same table in another column order went through by position, silently; the fit warns, and the
    fix it names (``X.columns = X.columns.map(str)``) has the order checked. A default ``0..d-1`` is quiet."""
    pd = pytest.importorskip("pandas")
    values = np.random.default_rng(3).normal(size=(300, 4)) * [1, 2, 3, 4]
    labels = pd.MultiIndex.from_product([["x", "y"], ["p", "q"]]) if columns == "multi" else columns
    table = pd.DataFrame(values, columns=labels)
    with pytest.warns(UserWarning, match=r"are not strings, so no names are kept.*X.columns = X.columns.map\(str\)"):
        PPA(degree=1, random_state=0).fit(table)
    table.columns = table.columns.map(str)
    model = PPA(degree=1, random_state=0).fit(table)
    with pytest.raises(ValueError, match="Feature names must be in the same order"):
        model.transform(table[table.columns[::-1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PPA(degree=1, random_state=0).fit(pd.DataFrame(values))


def _months(calendar: str, count: int = 6):
    """``count`` month starts of a cftime calendar (cftime is optional: tests needing it skip without it)."""
    pytest.importorskip("cftime")
    return xr.date_range("2000-01-01", periods=count, freq="MS", calendar=calendar, use_cftime=True).values


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("calendar", ["noleap", "360_day", "standard"])
def test_a_model_of_cftime_dates_as_features_saves_and_reloads(tmp_path, name, calendar):
    """Months of a model calendar (cftime dates) as features are stored as their text and calendar, and read back as the
    same dates: the save was refused, suggesting string labels."""
    times = _months(calendar)
    cube = xr.DataArray(np.random.default_rng(4).normal(size=(6, 12, 12)), dims=("time", "y", "x"), coords={"time": times})
    model = cube.ppa.fit(dim="time", degree=1, random_state=0)
    loaded = load_model(model.save(tmp_path / name))
    assert loaded.feature_labels_.tolist() == times.tolist() and {v.calendar for v in loaded.feature_labels_} == {times[0].calendar}
    np.testing.assert_array_equal(cube.ppa.transform(loaded).values, cube.ppa.transform(model).values)
    xr.testing.assert_identical(cube.ppa.reconstruct(loaded, 2).time, cube.time)


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("attribute, value", [("ppa_xr_calendar", "standard"), ("ppa_xr_has_year_zero", None), ("ppa_xr_resolution", "D")])
@pytest.mark.filterwarnings("ignore:has_year_zero kwarg ignored:UserWarning")  # cftime, reading the changed flag before the record's check
def test_the_calendar_and_resolution_of_dates_as_labels_are_checksummed(tmp_path, name, attribute, value):
    """The attributes that say how a file's dates as labels read back (a cftime calendar, a numpy resolution) are covered
    by the record's checksum: a file whose ``noleap`` months were relabelled ``standard`` loaded as other days, silently
    (its months' text reads in either calendar), and so did ``datetime64[s]`` labels read back at days (their hours lost)."""
    from ppa_xr.model import file as model_io

    times = _months("noleap") if attribute != "ppa_xr_resolution" else np.array([f"2000-{m:02d}-01T06" for m in range(1, 7)], dtype="datetime64[s]")
    cube = xr.DataArray(np.random.default_rng(5).normal(size=(6, 12, 12)), dims=("time", "y", "x"), coords={"time": times})
    path = cube.ppa.fit(dim="time", degree=1, random_state=0).save(tmp_path / name)
    ds = model_io.read(path)
    PPA.from_dataset(ds)  # as saved
    assert attribute in ds["feature"].attrs
    ds["feature"].attrs[attribute] = 1 - int(ds["feature"].attrs[attribute]) if value is None else value  # None: the other flag
    with pytest.raises(ValueError, match="checksum over the whole record does not match"):
        PPA.from_dataset(ds)


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
@pytest.mark.parametrize("variable_width", [False, True])
def test_per_band_names_are_checked_after_a_zarr_load_and_on_a_zarr_cube(tmp_path, name, variable_width):
    """zarr gives strings back as numpy's variable-width ``StringDType``: a model loaded from a .zarr (or a cube whose
    band names are such strings) skipped the check of per-band names, so another sensor's bands under the same labels
    went through without the warning, silently. The model's labels come back as the fitted cube held them."""
    rng = np.random.default_rng(6)
    cube = xr.DataArray(rng.normal(size=(3, 16, 16)), dims=("band", "y", "x"),
                        coords={"band": ["a", "b", "c"], "common_name": ("band", np.array(["blue", "green", "red"]))})
    loaded = load_model(cube.ppa.fit(degree=1, random_state=0).save(tmp_path / name))
    assert loaded.feature_labels_.dtype == np.dtype("<U1") and loaded.feature_coords_["common_name"].dtype == np.dtype("<U5")
    names = np.array(["nir", "swir", "red"], dtype=np.dtypes.StringDType() if variable_width else None)
    with pytest.warns(UserWarning, match=r"the cube's 'common_name' differs from the model's .* a: nir \(model blue\), b: swir"):
        cube.assign_coords(common_name=("band", names)).ppa.transform(loaded)


@pytest.mark.parametrize("name", ["m.nc", "m.zarr"])
def test_dates_checksummed_at_their_own_resolution_pass_only_in_files_of_the_previous_format(tmp_path, name):
    """Format 10 took the checksum of dates as labels at their own resolution; a file of the current format takes it at
    nanoseconds, and one whose labels carry the other checksum (resealed) is refused, not read under either."""
    from ppa_xr.model import file as model_io

    times = np.array([f"2000-{m:02d}-01T06" for m in range(1, 7)], dtype="datetime64[s]")
    cube = xr.DataArray(np.random.default_rng(5).normal(size=(6, 12, 12)), dims=("time", "y", "x"), coords={"time": times})
    ds = model_io.read(cube.ppa.fit(dim="time", degree=1, random_state=0).save(tmp_path / name))
    ds["feature"].attrs["sha256"] = model_io._digest(ds["feature"].values, unit="s")
    with pytest.raises(ValueError, match=r"the checksum of 'feature' does not match"):
        PPA.from_dataset(model_io.sealed(ds))
    previous = model_io.sealed(ds.assign_attrs(ppa_xr_format_version=10))
    np.testing.assert_array_equal(PPA.from_dataset(previous).feature_labels_, times)


def test_cftime_dates_with_and_without_a_year_0_are_refused_when_saved(tmp_path):
    """A model's cftime labels store one year-0 flag: labels that mix them would read back under one, silently."""
    cftime = pytest.importorskip("cftime")
    times = np.array([cftime.DatetimeGregorian(2000, m, 1, has_year_zero=m % 2 == 0) for m in range(1, 7)], dtype=object)
    cube = xr.DataArray(np.random.default_rng(5).normal(size=(6, 12, 12)), dims=("time", "y", "x"), coords={"time": times})
    with pytest.raises(ValueError, match=r"mix calendars with and without a year 0"):
        cube.ppa.fit(dim="time", degree=1, random_state=0).save(tmp_path / "m.nc")
