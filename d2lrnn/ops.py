"""The shim as one namespace: ``ops.matmul(...)`` calls the active backend's ``matmul``.

Code above the shim imports this module, never a framework, so switching the
backend at run time (``d2lrnn.use_backend``) takes effect on the next call.
"""

from .backends import ALIASES, SHIM_FUNCTIONS, get_backend

__all__ = list(SHIM_FUNCTIONS) + list(ALIASES)
_FUNCTIONS = frozenset(SHIM_FUNCTIONS)  # looked up at every call above the shim: a set, not a tuple's scan


def __getattr__(name):
    if name in _FUNCTIONS:
        return getattr(get_backend(), name)
    if name in ALIASES:
        return getattr(get_backend(), ALIASES[name])
    raise AttributeError(f"module 'd2lrnn.ops' has no attribute {name!r}")


def __dir__():
    return __all__
