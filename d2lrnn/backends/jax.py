"""JAX backend: tensors are ``jax.Array``; gradients by ``jax.value_and_grad``, steps compiled by ``jax.jit``.

Dtypes are the other backends': float32 by default, int64 indices, float64 where asked for. JAX
gives 64-bit types only with ``jax_enable_x64``, which this module switches on when the backend
loads; d2lrnn's tensors stay float32 (every one is made float32 explicitly, and JAX keeps a Python
number's type "weak", so float32 times 2.0 is float32). The switch is process-wide: in the same
process, ``jnp.zeros(3)`` written by hand is then float64, as in NumPy.

Randomness: parameters and data come from d2lrnn's shared NumPy generator like everywhere else.
Dropout needs JAX's own keys, and a key drawn inside a compiled function would be a constant of the
compiled program (the same mask at every step), so :func:`compile` passes a fresh key into every
call of the compiled function, and :func:`dropout` folds a per-call counter into it.

Compiling: XLA takes a second or two to compile a training step (the scratch models' time loops are
``lax.scan`` loops, see :func:`scan`; unrolled, the LSTM's 35 steps forward and backward took 8.5 s
on two cores), so compiled programs are kept on disk between runs, in ``~/.cache/d2lrnn/jax`` (or
``$XDG_CACHE_HOME/d2lrnn/jax``): a notebook re-run or another ``d2lrnn train`` of the same model
starts at once. JAX's own rules decide what is kept (programs that took a second or more to
compile). ``D2LRNN_JAX_CACHE`` names another folder, or ``off``; a cache the user configured for JAX
itself (``JAX_COMPILATION_CACHE_DIR``) is left as it is.
"""

import contextlib
import functools
import os

import numpy as np

