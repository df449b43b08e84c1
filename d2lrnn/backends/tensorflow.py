"""TensorFlow backend: tensors are ``tf.Tensor``; gradients come from ``tf.GradientTape``.

``compile`` wraps a whole training step in ``tf.function``: eager TensorFlow
dispatches every small op from Python and is several times slower.

Importing it prints nothing: TensorFlow's C++ log threshold ``TF_CPP_MIN_LOG_LEVEL`` defaults
to 2 (errors only) unless the user set it, and the lines TensorFlow writes while it loads,
before its logging reads that threshold, are filtered by it here.
"""

import contextlib
import functools
import inspect

import numpy as np

from ..errors import BackendError
from . import _common, _tflog

_LEVEL = _tflog.log_level()
# The oneDNN notice ("custom operations are on") is logged at INFO before absl is initialised,
# so the threshold does not apply to it yet.
with _common.native_stderr_filtered(lambda text: _tflog.at_level(text, _LEVEL)):
    tf = _common.require("tensorflow", "tensorflow")


#: Keras 3 (what TensorFlow 2.16+ comes with) runs a layer on given weights with ``stateless_call``;
#: Keras 2 (``tf-keras`` with ``TF_USE_LEGACY_KERAS=1``, what the book's cells are written for) has none.
_KERAS3 = hasattr(tf.keras.layers.Layer, "stateless_call")


def _device_name(device):
    """A device name; a ``tf.distribute`` strategy (what the book's TensorFlow cells pass as the device)
    stands for its first worker device."""
    if isinstance(device, tf.distribute.Strategy):
        return device.extended.worker_devices[0]
    return device


def _on(device):
    return tf.device(_device_name(device)) if device is not None else contextlib.nullcontext()


# -- creating and converting -------------------------------------------------------------


def normal(mean, std, shape, device=None):
    return from_numpy(_common.normal_numpy(mean, std, shape), device)


def uniform(low, high, shape, device=None):
    return from_numpy(_common.uniform_numpy(low, high, shape), device)


def _dtype(dtype):
    """TensorFlow's dtype for a NumPy one, its name, or TensorFlow's own."""
    return tf.as_dtype(_common.numpy_dtype(dtype))


def zeros(shape, dtype=None, device=None):
    with _on(device):
        return tf.zeros(shape, dtype=_dtype(dtype or _common.FLOAT))


def ones(shape, dtype=None, device=None):
    with _on(device):
        return tf.ones(shape, dtype=_dtype(dtype or _common.FLOAT))


def zeros_like(x):
    return tf.zeros_like(x)


def arange(start, stop=None, step=1, dtype=None, device=None):
    return from_numpy(_common.arange_numpy(start, stop, step, dtype), device)


def tensor(data, dtype=None, device=None):
    if tf.is_tensor(data):
        return data if dtype is None else tf.cast(data, _dtype(dtype))
    with _on(device):  # not through from_numpy, whose float32/int64 defaults would override ``dtype``
        return tf.constant(_common.as_numpy(data, dtype))


def from_numpy(array, device=None):
    with _on(device):
        return tf.constant(_common.as_numpy(array))


def to_numpy(x):
    return np.asarray(x.numpy() if hasattr(x, "numpy") else x)  # .numpy() of a 0-d tensor is a NumPy scalar


def astype(x, dtype):
    return tf.cast(x, _dtype(dtype))


def shape(x):
    return tuple(x.shape)


def size(x):
    return int(np.prod(x.shape))


def is_tensor(x):
    return tf.is_tensor(x)


# -- shaping -------------------------------------------------------------------------------


def reshape(x, shape):
    return tf.reshape(x, shape)


def transpose(x, axes=None):
    rank = x.shape.rank if tf.is_tensor(x) else None
    if rank is not None and x.dtype in (tf.int32, tf.int64):
        # With oneDNN on, TensorFlow's Transpose logs an error line for integer tensors ("oneDNN
        # supports DT_INT64 only on platforms with AVX-512", once per process) and falls back to
        # Eigen. Einsum's own transpose moves the same values without it.
        letters = "abcdefghijklmnopqrstuvwxyz"[:rank]
        order = range(rank - 1, -1, -1) if axes is None else axes
        return tf.einsum(f"{letters}->{''.join(letters[i] for i in order)}", x)
    return tf.transpose(x, perm=axes)


