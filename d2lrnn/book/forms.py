"""The frameworks' own call forms of the shim's functions, as the book's cells call them through ``d2l.``.

The book's package binds ``d2l.normal`` to ``tf.random.normal`` in its TensorFlow module and
``d2l.ones`` to ``torch.ones`` in its PyTorch one, so each framework's cells call the shim's functions
the way that framework takes them: ``d2l.normal((3, 4), 0, 1)`` and ``d2l.normal(shape=s, stddev=0.01,
mean=0, dtype=tf.float32)`` on TensorFlow, ``d2l.ones(2, 3, 4)`` and ``d2l.reshape(x, 2, 5)`` on PyTorch,
``d2l.sum(x, dim=1)`` there and ``d2l.normal(loc=0, scale=1, size=s)`` on MXNet. The core functions
(:mod:`d2lrnn.ops`) keep one signature each; :func:`book_function` gives the package face a function
that also takes the active backend's framework form (:data:`FORMS`, keyed by backend) and hands every
other call to the core function unchanged.
"""

import dataclasses
import functools
import inspect
import numbers

import numpy as np

from .. import ops
from ..backends import backend_name
from ..errors import ArgumentError


@dataclasses.dataclass(frozen=True)
class Form:
    """A framework's call form of one shim function: ``applies(args, kwargs)`` tells a call of this form
    from d2lrnn's, and ``call`` (written with the framework's signature) does it with the core function."""

    applies: object
    call: object
    framework: str = ""

    def __call__(self, *args, **kwargs):
        try:
            inspect.signature(self.call).bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"d2l.{self.call.__name__.split('_', 1)[1]}: {self.framework}'s form is "
                                f"{self.call.__name__.split('_', 1)[1]}{inspect.signature(self.call)} ({e})"
                                ) from None
        return self.call(*args, **kwargs)


def numpy_dtype(dtype):
    """A framework's dtype (``tf.float32``, ``torch.long``, ``'int32'``) as NumPy's, None for None."""
    if dtype is None:
        return None
    if hasattr(dtype, "as_numpy_dtype"):  # TensorFlow's DType
        return np.dtype(dtype.as_numpy_dtype)
    if type(dtype).__module__ == "torch":  # torch.int64, torch.long, ...
        return np.dtype(str(dtype).removeprefix("torch."))
    return np.dtype(dtype)


def cast(x, dtype):
    """``x`` as ``dtype`` (a framework's or NumPy's), unless that is None."""
    return x if dtype is None else ops.astype(x, numpy_dtype(dtype))


def is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def shape_given(args, kwargs, names=("shape",)):
    """The call gives a shape first (a list or tuple) or by one of ``names``."""
    return (bool(args) and isinstance(args[0], (list, tuple))) or any(n in kwargs for n in names)


def has_any(*names):
    """A call of the form: one of ``names`` given as a keyword."""
    return lambda args, kwargs: any(n in kwargs for n in names)


def sizes_as_arguments(args, kwargs):
    """``ones(2, 3, 4)``: the shape as several int arguments (PyTorch's makers), or ``size=``."""
    return (len(args) > 1 and all(is_int(a) for a in args)) or "size" in kwargs


def dims_as_arguments(args, kwargs):
    """``reshape(x, 2, 5)``: the new shape as several int arguments (``Tensor.reshape(*shape)``)."""
    return len(args) > 2 and all(is_int(a) for a in args[1:])


def int_shape(args, kwargs):
    """``reshape(x, -1)``: the shape as one int."""
    return len(args) == 2 and is_int(args[1])


# -- TensorFlow ----------------------------------------------------------------------------------------------

def tf_normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None, name=None):
    seeded(seed)
    return cast(ops.normal(mean, stddev, tuple(shape)), dtype)


def tf_uniform(shape, minval=0, maxval=None, dtype=None, seed=None, name=None):
    seeded(seed)
    return cast(ops.uniform(minval, 1.0 if maxval is None else maxval, tuple(shape)), dtype)


def tf_arange(start, limit=None, delta=1, dtype=None, name=None):
    return ops.arange(start, limit, delta, dtype=numpy_dtype(dtype))


def tf_transpose(a, perm=None, conjugate=False, name=None):
    return ops.transpose(a, perm)


def tf_argmax(input, axis=None, output_type=None, name=None):
    return cast(ops.argmax(input, axis), output_type)


def tf_astype(x, dtype, name=None):
    return ops.astype(x, numpy_dtype(dtype))


def seeded(seed):
    """TensorFlow's op-level ``seed=`` has no counterpart: d2lrnn draws from one generator."""
    if seed is not None:
        raise ArgumentError("d2l.normal/uniform: seed= is not taken (d2lrnn draws every random number from "
                            "one generator): call d2l.manual_seed(seed) before drawing")


# -- PyTorch -------------------------------------------------------------------------------------------------

