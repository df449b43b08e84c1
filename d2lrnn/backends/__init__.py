"""Backend selection and the list of functions every backend implements.

Each framework lives in one module of this package (``numpy.py``, ``torch.py``,
``tensorflow.py``, ``mxnet.py``, ``jax.py``) that defines every name in :data:`SHIM_FUNCTIONS`
with the signature :mod:`d2lrnn.backends._spec` declares, where each function's docstring is written
once. Code above the shim calls them through :mod:`d2lrnn.ops` (or ``d2l.<name>``), which forwards to
the active backend. A new backend is one new module here plus one tox env: the list of valid names
is read from this folder.

Recurrent layers: a backend does not implement them. ``native_rnn()`` returns a
:class:`NativeRNN` declaring the framework's own layers (how to build, describe and call them, and
how they store the book's parameters), or None where it has none (NumPy); the cells' equations and
the adapter live above the shim, in :mod:`d2lrnn.models`.

The book's own framework cells: ``in_place_hooks()`` returns an :class:`InPlaceHooks` declaring how the
framework trains in place (attached gradients, variables, running a module with other parameter
values, the module classes ``d2l.Encoder`` and friends derive from), or None where tensors carry no
gradients (NumPy, JAX); :mod:`d2lrnn.book` uses it.
"""


import contextlib
import functools
import importlib
import os
import pkgutil

from ..errors import BackendError
from . import _common, _inputs, _spec

# The shared NumPy generator behind every backend's ``normal`` and ``uniform`` (and the data
# iterators): public here, so that code above the shim never reaches into the backends' private helpers.
from ._common import (  # noqa: F401 - part of this package's API
    FunctionalHooks,
    InPlaceHooks,
    NativeRNN,
    generator,
    generator_state,
    generator_state_kept,
    set_generator_state,
)
from ._spec import ALIASES, SHIM_FUNCTIONS  # noqa: F401 - part of this package's API

DEFAULT_BACKEND = "numpy"
ENV_VAR = "D2LRNN_BACKEND"

_active_name = None
_modules = {}


@functools.lru_cache(maxsize=1)
def _backend_names():
    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


def available_backends():
    """Names of the backends this installation knows (whether or not their framework is installed)."""
    return list(_backend_names())


def _check_name(name):
    names = _backend_names()
    if name not in names:
        raise BackendError(
            f"unknown backend {name!r}: choose one of {', '.join(names)} "
            f"(set {ENV_VAR} or call d2lrnn.set_backend(name))"
        )
    return name


def backend_name():
    """The active backend: ``D2LRNN_BACKEND``, else ``numpy``, unless ``set_backend`` chose another."""
    global _active_name
    if _active_name is None:
        _active_name = _check_name(os.environ.get(ENV_VAR, "").strip().lower() or DEFAULT_BACKEND)
    return _active_name


def load_backend(name):
    """Import (once) and return the module of backend ``name``."""
    _check_name(name)
    if name not in _modules:
        _common.keep_freed_memory()
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except BackendError as err:
            raise BackendError(str(err)) from None
        except KeyboardInterrupt:  # a framework half imported cannot be used: say so in one line
            raise BackendError(f"loading the {name} backend was interrupted (Ctrl-C) while its framework was "
                               "imported: nothing was done; run it again") from None
        for function in SHIM_FUNCTIONS:  # the contract's docstrings, written once in _spec.py
            with contextlib.suppress(AttributeError, TypeError):  # a framework's own function: its own
                getattr(module, function).__doc__ = getattr(_spec, function).__doc__
        _modules[name] = module
    return _modules[name]


def get_backend():
    """The module of the active backend, importing its framework on first use."""
    module = _modules.get(_active_name)  # the fast path: every shim call comes through here
    return module if module is not None else load_backend(backend_name())


def set_backend(name):
    """Make ``name`` the active backend; its framework is imported now, so errors show at once."""
    global _active_name
    name = _check_name(str(name).strip().lower())
    load_backend(name)
    _active_name = name
    return name


@contextlib.contextmanager
def use_backend(name):
    """``with use_backend('torch'):`` runs a block on another backend, then restores the previous one."""
    previous = backend_name()
    set_backend(name)
    try:
        yield load_backend(name)
    finally:
        set_backend(previous)


def functional_hooks():
    """The active backend's :class:`FunctionalHooks` (how the 1.0 edition's functional cells train on its
    framework), or None where it declares none (its modules train in place, or it has none)."""
    declare = getattr(get_backend(), "functional_hooks", None)
    return None if declare is None else declare()


def _to_numpy(x):
    return get_backend().to_numpy(x)


def checked_tensor(name, x):
    """``x``, unless it is a tensor of another framework than the active backend's: one line naming ``name``
    and how to convert it."""
    return _inputs.check_tensor(name, x, backend_name())


def checked_indices(name, x, size, what="the vocabulary"):
    """``x``, a tensor (of the active backend), array or list of token indices, each checked to be from 0
    to ``size`` - 1 (see :mod:`d2lrnn.backends._inputs`)."""
    return _inputs.check_indices(name, x, size, backend_name(), _to_numpy, what)


def checked_lengths(name, x, limit=None):
    """``x``, valid lengths each checked to be from 0 to ``limit``."""
    return _inputs.check_lengths(name, x, limit, backend_name(), _to_numpy)


checked_index = _inputs.check_index
