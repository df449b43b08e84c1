"""MXNet's hand-written scans as one cached graph per input signature (the mxnet backend's ``custom_vjp``).

Eagerly, each operation of a from-scratch recurrence is one call from Python into MXNet (~30 us of Python
apiece); the LSTM's forward scan over 35 steps is ~400 of them, more time than its arithmetic at the
book's sizes. What a hybridized Gluon block does instead: the forward function is traced once into a
symbolic graph and run as one ``CachedOp``, recorded by autograd as one operation whose backward pass MXNet
derives from the graph (measured: the book's LSTM scan at 35 steps, 32 rows, 64 units, forward and backward
31 against 11 ms).

The trace runs the forward function itself, written with the shim's operations, on :class:`Traced` values
(a symbol and its static shape) in place of arrays; the mxnet backend's operations that such a function
calls (``linear``, ``tanh``, ``sigmoid``, ``transpose``, ``reshape``, ``unstack``, ``stack``, ``concat``
and the arithmetic operators) build the graph when given one. A function that uses anything else is not
traceable and runs eagerly, the same numbers.
"""

import math

import mxnet as mx

sym = mx.sym

#: Graphs kept per traced function; a static-alloc graph holds buffers for its shapes.
MAX_GRAPHS = 16


class Untraceable(Exception):
    """An operation a :class:`Traced` value does not support: the function runs eagerly instead."""


class _NoAttribute(Untraceable, AttributeError):
    """An array attribute a :class:`Traced` value does not have (``hasattr`` answers False)."""


class CachedGraph:
    """A symbolic function run as one MXNet ``CachedOp``: called with its inputs in the order of ``names``,
    it returns its outputs' list. One imperative call instead of one per operator: what a hybridized
    Gluon block runs."""

    def __init__(self, outputs, names):
        group = sym.Group(outputs)
        position = {name: i for i, name in enumerate(names)}
        self._order = [position[name] for name in group.list_inputs()]
        self._op = mx.nd.CachedOp(group, flags=[("static_alloc", "true"), ("static_shape", "true")])

    def __call__(self, *inputs):
        outputs = self._op(*[inputs[i] for i in self._order])
        return outputs if isinstance(outputs, list) else [outputs]


class Traced:
    """A value in a graph being traced: an MXNet symbol and its shape, known statically."""

    __slots__ = ("symbol", "shape")

    def __init__(self, symbol, shape):
        self.symbol = symbol
        self.shape = tuple(shape)

    @property
    def ndim(self):
        return len(self.shape)

    def reshape(self, shape):
        shape = tuple(shape)
        if -1 in shape:  # the one axis left to fill: what the given ones leave of the size
            rest = math.prod(self.shape) // -math.prod(shape)
            shape = tuple(rest if n == -1 else n for n in shape)
        return Traced(sym.reshape(self.symbol, shape=shape), shape)

    def _arithmetic(self, other, elementwise, broadcast, scalar, reflected=False):
        if isinstance(other, (int, float)):
            return Traced(scalar(self.symbol, scalar=float(other)), self.shape)
        if not isinstance(other, Traced):
            raise Untraceable(f"arithmetic with {type(other).__name__}")
        a, b = (other, self) if reflected else (self, other)
        if a.shape == b.shape:
            return Traced(elementwise(a.symbol, b.symbol), a.shape)
        return Traced(broadcast(a.symbol, b.symbol), _broadcast_shape(a.shape, b.shape))

    def __add__(self, other):
        return self._arithmetic(other, sym.elemwise_add, sym.broadcast_add, sym._internal._PlusScalar)

    __radd__ = __add__

    def __mul__(self, other):
        return self._arithmetic(other, sym.elemwise_mul, sym.broadcast_mul, sym._internal._MulScalar)

    __rmul__ = __mul__

    def __sub__(self, other):
        return self._arithmetic(other, sym.elemwise_sub, sym.broadcast_sub, sym._internal._MinusScalar)

    def __rsub__(self, other):
        return self._arithmetic(other, sym.elemwise_sub, sym.broadcast_sub, sym._internal._RMinusScalar, True)

    def __neg__(self):
        return Traced(-self.symbol, self.shape)

    def __getattr__(self, name):
        raise _NoAttribute(f"an array's .{name}")


