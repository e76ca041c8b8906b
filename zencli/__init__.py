"""zen: a command-line toolkit for n-gram enhanced text encoders (ZEN 1.0, ZEN 2.0, CHTE)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("zencli")  # one definition: pyproject.toml's, as installed (wheel or editable)
except PackageNotFoundError:  # imported from a source tree that was never installed (bin/zen always installs)
    __version__ = "0+unknown"
