"""Errors d2lrnn raises for problems a user can fix.

Each message is one line that names the problem and the fix. They are raised
``from None`` so the user sees our line, not a framework's traceback.
"""


class D2LRNNError(Exception):
    """Base class of every error d2lrnn raises on purpose."""


class ArgumentError(D2LRNNError, ValueError, TypeError):
    """A function got an argument it cannot use (a negative size, a NaN rate, a float count, ...).

    It is both a ``ValueError`` and a ``TypeError``, so code written against the built-in
    errors still catches it.
    """


class BackendError(D2LRNNError, ImportError):
    """A backend name is unknown, or its framework is missing or unusable."""


class DataError(D2LRNNError, ValueError):
    """A corpus, vocabulary or batch setting cannot produce the requested data."""


class TrainingError(D2LRNNError, RuntimeError):
    """Training diverged: a loss or parameter became NaN or inf, or the perplexity blew up.

    ``epoch`` and ``step`` say where (``step`` is None when the check is per epoch); ``cause`` is
    what happened and the fix, without what was kept (the message may add that).
    """

    def __init__(self, message, epoch=None, step=None, cause=None):
        super().__init__(message)
        self.epoch, self.step, self.cause = epoch, step, cause or message


class CheckpointError(D2LRNNError, ValueError):
    """A checkpoint file is missing, torn, or does not match the model."""


class RunFolderError(D2LRNNError, OSError):
    """A run's output folder cannot be used: not writable, locked by another run, or holding a run."""