def _broadcast_shape(a, b):
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    return tuple(max(i, j) for i, j in zip(a, b))


# -- the operations, for Traced arguments (mirroring the mxnet backend's) --------------------------


def activation(x, act_type):
    return Traced(sym.Activation(x.symbol, act_type=act_type), x.shape)


def transpose(x, axes):
    axes = tuple(axes) if axes is not None else tuple(reversed(range(x.ndim)))
    return Traced(sym.transpose(x.symbol, axes=axes), tuple(x.shape[i] for i in axes))


def unstack(x, axis):
    n = x.shape[axis]
    rest = x.shape[:axis] + x.shape[axis + 1:]
    if n == 1:
        return [x.reshape(rest)]
    parts = sym.split(x.symbol, num_outputs=n, axis=axis, squeeze_axis=True)
    return [Traced(parts[i], rest) for i in range(n)]


def stack(xs, axis):
    axis = axis % (xs[0].ndim + 1)
    shape = xs[0].shape[:axis] + (len(xs),) + xs[0].shape[axis:]
    return Traced(sym.stack(*[x.symbol for x in xs], axis=axis, num_args=len(xs)), shape)


def concat(xs, axis):
    axis = axis % xs[0].ndim
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return Traced(sym.concat(*[x.symbol for x in xs], dim=axis, num_args=len(xs)), shape)


def linear(X, W, b, product):
    """X W^T (+ b), the operators the backend's ``linear`` picks for the same shapes (``product``: its
    ``_product`` answer)."""
    if not isinstance(W, Traced) or not (b is None or isinstance(b, Traced)):
        raise Untraceable("linear of a traced and a concrete array")
    n, k = W.shape
    rows = X.shape[0]
    if product == "blas":
        if b is not None and b.shape == (rows, n):
            return Traced(sym.linalg.gemm(X.symbol, W.symbol, b.symbol, transpose_b=True), (rows, n))
        Y = Traced(sym.dot(X.symbol, W.symbol, transpose_b=True), (rows, n))
    elif b is not None and b.ndim == 1:
        return Traced(sym.FullyConnected(X.symbol, W.symbol, b.symbol, num_hidden=n), (rows, n))
    elif product == "swapped":
        swapped = sym.FullyConnected(W.symbol, X.symbol, num_hidden=rows, no_bias=True)  # W X^T
        Y = Traced(sym.transpose(swapped), (rows, n))
    else:
        Y = Traced(sym.FullyConnected(X.symbol, W.symbol, num_hidden=n, no_bias=True), (rows, n))
    return Y if b is None else Y + b


# -- tracing ---------------------------------------------------------------------------------------


class TracedFunction:
    """``fn(*arrays)`` returning a tuple of arrays, run as one cached graph per input signature (the arrays'
    shapes, dtypes and devices, and ``mode``, whatever else the trace depends on); eagerly where ``fn`` is
    not traceable. ``graphs_built`` counts the traces (for tests)."""

    def __init__(self, fn):
        self._fn = fn
        self._graphs = {}
        self.graphs_built = 0

    def __call__(self, arrays, mode=None):
        key = (mode, *((a.shape, a.dtype, a.context) for a in arrays))
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._graphs[key] = self._trace(arrays)
            if len(self._graphs) > MAX_GRAPHS:
                del self._graphs[next(iter(self._graphs))]  # the oldest
        if graph is False:
            return tuple(self._fn(*arrays))
        return tuple(graph(*arrays))

    def _trace(self, arrays):
        names = [f"input{i}" for i in range(len(arrays))]
        inputs = [Traced(sym.var(name), a.shape) for name, a in zip(names, arrays)]
        try:
            outputs = self._fn(*inputs)
        except (Untraceable, TypeError, AssertionError):  # the last two: an MXNet operator given a Traced
            return False
        self.graphs_built += 1
        return CachedGraph([y.symbol for y in outputs], names)
