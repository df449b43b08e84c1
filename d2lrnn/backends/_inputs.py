"""Checks of what the Python API is given: tensors of the active backend, token indices inside the
vocabulary, lengths inside the sequence. One :class:`~d2lrnn.errors.ArgumentError` line naming the
argument, instead of a framework's own error from deep inside, or a silent wrong result (a negative index
wraps around to the end of the vocabulary; MXNet's ``one_hot`` reads an index past it as all zeros).

The checks read the values (a transfer to NumPy), so they run where the public functions are called,
not inside the compiled training step; a traced tensor (under ``jax.jit`` or ``tf.function``), whose
values are not known yet, is let through.
"""

import numbers

import numpy as np

from ..errors import ArgumentError

#: The backend of a tensor's framework, by the top-level package of its type (NumPy arrays are read by
#: every backend, and are the numpy backend's own).
_FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "keras": "tensorflow", "mxnet": "mxnet",
               "jax": "jax", "jaxlib": "jax", "flax": "jax", "paddle": "paddle", "numpy": "numpy",
               "autograd": "numpy"}


def framework_of(x):
    """The backend whose framework made the tensor ``x`` (``'numpy'`` for NumPy arrays), or None for
    plain Python data."""
    for cls in type(x).__mro__:
        backend = _FRAMEWORKS.get(cls.__module__.split(".")[0])
        if backend is not None:
            return backend
    return None


def check_tensor(name, x, active):
    """``x``, unless it is a tensor of another framework than the active backend's (``active``)."""
    backend = framework_of(x)
    if backend not in (None, "numpy", active):
        raise ArgumentError(f"{name} is a {backend} tensor, but the active backend is {active}: convert it "
                            f"to NumPy first (d2l.to_numpy under {backend}), or switch with "
                            f"d2l.set_backend({backend!r})")
    return x


def values_of(x, to_numpy):
    """The values of ``x`` as a NumPy array, or None if they are not known yet (a traced tensor)."""
    if isinstance(x, np.ndarray):
        return x
    try:
        return np.asarray(x if framework_of(x) is None else to_numpy(x))
    except Exception:  # a tracer (jax.jit, tf.function): checked when it is a number again
        return None


def _whole(name, values):
    if values.dtype.kind not in "iub" and values.size:
        if values.dtype.kind != "f" or not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
            raise ArgumentError(f"{name} must hold whole numbers (token indices or lengths), got "
                                f"{values.dtype} values such as {values.reshape(-1)[0]!r}")


def check_indices(name, x, size, active, to_numpy, what="the vocabulary"):
    """``x`` (a tensor, array or nested list of token indices), each from 0 to ``size`` - 1."""
    check_tensor(name, x, active)
    values = values_of(x, to_numpy)
    if values is None or not values.size:
        return x
    _whole(name, values)
    low, high = values.min(), values.max()
    if low < 0:
        raise ArgumentError(f"{name} holds token index {low:g}: indices run from 0 to {size - 1} ({what}); a "
                            "negative one would wrap around to its end")
    if high >= size:
        raise ArgumentError(f"{name} holds token index {high:g}, outside {what} (0 to {size - 1}): pass "
                            "indices of the vocabulary the model was built for")
    return x


def check_lengths(name, x, limit, active, to_numpy):
    """``x`` (valid lengths, one per sequence), each from 0 to ``limit`` (the sequences' length)."""
    check_tensor(name, x, active)
    values = values_of(x, to_numpy)
    if values is None or not values.size:
        return x
    _whole(name, values)
    if values.min() < 0 or (limit is not None and values.max() > limit):
        bad = values.min() if values.min() < 0 else values.max()
        raise ArgumentError(f"{name} holds the length {bad:g}: a valid length runs from 0 to the sequences' "
                            f"{limit} steps")
    return x


def check_index(name, value, size, what="the target vocabulary"):
    """One token id (a whole number) from 0 to ``size`` - 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < size:
        raise ArgumentError(f"{name} is {value!r}, not a token index of {what} (0 to {size - 1})")
    return int(value)
