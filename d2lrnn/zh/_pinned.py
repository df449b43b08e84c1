"""What every module of :mod:`d2lrnn.zh` does: the package face, on the backend its name gives."""

import d2lrnn
from d2lrnn._pinning import BackendChoiceWarning, face_names, fill, pin_backend

__all__ = ["BackendChoiceWarning", "pin"]


def pin(name, namespace):
    """Make ``name`` the active backend and fill ``namespace`` (a module's globals) with the face's names.

    Returns the module's ``__getattr__`` and ``__dir__``: the names the face gives at call time (the shim's
    functions in the book's call forms, ``d2l.plt``) come from it.
    """
    pin_backend(f"d2lrnn.zh.{name}", name)
    return fill(namespace, face_names(), d2lrnn)
