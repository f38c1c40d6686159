"""The package version, in a module of its own so that any stage can read it
without importing the package face (which imports the API, which imports
the stages)."""

__version__ = "0.1.0"
