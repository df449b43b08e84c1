"""What every module of :mod:`d2lrnn.zh` does: the package face, on the backend its name gives."""

import os
import warnings

import d2lrnn
from d2lrnn.backends import ENV_VAR
from d2lrnn.errors import BackendError

#: The backend the first imported module of this package chose; None until one is imported.
_pinned = None


class BackendChoiceWarning(UserWarning):
    """The import line names another backend than ``D2LRNN_BACKEND``: the import's is used."""


def pin(name, namespace):
    """Make ``name`` the active backend and fill ``namespace`` (a module's globals) with the face's names.

    Returns the module's ``__getattr__`` and ``__dir__``: the names the face gives at call time (the shim's
    functions in the book's call forms, ``d2l.plt``) come from it.
    """
    global _pinned
    if _pinned is not None and _pinned != name:
        raise BackendError(f"d2lrnn.zh.{_pinned} is in use in this process, so d2lrnn.zh.{name} cannot be: a "
                           f"process runs one framework; start a new Python (or notebook kernel) for {name}")
    wanted = os.environ.get(ENV_VAR, "").strip().lower()
    if _pinned is None and wanted and wanted != name:
        warnings.warn(f"{ENV_VAR}={wanted}, but the import line names {name}: d2lrnn runs on {name}",
                      BackendChoiceWarning, stacklevel=3)
    d2lrnn.set_backend(name)
    _pinned = name
    namespace.update({key: getattr(d2lrnn, key) for key in d2lrnn.__all__})
    namespace["__all__"] = list(d2lrnn.__all__)

    def __getattr__(attr):  # noqa: N807 - a module's __getattr__
        return getattr(d2lrnn, attr)

    def __dir__():  # noqa: N807
        return dir(d2lrnn)

    return __getattr__, __dir__