def concat(tensors, axis=0):
    return tf.concat(list(tensors), axis=axis)


def stack(tensors, axis=0):
    return tf.stack(list(tensors), axis=axis)


def unstack(x, axis=0):
    return tf.unstack(x, axis=axis)


def take(x, indices, axis=0):
    return tf.gather(x, indices, axis=axis)


# -- arithmetic ------------------------------------------------------------------------------


def matmul(a, b):
    if a.shape.rank is not None and a.shape.rank > 2 and b.shape.rank == 2:
        # (..., k) @ (k, n) as one 2-D product: TensorFlow's broadcasting BatchMatMul runs it (and its
        # gradient, a product per leading index then a sum) several times slower on the CPU.
        shape = a.shape[:-1] + b.shape[-1:]
        shape = shape if shape.is_fully_defined() else tf.concat([tf.shape(a)[:-1], tf.shape(b)[-1:]], 0)
        return tf.reshape(tf.matmul(tf.reshape(a, (-1, tf.shape(a)[-1])), b), shape)
    return tf.matmul(a, b)


class _PackedWeight:
    """What :func:`prepack_linear` makes of W: its transpose, stored, for :func:`linear`."""

    __slots__ = ("W_T",)

    def __init__(self, W_T):
        self.W_T = W_T


def dense(X, W, b):
    return matmul(X, W) + b


def linear(X, W, b=None):
    if isinstance(W, _PackedWeight):
        Y = tf.matmul(X, W.W_T)
    else:
        Y = tf.matmul(X, W, transpose_b=True)
    return Y if b is None else Y + b


def prepack_linear(W):
    # W^T stored once: TensorFlow's CPU product X W^T with the transpose flag costs 2.5-6x the product
    # with W^T stored ((32, 512..2048) rows times a weight, 2 threads: 13-20 against 34-65 GFLOP/s), and
    # the scans' backward passes ask for it T times a step.
    return _PackedWeight(_stored_transpose(W))


@tf.custom_gradient
def _stored_transpose(W):
    # Snapshot (a copy) keeps grappler from folding the transpose back into the product's flag; a forward
    # pass's transpose(transpose(W)) it still removes. TensorFlow defines no gradient for Snapshot.
    return tf.raw_ops.Snapshot(input=tf.transpose(W)), tf.transpose


def tanh(x):
    return tf.tanh(x)


def tanh_grad(Y, dY):
    return tf.raw_ops.TanhGrad(y=Y, dy=dY)  # the kernel tf.tanh's own gradient uses


def sigmoid(x):
    return tf.sigmoid(x)


def sigmoid_grad(Y, dY):
    return tf.raw_ops.SigmoidGrad(y=Y, dy=dY)  # the kernel tf.sigmoid's own gradient uses


def relu(x):
    return tf.nn.relu(x)


def exp(x):
    return tf.exp(x)


def sin(x):
    return tf.sin(x)


def log(x):
    return tf.math.log(x)


def sqrt(x):
    return tf.sqrt(x)


def abs(x):  # noqa: A001
    return tf.abs(x)


def maximum(x, y):
    return tf.maximum(x, y)


def minimum(x, y):
    return tf.minimum(x, y)


# -- reductions ------------------------------------------------------------------------------


def sum(x, axis=None, keepdims=False):  # noqa: A001
    return tf.reduce_sum(x, axis=axis, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    return tf.reduce_mean(x, axis=axis, keepdims=keepdims)


def max(x, axis=None, keepdims=False):  # noqa: A001
    return tf.reduce_max(x, axis=axis, keepdims=keepdims)


def argmax(x, axis=None):
    if axis is None:
        return tf.argmax(tf.reshape(x, [-1]), axis=0)
    return tf.argmax(x, axis=axis)


def sum_of_squares(tensors):
    return _common.sum_of_squares(tensors, sum)


def nonfinite_probe(tensors):
    return _common.nonfinite_probe(tensors, sum)


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    return _common.adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, sqrt)