from . import _common

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # XLA's C++ start-up lines
jax = _common.require("jax", "jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _cache_dir():
    """Where compiled programs are kept (see the module's docstring); None: JAX's own setting stands."""
    chosen = os.environ.get("D2LRNN_JAX_CACHE", "")
    if chosen.lower() == "off" or jax.config.jax_compilation_cache_dir:
        return None
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return chosen or os.path.join(cache_home, "d2lrnn", "jax")


_CACHE_DIR = _cache_dir()
if _CACHE_DIR:
    jax.config.update("jax_compilation_cache_dir", _CACHE_DIR)

# -- creating and converting -------------------------------------------------------------


def _on_device(a):
    """``a`` as a JAX array; anything else (NumPy arrays, lists of numbers) is copied over with
    ``jax.device_put``, as ``jnp.asarray`` would compile an identity program for each new shape and dtype."""
    return a if isinstance(a, jax.Array) else jax.device_put(np.asarray(a))


def _as_array(a, dtype=None):
    """A NumPy array with d2lrnn's rules (float32, int64) as a JAX array."""
    return _on_device(_common.as_numpy(a, _common.numpy_dtype(dtype)))


def normal(mean, std, shape, device=None):
    return _on_device(_common.normal_numpy(mean, std, shape))


def uniform(low, high, shape, device=None):
    return _on_device(_common.uniform_numpy(low, high, shape))


def zeros(shape, dtype=None, device=None):
    return jnp.zeros(shape, dtype=_common.numpy_dtype(dtype) or _common.FLOAT)


def ones(shape, dtype=None, device=None):
    return jnp.ones(shape, dtype=_common.numpy_dtype(dtype) or _common.FLOAT)


def zeros_like(x):
    return jnp.zeros_like(x)


def arange(start, stop=None, step=1, dtype=None, device=None):
    return _as_array(_common.arange_numpy(start, stop, step, dtype))


def tensor(data, dtype=None, device=None):
    if isinstance(data, jax.Array):
        return data if dtype is None else data.astype(_common.numpy_dtype(dtype))
    return _as_array(data, dtype)


def from_numpy(array, device=None):
    return _as_array(array)


def to_numpy(x):
    # A NumPy array with the values of ``x`` (a writable copy: JAX's own view is read-only).
    return np.array(x)


def astype(x, dtype):
    dtype = _common.numpy_dtype(dtype)
    if isinstance(x, jax.Array):
        return x.astype(dtype)
    return _on_device(np.asarray(x, dtype))  # converted on the host: no program to compile


def shape(x):
    return tuple(jnp.shape(x))


def size(x):
    return int(jnp.size(x))


def is_tensor(x):
    # True if ``x`` is a tensor of this backend (a concrete array or one being traced).
    return isinstance(x, jax.Array)


# Shim functions made of several JAX operations are ``jax.jit`` functions: called on arrays (evaluation,
# generation, a reader's cell), each operation would otherwise be compiled into a program of its own at
# every new shape (~20 ms each on a CPU), one program per shape instead; inside a compiled step they are
# traced into it as before. Their settings (axes, rates, the optimizer's constants) are static arguments.

# -- shaping -------------------------------------------------------------------------------


def _host_views(arrays):
    """NumPy views of ``arrays`` when the shim may move their values on the host, else None.

    On a machine whose JAX runs on the CPU, a concrete array's buffer is host memory: reshaping, joining,
    splitting or indexing it in NumPy copies the same values, and compiles nothing, where XLA compiles a
    program for every new shape (~12 ms each, and ~0.4 s to split 35 time steps apart). Not for arrays
    being traced (they have no values yet), on an accelerator (their values would cross to the host and
    back), or with JAX's weak types (a NumPy result has none)."""
    if not _values_on_host():
        return None
    for a in arrays:
        if not isinstance(a, jax.Array) or isinstance(a, jax.core.Tracer) or a.weak_type:
            return None
    return [np.asarray(a) for a in arrays]


@functools.cache
def _values_on_host():
    return jax.default_backend() == "cpu"


def _from_host(value, *inputs):
    """``value`` (computed in NumPy) as a JAX array, placed as JAX places an operation's result: committed
    to the device of an input that is (a compiled step compiles again for an argument whose placement
    changed), else not."""
    for a in inputs:
        if a.committed:
            return jax.device_put(value, next(iter(a.devices())))
    return jax.device_put(value)


def reshape(x, shape):
    views = _host_views([x])
    if views is not None:
        return _from_host(np.reshape(views[0], shape), x)
    return jnp.reshape(x, shape)


def transpose(x, axes=None):
    views = _host_views([x])
    if views is not None:
        return _from_host(np.transpose(views[0], axes), x)
    return jnp.transpose(x, axes)


def concat(tensors, axis=0):
    return _joined_anywhere(np.concatenate, jnp.concatenate, list(tensors), axis)


def stack(tensors, axis=0):
    return _joined_anywhere(np.stack, jnp.stack, list(tensors), axis)


def _joined_anywhere(host_join, join, tensors, axis):
    views = _host_views(tensors) if tensors else None
    if views is not None and len({v.dtype for v in views}) == 1:
        return _from_host(host_join(views, axis=axis), *tensors)
    return _joined(join, tensors, axis)


@functools.partial(jax.jit, static_argnums=(0, 2))
def _joined(join, tensors, axis):
    return join(tensors, axis=axis)


def unstack(x, axis=0):
    axis = axis % jnp.ndim(x)
    views = _host_views([x])
    if views is not None:
        return [_from_host(np.take(views[0], i, axis), x) for i in range(views[0].shape[axis])]
    return list(_unstacked(x, axis))


@functools.partial(jax.jit, static_argnums=1)
def _unstacked(x, axis):
    # Static slices: ``jnp.take`` would lower each to a gather, which XLA's CPU code runs far slower. One
    # program for all of them: eagerly, slicing one at a time compiles a program per index.
    return tuple(jax.lax.index_in_dim(x, i, axis, keepdims=False) for i in range(x.shape[axis]))


def take(x, indices, axis=0):
    views = None if isinstance(indices, jax.core.Tracer) else _host_views([x])
    if views is not None:
        index = np.asarray(indices)  # the given numbers, or a concrete JAX array's values
        n = views[0].size if axis is None else views[0].shape[axis]
        # in range only: out of range, NumPy raises where JAX fills (what the compiled step does)
        if index.dtype.kind in "iu" and (index.size == 0 or (-n <= index.min() and index.max() < n)):
            return _from_host(np.take(views[0], index, axis), x)
    return _take(x, _on_device(indices), axis)


@functools.partial(jax.jit, static_argnums=2)
def _take(x, indices, axis):
    return jnp.take(x, indices, axis=axis)


# -- arithmetic ------------------------------------------------------------------------------


@jax.jit
def matmul(a, b):
    return jnp.matmul(a, b)


@jax.jit
def dense(X, W, b):
    return matmul(X, W) + b


@jax.jit
def linear(X, W, b=None):
    Y = jnp.matmul(X, W.T)
    return Y if b is None else Y + b


def prepack_linear(W):
    # ``W`` laid out for fast repeated ``linear(X, W)``: XLA chooses layouts itself, so unchanged.
    return W


def tanh(x):
    return jnp.tanh(x)


@jax.jit
def tanh_grad(Y, dY):
    return dY * (1.0 - Y * Y)


def sigmoid(x):
    return jax.nn.sigmoid(x)


def sigmoid_grad(Y, dY):
    return dY * (Y - Y * Y)


def relu(x):
    return jnp.maximum(x, 0.0)


def exp(x):
    return jnp.exp(x)


def sin(x):
    return jnp.sin(x)


def log(x):
    return jnp.log(x)


def sqrt(x):
    return jnp.sqrt(x)


def abs(x):  # noqa: A001 - the shim's name
    return jnp.abs(x)


def maximum(x, y):
    return jnp.maximum(x, y)


def minimum(x, y):
    return jnp.minimum(x, y)


# -- reductions ------------------------------------------------------------------------------


def _static_axis(axis):
    """``axis`` as a static argument of a jit function (hashable: a list of axes as a tuple)."""
    return tuple(axis) if isinstance(axis, list) else axis


@functools.partial(jax.jit, static_argnums=(0, 2, 3))
def _reduced(reduce, x, axis, keepdims):
    return reduce(x, axis=axis, keepdims=keepdims)


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return _reduced(jnp.sum, x, _static_axis(axis), keepdims)


def mean(x, axis=None, keepdims=False):
    return _reduced(jnp.mean, x, _static_axis(axis), keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return _reduced(jnp.max, x, _static_axis(axis), keepdims)


def argmax(x, axis=None):
    return _argmax(x, _static_axis(axis))


@functools.partial(jax.jit, static_argnums=1)
def _argmax(x, axis):
    return jnp.argmax(x, axis=axis).astype(np.int64)


@jax.jit
def sum_of_squares(tensors):
    return _common.sum_of_squares(tensors, jnp.sum)


@jax.jit
def nonfinite_probe(tensors):
    return _common.nonfinite_probe(tensors, jnp.sum)


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    return _adam_update(params, grads, Ms, Vs, scalars, float(beta1), float(beta2), float(eps),
                        float(weight_decay))


@functools.partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay):
    return _common.adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, jnp.sqrt)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    return jax.nn.one_hot(_on_device(indices), depth, dtype=_common.FLOAT)


