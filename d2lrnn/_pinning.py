"""What the package faces with the framework in the import line share (:mod:`d2lrnn.zh`, :mod:`d2lrnn.en`).

Importing ``d2lrnn.<edition>.<framework>`` makes that framework's backend the active one, whatever
``D2LRNN_BACKEND`` says (said once where the two differ); a process runs one framework, so a second face
module of another framework, of either edition, is refused in one line.
"""

import os
import warnings

import numpy as np

import d2lrnn
from d2lrnn.backends import ENV_VAR
from d2lrnn.errors import BackendError

#: ``(module, backend)`` of the first face module imported in this process; None until one is.
_pinned = None


class BackendChoiceWarning(UserWarning):
    """The import line names another backend than ``D2LRNN_BACKEND``: the import's is used."""


def pin_backend(module, name):
    """Make ``name`` the active backend for the face module ``module`` (e.g. ``d2lrnn.en.torch``)."""
    global _pinned
    if _pinned is not None and _pinned[1] != name:
        raise BackendError(f"{_pinned[0]} is in use in this process, so {module} cannot be: a process runs "
                           f"one framework; start a new Python (or notebook kernel) for {name}")
    wanted = os.environ.get(ENV_VAR, "").strip().lower()
    if _pinned is None and wanted and wanted != name:
        warnings.warn(f"{ENV_VAR}={wanted}, but the import line names {name}: d2lrnn runs on {name}",
                      BackendChoiceWarning, stacklevel=4)
    d2lrnn.set_backend(name)
    if _pinned is None:
        _pinned = (module, name)


def face_dtypes():
    """``float32``, ``int32`` and ``int64`` as the book's package gives them for the active framework: its own
    dtype objects where its tensors have them (``torch.float32``, ``tf.float32``, ``paddle.float32``), NumPy's
    where they are NumPy's (MXNet, JAX, NumPy). Every shim function taking a dtype takes either form."""
    dtypes = {}
    for name in ("float32", "int32", "int64"):
        native = d2lrnn.ops.zeros((1,), dtype=name).dtype
        dtypes[name] = getattr(np, name) if isinstance(native, (np.dtype, type)) else native
    return dtypes


def face_names():
    """The package face's names (``d2lrnn.__all__``) with the framework's dtypes: what every pinned face
    starts from."""
    return {**{key: getattr(d2lrnn, key) for key in d2lrnn.__all__}, **face_dtypes()}


def fill(namespace, names, lookup):
    """Fill a face module's globals with ``names`` (a dict) and return its ``__getattr__`` and ``__dir__``:
    the names ``names`` does not hold (the shim's functions in the book's call forms, ``d2l.plt``) come
    from ``lookup`` (a module) at call time."""
    namespace.update(names)
    namespace["__all__"] = list(names)

    def __getattr__(attr):  # noqa: N807 - a module's __getattr__
        return getattr(lookup, attr)

    def __dir__():  # noqa: N807
        return sorted(set(dir(lookup)) | set(names))

    return __getattr__, __dir__
