"""The installed ppa_xr version, in one place (the package and the model files read it)."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("ppa_xr")
except PackageNotFoundError:  # running from a source tree that was not installed
    VERSION = "0.0.0"