@functools.partial(jax.jit, static_argnames="axis")
def softmax(x, axis=-1):
    return jax.nn.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    return jax.nn.log_softmax(x, axis=axis)


def softmax_cross_entropy(logits, labels):
    return _softmax_cross_entropy(logits, _on_device(labels))


@jax.jit
def _softmax_cross_entropy(logits, labels):
    labels = jnp.reshape(labels, (-1,))
    picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
    return jax.nn.logsumexp(logits, axis=-1) - picked


# -- recurrent layers, dropout ----------------------------------------------------------------


# Flax's cells, one per layer and direction (d2lrnn's adapter stacks the layers, with dropout between).
# Each gate has its own Dense: the packed [W_x, W_h, b_x, b_h] of a slot are cut back into them.
_FLAX_CELLS = {"rnn": "SimpleCell", "gru": "GRUCell", "lstm": "OptimizedLSTMCell"}
#: Flax's gate names for the book's letters, in the order the adapter packs them.
_FLAX_GATES = {"rnn": {"h": ""}, "gru": {"r": "r", "z": "z", "h": "n"},
               "lstm": {"i": "i", "f": "f", "o": "o", "c": "g"}}
_GATE_ORDER = {cell: "".join(gates) for cell, gates in _FLAX_GATES.items()}