# -- classification ----------------------------------------------------------------------------


def one_hot(indices, depth):
    return tf.one_hot(indices, depth, dtype=tf.float32)


def softmax(x, axis=-1):
    return tf.nn.softmax(x, axis=axis)


def log_softmax(x, axis=-1):
    return tf.nn.log_softmax(x, axis=axis)


def softmax_cross_entropy(logits, labels):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.reshape(labels, [-1]), logits=logits)


# -- the recurrent layer ---------------------------------------------------------------------


def _keras_classes():
    keras = tf.keras
    return {"rnn": keras.layers.SimpleRNN, "gru": keras.layers.GRU, "lstm": keras.layers.LSTM}


def _built(layer, num_inputs):
    if not layer.built:
        layer.build((None, None, num_inputs))
    return layer


def _build(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after):
    # Keras has one layer per stacked layer: d2lrnn's adapter stacks them, with dropout between.
    layers = []
    for i in range(num_layers):
        kwargs = {"reset_after": reset_after} if cell == "gru" else {}
        layer = _keras_classes()[cell](num_hiddens, return_sequences=True, return_state=True, **kwargs)
        if bidirectional:
            layer = tf.keras.layers.Bidirectional(layer)
        layers.append(_built(layer, num_inputs if i == 0 else (2 if bidirectional else 1) * num_hiddens))
    return layers


def _layers(layer):
    """A Keras layer, a list of them or a ``keras.Sequential``, as a list (each ``keras.layers.RNN`` of
    one cell as the layer of that cell, see ``_standard``)."""
    if isinstance(layer, tf.keras.Sequential):
        layers = list(layer.layers)
    else:
        layers = list(layer) if isinstance(layer, (list, tuple)) else [layer]
    return [standard for one in layers for standard in _standard(one)]


def _standard(layer):
    """``keras.layers.RNN(GRUCell(...))`` (the book's TensorFlow form) as ``[keras.layers.GRU]`` with the
    same settings (likewise SimpleRNN and LSTM), ``keras.layers.RNN(StackedRNNCells([...]))`` as one such
    layer per cell; any other layer as ``[layer]``."""
    if type(layer) is not tf.keras.layers.RNN:
        return [layer]
    keras = tf.keras.layers
    stacked = isinstance(layer.cell, keras.StackedRNNCells)
    cells = list(layer.cell.cells) if stacked else [layer.cell]
    names = {keras.SimpleRNNCell: "rnn", keras.GRUCell: "gru", keras.LSTMCell: "lstm"}
    kinds = [names.get(type(c)) for c in cells]
    if None in kinds:
        return [layer]
    flags = {"return_sequences": layer.return_sequences or stacked, "return_state": layer.return_state,
             "go_backwards": layer.go_backwards, "stateful": layer.stateful}
    return [_keras_classes()[kind].from_config({**{k: v for k, v in cell.get_config().items() if k != "name"},
                                                **flags})
            for kind, cell in zip(kinds, cells)]


def _describe_one(layer):
    unsupported = []
    bidirectional = isinstance(layer, tf.keras.layers.Bidirectional)
    if bidirectional:
        if layer.merge_mode != "concat":
            unsupported.append(f"merge_mode={layer.merge_mode!r}")
        layer = layer.forward_layer
    cell = next((name for name, cls in _keras_classes().items() if type(layer) is cls), None)
    if cell is None:
        return None, []
    config = layer.get_config()
    wanted = {"activation": "tanh", "use_bias": True, "dropout": 0.0, "recurrent_dropout": 0.0,
              "go_backwards": False, "stateful": False}
    if cell != "rnn":
        wanted["recurrent_activation"] = "sigmoid"
    unsupported += [f"{key}={config[key]!r}" for key, value in wanted.items()
                    if config.get(key, value) != value]
    num_inputs = int(layer.cell.kernel.shape[0]) if layer.built else None
    return {"cell": cell, "num_inputs": num_inputs, "num_hiddens": int(layer.units),
            "bidirectional": bidirectional,
            "reset_after": bool(config.get("reset_after", False))}, unsupported


