"""The package version, kept in one place for the CLI and the build."""

__version__ = "0.1.0"