def _linen():
    return _common.require("flax.linen", "jax")


def _build(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after):
    make = getattr(_linen(), _FLAX_CELLS[cell])
    return [[make(num_hiddens) for _ in range(2 if bidirectional else 1)] for _ in range(num_layers)]


def _cell_name(cell):
    return next((name for name, cls in _FLAX_CELLS.items() if type(cell).__name__ == cls
                 and type(cell).__module__.startswith("flax.")), None)


def _cells_of(one):
    """The cells of one layer the reader built (a cell, ``nn.RNN(cell)``, or ``nn.Bidirectional`` of two
    ``nn.RNN``; d2lrnn's own layers are lists of cells) and the settings d2lrnn cannot run; None if
    ``one`` is none of these."""
    linen = _linen()
    if isinstance(one, (list, tuple)) and one and all(_cell_name(c) for c in one):
        return list(one), []
    if isinstance(one, linen.Bidirectional):
        forward, backward = (_cells_of(r) for r in (one.forward_rnn, one.backward_rnn))
        if forward is None or backward is None:
            return None
        return forward[0] + backward[0], forward[1] + backward[1]
    if isinstance(one, linen.RNN):
        unsupported = ["reverse=True"] if one.reverse else []
        return ([one.cell], unsupported) if _cell_name(one.cell) else None
    return ([one], []) if _cell_name(one) else None


def _layers(layer):
    """``layer`` as a list of layers: a list of layers, or one layer."""
    if isinstance(layer, (list, tuple)) and layer and not _cell_name(layer[0]):
        return list(layer)
    return [layer]


def _describe(layer):
    """The settings of Flax cells the reader built: a cell (``nn.GRUCell(features=256)``), ``nn.RNN`` of
    one, ``nn.Bidirectional`` of two ``nn.RNN``, or a list of those, one per stacked layer."""
    described = [_cells_of(one) for one in _layers(layer)]
    if any(d is None for d in described):
        return None, []
    cells = [c for cs, _ in described for c in cs]
    unsupported = [u for _, us in described for u in us]
    names = {_cell_name(c) for c in cells}
    if len(names) > 1 or len({c.features for c in cells}) > 1 or len({len(cs) for cs, _ in described}) > 1:
        unsupported.append("stacked layers of different cells, sizes or directions")
    name = _cell_name(cells[0])
    for c in cells:
        if name == "rnn" and c.activation_fn is not jnp.tanh:
            unsupported.append(f"activation_fn={getattr(c.activation_fn, '__name__', c.activation_fn)}")
        if name != "rnn" and c.gate_fn is not jax.nn.sigmoid:
            unsupported.append(f"gate_fn={getattr(c.gate_fn, '__name__', c.gate_fn)}")
    return {"cell": name, "num_inputs": None, "num_hiddens": int(cells[0].features),
            "num_layers": len(described), "bidirectional": len(described[0][0]) == 2, "dropout": 0.0,
            "reset_after": name == "gru"}, list(dict.fromkeys(unsupported))


def _prepare(layer, num_inputs):
    """The reader's layers as d2lrnn's: one list of cells (one per direction) per layer."""
    return [_cells_of(one)[0] for one in _layers(layer)]