def _describe(layer):
    described = [_describe_one(one) for one in _layers(layer)]
    if not described or any(config is None for config, _ in described):
        return None, []
    first, unsupported = described[0][0], [u for _, us in described for u in us]
    if any({**config, "num_inputs": None} != {**first, "num_inputs": None} for config, _ in described[1:]):
        unsupported.append("stacked layers of different cells, sizes or directions")
    return {**first, "num_layers": len(described), "dropout": 0.0}, unsupported


def _prepare(layer, num_inputs):
    """Copies of the reader's layers that return every step and the final states (what d2lrnn needs)."""
    layers = []
    for i, one in enumerate(_layers(layer)):
        inner = one.forward_layer if isinstance(one, tf.keras.layers.Bidirectional) else one
        copy = type(inner).from_config({**inner.get_config(), "return_sequences": True, "return_state": True})
        if isinstance(one, tf.keras.layers.Bidirectional):  # in the wrapper's dtype (float64 in tests)
            copy = tf.keras.layers.Bidirectional(copy, dtype=one.dtype_policy)
        bidirectional = isinstance(copy, tf.keras.layers.Bidirectional)
        units = copy.forward_layer.units * 2 if bidirectional else copy.units
        layers.append(_built(copy, num_inputs if i == 0 else units))
    return layers


def _call(layer, weights, X, states, training):
    stacked_bias = len(layer.trainable_variables[2].shape) == 2  # the reset-after GRU: [input; recurrent]
    params = []
    for W_x, W_h, b_x, b_h in weights:
        params += [W_x, W_h, tf.stack([b_x, b_h]) if stacked_bias else b_x]
    # Keras is batch-major; the layer runs with our tensors as its weights.
    Y, *out = _stateless(layer, params, tf.transpose(X, [1, 0, 2]),
                         initial_state=[s for slot in states for s in slot], training=training)
    n = len(states[0])
    return tf.transpose(Y, [1, 0, 2]), [tuple(out[i * n:(i + 1) * n]) for i in range(len(states))]


_NATIVE = _common.NativeRNN(
    layer_names="keras.layers.SimpleRNN, GRU or LSTM, a Bidirectional of one, or a list of them",
    gate_order={"rnn": "h", "gru": "zrh", "lstm": "ifco"},
    transposed=False, stacks_layers=False, gru_forms=(True, False),
    build=_build, describe=_describe, prepare=_prepare, call=_call)


def native_rnn():
    # Keras's ``SimpleRNN``, ``GRU`` and ``LSTM``, declared for d2lrnn's adapter (see ``NativeRNN``).
    return _NATIVE


def _is_module(obj):
    return isinstance(obj, (tf.Module, tf.keras.layers.Layer))


def _module_params(obj):
    return list(obj.trainable_variables) if _is_module(obj) else None


def _takes_training(layer):
    return _call_takes_training(type(layer))


@functools.cache
def _call_takes_training(cls):
    """Whether a Keras layer class's ``call`` takes ``training`` (read once per class: this runs at
    every training step of a reader's own model)."""
    try:
        parameters = inspect.signature(cls.call).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "training" or p.kind is p.VAR_KEYWORD for p in parameters)


def _call_with(layer, params, *args, training=None):
    kwargs = {"training": training} if training is not None and _takes_training(layer) else {}
    return _stateless(layer, params, *args, **kwargs)


def _stateless(layer, params, *args, **kwargs):
    """``layer(*args, **kwargs)`` with ``params`` as its trainable variables' values. Keras 3: its
    ``stateless_call``, the non-trainable variables it advances (the dropout seed generators) written
    back. Keras 2 has none: the attributes of the layer and its sublayers that hold those variables
    hold the tensors while it runs (as ``torch.func.functional_call`` swaps a module's parameters)."""
    if _KERAS3:
        own = layer.non_trainable_variables
        outputs, advanced = layer.stateless_call(list(params), [v.value for v in own], *args, **kwargs)
        for v, value in zip(own, advanced):
            v.assign(value)
        return outputs
    with _weights_as(layer, params):
        return layer(*args, **kwargs)


