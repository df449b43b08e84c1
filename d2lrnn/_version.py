"""The version of d2lrnn, read by the package face, checkpoints and the command line."""

__version__ = "0.1.0"
