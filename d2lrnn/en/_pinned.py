"""What every module of :mod:`d2lrnn.en` does: the 1.0 edition's names, on the backend its name gives."""

import d2lrnn
from d2lrnn._pinning import BackendChoiceWarning, face_names, fill, pin_backend

__all__ = ["BackendChoiceWarning", "pin"]


def pin(name, namespace):
    """Make ``name`` the active backend and fill ``namespace`` (a module's globals) with the 2.x face's names
    overlaid by the 1.0 edition's (:func:`d2lrnn.book.en.names`); returns the module's ``__getattr__`` and
    ``__dir__``."""
    pin_backend(f"d2lrnn.en.{name}", name)
    from d2lrnn.book import en

    return fill(namespace, {**face_names(), **en.names()}, d2lrnn)