@contextlib.contextmanager
def _weights_as(layer, params):
    """Keras 2: ``layer``'s trainable variables replaced by ``params`` where its (sub)layers hold them,
    around Keras's attribute tracking (which would record the tensors as weights), and put back."""
    values = {id(v): p for v, p in zip(layer.trainable_variables, params)}
    swapped = []
    for sub in layer._flatten_layers(include_self=True, recursive=True):
        for name, attr in list(vars(sub).items()):
            if isinstance(attr, tf.Variable) and id(attr) in values:
                object.__setattr__(sub, name, values[id(attr)])
                swapped.append((sub, name, attr))
    try:
        if len({id(attr) for _, _, attr in swapped}) < len(values):
            raise BackendError(f"cannot run {type(layer).__name__} on given weights under Keras 2: some of "
                               "its variables are not attributes of its layers")
        yield
    finally:
        for sub, name, attr in swapped:
            object.__setattr__(sub, name, attr)


def _call_loss(loss, y_hat, y):
    return loss(y, y_hat) if isinstance(loss, tf.keras.losses.Loss) else loss(y_hat, y)


def _infer_shapes(layer, *args):
    if not layer.built:
        kwargs = {"training": False} if _takes_training(layer) else {}
        layer(*args, **kwargs)


class _BookLayer(tf.keras.layers.Layer):
    """A Keras layer whose ``build`` waits for the first call, where its sublayers shape themselves: the
    book's encoder and decoder take ``*args``, which Keras 3 cannot trace to build them ahead (it warns
    that the layer has unbuilt state)."""

    def build(self, *args, **kwargs):
        pass


class _BookModel(tf.keras.Model):
    """A Keras model whose ``build`` waits for the first call (see ``_BookLayer``)."""

    def build(self, *args, **kwargs):
        pass


def _tape_gradients(fn, variables):
    with tf.GradientTape() as tape:
        loss = fn()
    return loss, tape.gradient(loss, variables)


def _book_layer(cell, num_hiddens, num_layers, dropout):
    """The book's Keras 2 layers: a time-major ``SimpleRNN``, or an ``RNN`` over ``num_layers`` GRU cells,
    giving their outputs and states (Keras 3 has no time-major layers: it refuses them in one line)."""
    if _KERAS3:
        raise BackendError("the 1.0 edition's d2l.RNN and d2l.GRU are Keras 2 layers (time_major=True), "
                           "which Keras 3 does not have: run with TF_USE_LEGACY_KERAS=1 and tf-keras "
                           "installed")
    if cell == "rnn":
        return tf.keras.layers.SimpleRNN(num_hiddens, return_sequences=True, return_state=True,
                                         time_major=True)
    cells = [tf.keras.layers.GRUCell(num_hiddens, dropout=dropout) for _ in range(num_layers)]
    return tf.keras.layers.RNN(cells, return_sequences=True, return_state=True, time_major=True)


def _run_layer(layer, inputs, H):
    """The book's Keras ``RNN.forward`` (the state H) and ``GRU.forward`` (the list of each layer's)."""
    outputs, *state = layer(inputs, H)
    return outputs, state[0] if isinstance(layer, tf.keras.layers.SimpleRNN) else state


def _set_training(module, mode):
    module.training = mode


def _parameter(x):
    """A trainable variable a Keras model tracks as an attribute: ``tf.Variable`` (Keras 2, the book's),
    ``keras.Variable`` (Keras 3 does not track a ``tf.Variable``)."""
    return tf.keras.Variable(x) if _KERAS3 else tf.Variable(x)


def _dense(num_outputs, sigma=None):
    """Keras's ``Dense``, its kernel ~ N(0, sigma^2) where sigma is given (Glorot's uniform otherwise)."""
    kernel_init = "glorot_uniform" if sigma is None else tf.keras.initializers.RandomNormal(stddev=sigma)
    return tf.keras.layers.Dense(num_outputs, kernel_initializer=kernel_init)