def _flax_params(name, weights, h):
    """The Flax parameter tree of one cell from the packed ``[W_x, W_h, b_x, b_h]``."""
    W_x, W_h, b_x, b_h = weights
    gates = _FLAX_GATES[name]
    tree = {}
    for k, g in enumerate(gates):
        cut = slice(k * h, (k + 1) * h)
        flax_gate = gates[g]
        if name == "rnn":
            tree["i"] = {"kernel": W_x[:, cut], "bias": b_x[cut] + b_h[cut]}
            tree["h"] = {"kernel": W_h[:, cut]}
        elif name == "gru":  # input biases on i*, the candidate's recurrent bias on hn
            tree[f"i{flax_gate}"] = {"kernel": W_x[:, cut], "bias": b_x[cut]}
            tree[f"h{flax_gate}"] = {"kernel": W_h[:, cut]}
            if g == "h":
                tree["hn"]["bias"] = b_h[cut]
        else:  # LSTM: the biases live on the recurrent Denses
            tree[f"i{flax_gate}"] = {"kernel": W_x[:, cut]}
            tree[f"h{flax_gate}"] = {"kernel": W_h[:, cut], "bias": b_x[cut] + b_h[cut]}
    return tree


@functools.cache
def _scanner(cell_class, features, reverse):
    """A compiled scan of one cell over the steps: built once per kind of cell, so that calls outside a
    compiled step (evaluation, tests) reuse it instead of tracing and compiling the scan every time. The
    packed weights are cut into Flax's tree inside it: eagerly, every cut would be a program of its own."""
    cell = cell_class(features)
    name = _cell_name(cell)

    def run(weights, carry, X):
        params = {"params": _flax_params(name, weights, features)}
        return jax.lax.scan(lambda c, x: cell.apply(params, c, x), carry, X, reverse=reverse)

    return jax.jit(run)


def _call(layer, weights, X, states, training):
    """One layer (its directions side by side): scan each cell over the steps of X (num_steps, batch, in)."""
    outputs, new_states = [], []
    for direction, (cell, w, state) in enumerate(zip(layer, weights, states)):
        name = _cell_name(cell)
        carry = (state[1], state[0]) if name == "lstm" else state[0]  # Flax's LSTM carry is (c, h)
        carry, Y = _scanner(type(cell), cell.features, direction == 1)(list(w), carry, X)
        outputs.append(Y)
        new_states.append((carry[1], carry[0]) if name == "lstm" else (carry,))
    Y = outputs[0] if len(outputs) == 1 else concat(outputs, axis=-1)
    return Y, new_states


_NATIVE = _common.NativeRNN(
    layer_names="flax.linen.SimpleCell, GRUCell or OptimizedLSTMCell, nn.RNN or nn.Bidirectional of one, or "
                "a list of them",
    gate_order=_GATE_ORDER, transposed=False, stacks_layers=False, gru_forms=(True,),
    build=_build, describe=_describe, prepare=_prepare, call=_call)


def native_rnn():
    # Flax's ``SimpleCell``, ``GRUCell`` and ``OptimizedLSTMCell``, declared for d2lrnn's adapter.
    return _NATIVE


def in_place_hooks():
    # JAX arrays are immutable and carry no gradients: only the functional forms apply.
    return None


def functional_hooks():
    # The 1.0 edition's JAX cells: Flax modules trained functionally (see ``_common.FunctionalHooks``).
    return _functional_hooks()


