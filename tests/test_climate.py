"""PPA with time as the feature dimension, on real sea-surface temperatures (the xeofs use case)."""

import numpy as np
import pytest

import ppa_xr
from ppa_xr.datasets import open_ersst_sample


@pytest.fixture(scope="module")
def sst():
    return open_ersst_sample(chunks={})["sst"].chunk({"lat": 30})


@pytest.fixture(scope="module")
def model(sst):
    with pytest.warns(UserWarning, match="valid pixels"):  # ocean pixels only: fewer than asked for
        return sst.ppa.fit(dim="time", n_samples=20_000, random_state=0, configuration="fixed")


def test_months_as_features(sst, model):
    assert model.n_features_in_ == 36 and model.feature_dim_ == "time"
    assert np.issubdtype(np.asarray(model.feature_labels_).dtype, np.datetime64)
    scores = sst.ppa.transform(model, n_components=3)
    assert scores.dims == ("component", "lat", "lon") and scores.chunks is not None
    values = scores.values
    land = np.isnan(sst.values).any(axis=0)
    assert np.isnan(values[:, land]).all() and np.isfinite(values[:, ~land]).all()
    X = sst.transpose("lat", "lon", "time").values.reshape(-1, 36)
    ref = model.transform(X.astype(np.float32))[:, :3].reshape(89, 180, 3).transpose(2, 0, 1)
    np.testing.assert_allclose(values, ref, rtol=0, atol=1e-4 * np.nanmax(np.abs(ref)))


def test_seasonal_curvature_beats_eofs_in_sample_but_not_across_regions(sst, model):
    # block-held-out selection keeps the first step straight here (no curve that transfers
    # across regions), so k = 1 ties the EOFs; the next steps are curved and win on the fitting sample
    for k in (1, 2, 3):
        ppa = float(sst.ppa.reconstruction_error(model, k).mean())
        pca = float(sst.ppa.reconstruction_error(model.pca_, k).mean())
        assert ppa <= pca * (1 + 1e-6) if k == 1 else ppa < 0.95 * pca
    # validated on held-out spatial blocks, those curves do not carry over to other regions: the default keeps PCA
    default = sst.ppa.fit(dim="time", random_state=0)
    assert default.configuration_ == {"robust": False, "max_curved": 0, "validated": True}
    assert float(sst.ppa.evaluate(default).relative_error.max()) <= 100 + 1e-6


def test_datetime_labels_survive_saving(tmp_path, sst, model):
    loaded = ppa_xr.load_model(model.save(tmp_path / "sst_model.nc"))
    np.testing.assert_array_equal(loaded.feature_labels_, model.feature_labels_)
    shuffled = sst.isel(time=np.random.default_rng(0).permutation(36))
    np.testing.assert_array_equal(shuffled.ppa.transform(loaded).values, sst.ppa.transform(model).values)
