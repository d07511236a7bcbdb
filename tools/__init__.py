"""Maintainers' scripts (not installed with the package): ``python -m tools.release_notes``."""
