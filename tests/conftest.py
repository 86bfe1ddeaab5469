import numpy as np
import pytest


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