def torch_ones(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    return made(ops.ones, sizes or size, dtype, device, requires_grad)


def torch_zeros(*sizes, size=None, dtype=None, device=None, requires_grad=False):
    return made(ops.zeros, sizes or size, dtype, device, requires_grad)


def made(maker, size, dtype, device, requires_grad):
    """``maker`` (ones, zeros) of PyTorch's shape: ``2, 3`` as arguments, or ``(2, 3)``."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else tuple(size)
    x = maker(shape, dtype=dtype, device=device)
    return x.requires_grad_(True) if requires_grad else x


def torch_normal(mean, std, size=None, *, generator=None, dtype=None, device=None):
    return cast(ops.normal(mean, std, tuple(size), device=device), dtype)


def torch_reshape(x, *shape):
    return ops.reshape(x, tuple(shape[0]) if len(shape) == 1 and not is_int(shape[0]) else shape)


def torch_sum(x, dim=None, keepdim=False, *, dtype=None):
    return cast(ops.sum(x, dim, keepdim), dtype)


def torch_mean(x, dim=None, keepdim=False, *, dtype=None):
    return cast(ops.mean(x, dim, keepdim), dtype)


def torch_argmax(x, dim=None, keepdim=False):
    if keepdim:
        raise ArgumentError("d2l.argmax: keepdim=True is not supported; reshape the result")
    return ops.argmax(x, dim)


def torch_concat(tensors, dim=0):
    return ops.concat(tensors, dim)


def torch_stack(tensors, dim=0):
    return ops.stack(tensors, dim)


def torch_arange(start, end=None, step=1, *, dtype=None, device=None):
    return ops.arange(start, end, step, dtype=numpy_dtype(dtype), device=device)


def torch_softmax(x, dim=-1):
    return ops.softmax(x, dim)


# -- MXNet ---------------------------------------------------------------------------------------------------

def mxnet_normal(loc=0.0, scale=1.0, size=None, dtype=None, ctx=None, device=None, out=None):
    return cast(ops.normal(loc, scale, () if size is None else size, device=ctx or device), dtype)


def mxnet_uniform(low=0.0, high=1.0, size=None, dtype=None, ctx=None, device=None, out=None):
    return cast(ops.uniform(low, high, () if size is None else size, device=ctx or device), dtype)


def mxnet_reshape(x, *shape, order="C"):
    return ops.reshape(x, tuple(shape[0]) if len(shape) == 1 and not is_int(shape[0]) else shape)


# -- Every framework -----------------------------------------------------------------------------------------

def any_reshape(x, shape):
    return ops.reshape(x, (shape,))


#: Each backend's framework forms of the shim's functions (by the shim's name; aliases such as
#: ``reduce_sum`` share their function's forms), tried in order before d2lrnn's own form.
FORMS = {
    "tensorflow": {
        "normal": [Form(shape_given, tf_normal)],
        "uniform": [Form(lambda a, k: shape_given(a, k, ("shape", "minval", "maxval")), tf_uniform)],
        "arange": [Form(has_any("limit", "delta"), tf_arange)],
        "transpose": [Form(has_any("perm"), tf_transpose)],
        "argmax": [Form(has_any("output_type"), tf_argmax)],
        "astype": [Form(lambda a, k: "name" in k or (len(a) > 1 and hasattr(a[1], "as_numpy_dtype")),
                        tf_astype)],
    },
    "torch": {
        "ones": [Form(sizes_as_arguments, torch_ones)],
        "zeros": [Form(sizes_as_arguments, torch_zeros)],
        "normal": [Form(has_any("size", "generator", "dtype"), torch_normal)],
        "reshape": [Form(dims_as_arguments, torch_reshape)],
        "sum": [Form(has_any("dim", "keepdim", "dtype"), torch_sum)],
        "mean": [Form(has_any("dim", "keepdim", "dtype"), torch_mean)],
        "argmax": [Form(has_any("dim", "keepdim"), torch_argmax)],
        "concat": [Form(has_any("dim"), torch_concat)],
        "stack": [Form(has_any("dim"), torch_stack)],
        "arange": [Form(has_any("end"), torch_arange)],
        "softmax": [Form(has_any("dim"), torch_softmax)],
    },
    "mxnet": {
        "normal": [Form(has_any("loc", "scale", "size", "dtype", "ctx"), mxnet_normal)],
        "uniform": [Form(has_any("low", "high", "size", "dtype", "ctx"), mxnet_uniform)],
        "reshape": [Form(dims_as_arguments, mxnet_reshape)],
    },
}

#: Forms every framework takes: ``d2l.reshape(x, -1)`` (an int for a shape).
COMMON = {"reshape": [Form(int_shape, any_reshape)]}

_FRAMEWORK_NAMES = {"tensorflow": "TensorFlow", "torch": "PyTorch", "mxnet": "MXNet"}
FORMS = {backend: {name: [dataclasses.replace(f, framework=_FRAMEWORK_NAMES[backend]) for f in forms]
                   for name, forms in table.items()}
         for backend, table in FORMS.items()}


def book_function(name, core):
    """``core`` (the shim function ``name``, or its alias) also taking the active backend's framework
    form, as the book's cells call it through ``d2l.``; ``core`` itself where no framework has another."""
    if name not in COMMON and not any(name in table for table in FORMS.values()):
        return core

    @functools.wraps(core)
    def function(*args, **kwargs):
        for form in [*FORMS.get(backend_name(), {}).get(name, ()), *COMMON.get(name, ())]:
            if form.applies(args, kwargs):
                return form(*args, **kwargs)
        return core(*args, **kwargs)

    return function
