"""zen: a command-line toolkit for n-gram enhanced text encoders (ZEN 1.0, ZEN 2.0, CHTE)."""

__version__ = "0.1.0"