_IN_PLACE_HOOKS = _common.InPlaceHooks(grad=None, set_grad=None, assign=lambda v, value: v.assign(value),
                                 is_variable=lambda x: isinstance(x, tf.Variable),
                                 is_module=_is_module, module_params=_module_params, call_with=_call_with,
                                 device_keyword=None,
                                 # the book's train_ch8 asks for the state in float32, which Keras 2's
                                 # get_initial_state needs and Keras 3's refuses
                                 begin_state_extra=() if _KERAS3 else (("dtype", tf.float32),),
                                 module_bases=(_BookLayer, _BookModel, "call"),
                                 infer_shapes=_infer_shapes, call_loss=_call_loss,
                                 dense_grad=tf.convert_to_tensor, parameter=_parameter,
                                 no_grad=contextlib.nullcontext, set_training=_set_training,
                                 dense=_dense,
                                 embedding=lambda n, d: tf.keras.layers.Embedding(n, d),
                                 run_layer=_run_layer, tape_gradients=_tape_gradients,
                                 book_layer=_book_layer)


def in_place_hooks():
    # TensorFlow attaches no gradients (``tape.gradient`` returns them); the book's parameters are
    # ``tf.Variable``s, assigned in place by ``d2l.sgd(params, grads, lr, batch_size)``.
    return _IN_PLACE_HOOKS


#: Where dropout's random numbers come from: a generator of d2lrnn's own, which ``manual_seed`` resets, not
#: TensorFlow's global seed. ``tf.random.set_seed`` clears every kernel TensorFlow keeps, so the next call
#: of each compiled step instantiated its program again (0.4 s for a GRU's training step), and the random
#: kernels of a program traced before it, whose streams it restarts, are the program's own: a program
#: shared by models of one structure (``compile(..., key=)``) draws from this one generator instead.
_dropout_seeds = None
_dropout_seed = 0  # what the generator starts from when it is made


def _dropout_generator():
    # Made at its first use, not at import: TensorFlow's thread settings (``set_num_threads``) can change
    # only until it first runs an operation. Outside any trace (a variable made inside one would be the
    # trace's); a compiled step makes it before its first call.
    global _dropout_seeds
    if _dropout_seeds is None:
        with tf.init_scope():
            _dropout_seeds = tf.random.Generator.from_seed(_dropout_seed)
    return _dropout_seeds


def dropout(x, p):
    # The mask from a stateless draw whose seed comes from the generator (a variable: a compiled step reads
    # and advances it at each call).
    return tf.nn.experimental.stateless_dropout(x, rate=p, seed=_dropout_generator().make_seeds(1)[:, 0])


# -- randomness, gradients, compilation, devices --------------------------------------------


def manual_seed(seed):
    # Seed the shared NumPy generator and dropout's (``_dropout_seeds``, if made yet).
    global _dropout_seed
    _common.seed(seed)
    _dropout_seed = int(seed)
    if _dropout_seeds is not None:
        _dropout_seeds.reset_from_seed(_dropout_seed)


def detach(x):
    return tf.stop_gradient(x)


def _dense(g, p):
    if g is None:
        return tf.zeros_like(p)
    return tf.convert_to_tensor(g)  # a gather's gradient is IndexedSlices


def value_and_grad(f, has_aux=False):
    # ``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` with tf.GradientTape.

    def wrapped(params, *args):
        params = list(params)
        # A Keras 3 variable (a Keras model's own weights, the book's form) is watched through the
        # tf.Variable it holds: the tape takes no Keras variable.
        watched = [p.value if _KERAS3 and isinstance(p, tf.keras.Variable) else p for p in params]
        with tf.GradientTape() as tape:
            tape.watch(watched)
            out = f(params, *args)
        value, aux = out if has_aux else (out, None)
        grads = [_dense(g, p) for g, p in zip(tape.gradient(value, watched), params)]
        if has_aux:
            return (value, _common.tree_map(detach, aux)), grads
        return value, grads

    return wrapped


def custom_vjp(fwd, bwd, differentiable=False):

    @tf.custom_gradient
    def f(*args):
        outputs, residuals = fwd(*args)
        outputs = tuple(outputs)

        def grad(*gs):
            gs = [tf.zeros_like(o) if g is None else g for g, o in zip(gs, outputs)]
            return list(bwd(residuals, *gs))

        return outputs, grad

    return f


def scan(step, carry, xs, reverse=False, unroll=False):
    # A Python loop (in a ``tf.function`` graph, one copy of ``step`` per step): each input
    # unstacked once, each output stacked once.
    return _common.loop_scan(step, carry, xs, reverse, unstack, stack)