@functools.cache
def _functional_hooks():
    linen = _linen()

    def param(module, name, shape, sigma):
        init = linen.initializers.zeros if sigma is None else linen.initializers.normal(sigma)
        return module.param(name, init, shape, jnp.float32)  # (Flax's default is float64 under x64)

    def apply(module, params, *args, method=None, dropout_key=None, **kwargs):
        rngs = None if dropout_key is None else {"dropout": dropout_key}
        return module.apply({"params": params}, *args, method=method, rngs=rngs, **kwargs)

    def dense(n, sigma=None):
        if sigma is None:
            return linen.Dense(n)
        return linen.Dense(n, kernel_init=linen.initializers.normal(sigma))

    def recurrent(cell, num_hiddens):
        layer = linen.RNN(getattr(linen, _FLAX_CELLS[cell])(num_hiddens), time_major=True, return_carry=True)
        return lambda inputs, H=None: layer(inputs, initial_carry=H)

    def rebuild(tree, leaves):
        return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(tree), list(leaves))

    return _common.FunctionalHooks(
        module_base=linen.Module, compact=linen.compact, param=param,
        init=lambda module, key, *args: module.init_with_output(key, *args),
        params_of=lambda variables: variables["params"], apply=apply,
        dense=dense, dense_params=lambda params: (params["kernel"], params["bias"]), embedding=linen.Embed,
        dropout=linen.Dropout, recurrent=recurrent,
        key=jax.random.PRNGKey, split=jax.random.split, value_and_grad=jax.value_and_grad,
        leaves=jax.tree_util.tree_leaves, rebuild=rebuild, tree_map=jax.tree_util.tree_map,
        pytree_dataclass=lambda cls, data, meta: jax.tree_util.register_dataclass(cls, list(data),
                                                                                  list(meta)))


@jax.jit
def _split_key(key):
    """Two new keys from ``key``, as one program (unpacking ``jax.random.split``'s array of two keys
    eagerly is another program and two more calls, at every training step)."""
    first, second = jax.random.split(key)
    return first, second


class _Keys:
    """Where dropout gets its JAX keys: the host's key (eager calls), or, while a compiled function
    is traced, the key that function receives with each call."""

    def __init__(self, seed=0):
        self.host = jax.random.key(seed)
        self.traced, self.count = None, 0

    def next(self):
        if self.traced is not None:  # inside jit: a new key per dropout call, from the call's key
            self.count += 1
            return jax.random.fold_in(self.traced, self.count)
        self.host, key = _split_key(self.host)
        return key

    @contextlib.contextmanager
    def tracing(self, key):
        saved = self.traced, self.count
        self.traced, self.count = key, 0
        try:
            yield
        finally:
            self.traced, self.count = saved


_keys = _Keys()


def dropout(x, p):
    return _dropout(x, _keys.next(), float(p))


@functools.partial(jax.jit, static_argnums=2)
def _dropout(x, key, p):
    keep = jax.random.bernoulli(key, 1.0 - p, jnp.shape(x))
    return jnp.where(keep, x / (1.0 - p), 0.0).astype(x.dtype)


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    # Seed the shared NumPy generator (parameters and data come from it) and dropout's JAX key.
    global _keys
    _common.seed(seed)
    _keys = _Keys(int(seed))


def detach(x):
    # ``x`` without gradient tracking (``jax.lax.stop_gradient``).
    return jax.lax.stop_gradient(x)


def value_and_grad(f, has_aux=False):
    # ``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` with ``jax.value_and_grad``.
    vg = jax.value_and_grad(lambda params, *args: f(list(params), *args), has_aux=has_aux)

    def wrapped(params, *args):
        out, grads = vg(list(params), *args)
        if has_aux:
            value, aux = out
            return (value, _common.tree_map(detach, aux)), list(grads)
        return out, list(grads)

    return wrapped


def custom_vjp(fwd, bwd, differentiable=False):
    # ``fwd(*args) -> (outputs, residuals)`` computes a tuple of outputs; ``bwd(residuals,
    # *output_grads) -> input_grads`` returns one gradient per argument.

    @jax.custom_vjp
    def f(*args):
        return tuple(fwd(*args)[0])

    def f_fwd(*args):
        outputs, residuals = fwd(*args)
        return tuple(outputs), residuals

    def f_bwd(residuals, gs):
        return tuple(bwd(residuals, *gs))

    f.defvjp(f_fwd, f_bwd)
    return f


