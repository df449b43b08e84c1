"""Errors d2lrnn raises for problems a user can fix.

Each message is one line that names the problem and the fix. They are raised
``from None`` so the user sees our line, not a framework's traceback.
"""


class D2LRNNError(Exception):
    """Base class of every error d2lrnn raises on purpose."""


class BackendError(D2LRNNError, ImportError):
    """A backend name is unknown, or its framework is missing or unusable."""


class DataError(D2LRNNError, ValueError):
    """A corpus, vocabulary or batch setting cannot produce the requested data."""


class TrainingError(D2LRNNError, RuntimeError):
    """Training diverged (loss became NaN or inf)."""


class CheckpointError(D2LRNNError, ValueError):
    """A checkpoint file is missing, torn, or does not match the model."""