#: What tracing raises for Python code that graphs cannot hold, such as the book's loop
#: ``for X in inputs: ... outputs.append(Y)`` over a tensor: iterating over a traced tensor is refused
#: (with AutoGraph, a user's own ``tf.function``, the loop becomes a ``tf.while_loop`` and the list then
#: holds tensors of the loop's inner graph, refused when they are used).
try:
    from tensorflow.python.framework.errors_impl import InaccessibleTensorError
except ImportError:  # moved: any ValueError while tracing then falls back (and, if real, recurs eagerly)
    InaccessibleTensorError = ValueError
_NOT_GRAPHABLE = (InaccessibleTensorError, tf.errors.OperatorNotAllowedInGraphError)


def _compile_one(fn, calls):
    # ``tf.function(fn)``: traced once per input signature, then run as one graph. With ``calls="few"``
    # ``fn`` itself: a trace costs more than a few eager calls (a greedy search of 300 sentences took 1.4 s
    # traced and 0.45 s eagerly on its first call).
    #
    # Each distinct input shape gets its own trace (a short last minibatch is a second one): with
    # ``reduce_retracing`` TensorFlow would instead trace once more with unknown dimensions, and
    # the time loop and reshapes above the shim need known ones. Code that cannot be traced (a
    # reader's own forward function written as the book writes it: a Python loop over the time
    # steps of a tensor that appends to a list) runs eagerly instead, slower but the same numbers,
    # as the book's TensorFlow code itself runs it.
    #
    # Without AutoGraph: d2lrnn's compiled code has no Python branch or loop on a tensor's value (JAX's
    # ``jit`` could not trace it either), so converting it to graph control flow only costs time (a
    # tenth of the TensorFlow tests' time) and leaves a generated source file per function in the
    # temporary folder. A reader's loop over a tensor's steps is refused by the trace either way and
    # runs eagerly, as above.
    if calls == "few":
        return fn
    graph = tf.function(fn, reduce_retracing=False, autograph=False)
    eager = False

    def step(*args):
        nonlocal eager
        _dropout_generator()  # made before any trace: a variable made inside one makes it trace twice
        if not eager:
            try:
                return graph(*args)
            except _NOT_GRAPHABLE:
                eager = True
        return fn(*args)

    step.compilations = graph.experimental_get_tracing_count  # how many traces so far (for tests)
    return step


#: ``compile`` with a ``key``: one traced function per key (see ``_common.SharedPrograms``).
_shared_programs = _common.SharedPrograms(_compile_one)


def compile(fn, calls="many", key=None):  # noqa: A001
    return _shared_programs(fn, calls, key)


class DeviceName(str):
    """A device name, e.g. ``'/CPU:0'``, that also does what the book's TensorFlow cells do with the
    ``tf.device`` object their ``try_gpu`` returns: ``._device_name``, and ``with d2l.try_gpu():``."""

    @property
    def _device_name(self):
        return str(self)

    def __enter__(self):
        self._scope = tf.device(str(self))
        return self._scope.__enter__()

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)


def autocast(dtype, device=None):
    return None  # Keras's mixed precision is a global policy for its layers, not a context


def try_gpu(i=0):
    return DeviceName(f"/GPU:{i}") if num_gpus() > i else cpu()


def cpu():
    return DeviceName("/CPU:0")


def num_gpus():
    # How many GPUs TensorFlow sees.
    return len(tf.config.list_physical_devices("GPU"))


def to_device(x, device):
    # ``x`` copied to ``device`` (a device name, or a ``tf.distribute`` strategy's device).
    if device is None:
        return x
    with tf.device(_device_name(device)):
        return tf.identity(x)


def device_of(x):
    # TensorFlow copies an operation's inputs to where it runs: nothing to say.
    return None


def set_num_threads(n):
    # Limit TensorFlow's thread pools (only possible before it first runs an op).
    try:
        tf.config.threading.set_intra_op_parallelism_threads(int(n))
        tf.config.threading.set_inter_op_parallelism_threads(int(n))
    except RuntimeError:
        pass  # already initialised: the setting cannot change any more