#: ``lax.scan``'s ``unroll``: how many steps each iteration of the compiled loop runs. One: the scratch
#: models' training steps ran no faster with 2, 4 or 7 (the LSTM's slower), and compiled longer.
SCAN_UNROLL = 1
#: ``scan(..., unroll=True)`` compiles T copies of the step for T up to this; longer loops stay loops.
UNROLL_MAX_STEPS = 64


def scan(step, carry, xs, reverse=False, unroll=False):
    # Traced (under ``jit`` or a gradient), ``jax.lax.scan``: XLA compiles ``step`` once, as a loop,
    # instead of T unrolled copies. On concrete arrays a Python loop over ``unstack``, as on the other
    # backends: there ``lax.scan`` would trace and compile a program at every call, the step being a new
    # closure each time (generating text token by token took 4x as long).
    if any(isinstance(a, jax.core.Tracer) for a in jax.tree_util.tree_leaves((carry, xs))):
        steps = jax.tree_util.tree_leaves(xs)[0].shape[0]
        copies = steps if unroll and steps <= UNROLL_MAX_STEPS else SCAN_UNROLL
        return jax.lax.scan(step, carry, xs, reverse=reverse, unroll=copies)
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


def _compile_one(fn, calls):
    # ``jax.jit(fn)``, compiled once per input shape; each call gets a fresh key for dropout. The same for
    # ``calls="few"``: run eagerly, each operation is compiled on its own at its first call per shape.
    #
    # Arguments that are not arrays (Python numbers, None) are part of what the compiled program is
    # specialised on, as ``jax.jit`` requires.

    def keyed(key, *args):
        with _keys.tracing(key):
            return fn(*args)

    jitted = jax.jit(keyed)

    def step(*args):
        return jitted(_keys.next(), *_committed(args))

    step.compilations = jitted._cache_size  # how many compiled programs so far (for tests)
    return step


#: ``compile`` with a ``key``: one jitted function per key (see ``_common.SharedPrograms``).
_shared_programs = _common.SharedPrograms(_compile_one)


def compile(fn, calls="many", key=None):  # noqa: A001
    return _shared_programs(fn, calls, key)


def _committed(args):
    """``args`` with every array placed on a device: ``jax.jit`` compiles a program again when an
    argument it saw uncommitted (made by ``jnp.asarray``, ``jnp.zeros``: fresh parameters, a begun state)
    comes back committed (every compiled program's output is), so a training step was compiled three
    times, for its first minibatch, its second and a new epoch's fresh state. Arrays already on a
    device, the common case, cost a look at one attribute each."""
    leaves, tree = jax.tree_util.tree_flatten(args)
    loose, placed = [], None
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, np.ndarray):
            loose.append(i)
        elif isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            if not leaf.committed:
                loose.append(i)
            elif placed is None:
                placed = leaf
    if not loose:
        return args
    device = next(iter(placed.devices())) if placed is not None else jax.devices()[0]
    for i in loose:
        leaves[i] = jax.device_put(leaves[i], device)
    return jax.tree_util.tree_unflatten(tree, leaves)


def autocast(dtype, device=None):
    return None  # JAX has no automatic mixed precision: a model casts its own arrays


def try_gpu(i=0):
    # GPU ``i`` if JAX sees one, else the CPU.
    gpus = [d for d in jax.devices() if d.platform == "gpu"] if _has_gpu() else []
    return gpus[i] if len(gpus) > i else cpu()


def _has_gpu():
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def cpu():
    return jax.devices("cpu")[0]


def num_gpus():
    # How many GPUs JAX sees.
    return len(jax.devices("gpu")) if _has_gpu() else 0


def to_device(x, device):
    # ``x`` placed on ``device``.
    return x if device is None else jax.device_put(x, device)


def device_of(x):
    # Arrays made without a device go to the default one and jit moves uncommitted inputs: nothing to say.
    return None


def set_num_threads(n):
    # XLA's CPU thread pool is sized when JAX starts: recorded for a process started afterwards.
    flags = f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={int(n)}"
    os.environ.setdefault("XLA_FLAGS", flags)
