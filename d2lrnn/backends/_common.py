"""Pieces every backend module shares: the seeded NumPy generator, dtype rules, imports, malloc."""

import builtins
import collections
import contextlib
import ctypes
import dataclasses
import functools
import importlib
import operator
import os
import sys
import tempfile
import threading

import numpy as np

from .. import checks
from ..errors import ArgumentError, BackendError

_rng = np.random.default_rng(0)

FLOAT = np.float32
INT = np.int64


def generator():
    """The NumPy ``Generator`` behind ``normal`` and ``uniform``: every backend draws the same numbers."""
    return _rng


def seed(value):
    """Reset the shared generator (``value``: a whole number >= 0)."""
    global _rng
    _rng = np.random.default_rng(checks.seed(value))


def generator_state():
    """The shared generator's state as plain data (JSON-friendly), e.g. for resuming a run."""
    return _rng.bit_generator.state


def set_generator_state(state):
    """Put the shared generator back into a state saved with :func:`generator_state`."""
    _rng.bit_generator.state = state


@contextlib.contextmanager
def generator_state_kept():
    """Run a block that draws from the shared generator, then put its state back."""
    saved = _rng.bit_generator.state
    try:
        yield
    finally:
        _rng.bit_generator.state = saved


def numpy_dtype(dtype):
    """``dtype`` as NumPy's (None stays None): a NumPy dtype or its name, or a framework's own dtype as the
    book's cells pass it (``torch.int64``, ``tf.float32``, ``paddle.int64``), so that every backend takes
    both forms wherever a function takes a dtype."""
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError:
        pass
    as_numpy_dtype = getattr(dtype, "as_numpy_dtype", None)  # TensorFlow's DType
    if as_numpy_dtype is not None:
        return np.dtype(as_numpy_dtype)
    name = str(dtype).rsplit(".", 1)[-1]  # torch.int64, paddle.float32
    try:
        return np.dtype(name)
    except TypeError:
        raise ArgumentError(f"dtype {dtype!r} is not one d2lrnn knows: give a NumPy dtype or name "
                            "('float32', 'int64') or the framework's own (torch.int64, tf.float32)") from None


def as_numpy(data, dtype=None):
    """``data`` as a NumPy array with d2lrnn's defaults: floats are float32, integers int64."""
    a = np.asarray(data, dtype=numpy_dtype(dtype))
    if dtype is None:
        if np.issubdtype(a.dtype, np.floating):
            a = a.astype(FLOAT, copy=False)
        elif np.issubdtype(a.dtype, np.integer):
            a = a.astype(INT, copy=False)
    return a


def normal_numpy(mean, std, shape):
    """Draw float32 normals from the shared generator."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return _rng.normal(mean, std, shape).astype(FLOAT)


def uniform_numpy(low, high, shape):
    """Draw float32 samples of U(low, high) from the shared generator."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return _rng.uniform(low, high, shape).astype(FLOAT)


def arange_numpy(start, stop=None, step=1, dtype=None):
    """``np.arange`` with d2lrnn's dtype rules (integers stay int64, floats become float32)."""
    # with stop None, np.arange reads start as the stop and still honours step (arange(5, step=2))
    a = np.arange(start, stop, step)
    return as_numpy(a, dtype)


def require(package, backend, extra=None):
    """Import ``package`` for ``backend`` or raise a one-line error with the install command."""
    try:
        return importlib.import_module(package)
    except ImportError as err:
        raise BackendError(
            f"backend {backend!r} needs the package {package!r}, which could not be imported "
            f"({err.__class__.__name__}: {str(err).splitlines()[0] if str(err) else 'missing'}): "
            f'run pip install "d2lrnn[{extra or backend}]"'
        ) from None


#: Where Linux describes the CPU.
CPUINFO = "/proc/cpuinfo"


def _cpuinfo_field(name):
    """The first ``name`` line's value in :data:`CPUINFO`, or "" where there is none (not Linux)."""
    with contextlib.suppress(OSError), open(CPUINFO, encoding="ascii", errors="replace") as f:
        for line in f:
            if line.startswith(name):
                return line.split(":", 1)[1].strip()
    return ""


def cpu_vendor():
    """The CPU's vendor as Linux names it (``GenuineIntel``, ``AuthenticAMD``), or "" where unknown."""
    return _cpuinfo_field("vendor_id")


def cpu_flags():
    """The CPU's instruction sets as Linux names them (``avx2``, ``avx512f``, ...); empty where unknown."""
    return frozenset(_cpuinfo_field("flags").split())


#: ``OMP_NUM_THREADS`` as it was when d2lrnn was imported: the user's setting, before a framework that
#: sets it when it loads (Paddle) has changed it.
OMP_NUM_THREADS_AT_IMPORT = os.environ.get("OMP_NUM_THREADS")


def _flush_stderr():
    with contextlib.suppress(AttributeError, OSError, ValueError):
        sys.stderr.flush()


@contextlib.contextmanager
def native_stderr_filtered(keep):
    """Run a block with file descriptor 2 sent to a temporary file, then write back ``keep(text)``.

    Frameworks written in C++ log to the process's stderr as they load, below Python's
    ``sys.stderr`` (which a notebook kernel replaces), so only the descriptor catches them.
    ``keep`` gets everything written meanwhile and returns the part to show (a Python warning,
    an import error's context), which goes to ``sys.stderr`` once the block ends. Without a
    usable descriptor 2 the block runs as is.
    """
    _flush_stderr()
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with tempfile.TemporaryFile() as captured:
        try:
            os.dup2(captured.fileno(), 2)
            yield
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", errors="replace")
            kept = keep(text) if text else ""
            if kept and sys.stderr is not None:
                sys.stderr.write(kept)
                _flush_stderr()


def tree_map(fn, tree):
    """Apply ``fn`` to every tensor in nested tuples/lists (used to detach auxiliary outputs)."""
    if isinstance(tree, (tuple, list)):
        return type(tree)(tree_map(fn, t) for t in tree)
    if tree is None or isinstance(tree, (int, float, str)):
        return tree
    return fn(tree)


def loop_scan(step, carry, xs, reverse, unstack, stack):
    """``scan`` as a Python loop, for the backends without a loop of their own in a compiled program.

    Each input is unstacked once, ``step`` runs on each step's slices (the last step first with
    ``reverse``), and each output is stacked once at the end, in the steps' order: the operations a
    loop written by hand would do.
    """
    columns = [unstack(x) for x in xs] if isinstance(xs, tuple) else [unstack(xs)]
    lengths = sorted({len(c) for c in columns})
    if len(lengths) != 1 or lengths[0] == 0:
        raise ArgumentError(f"scan: every input needs the same number of steps along axis 0, at least 1; "
                            f"got {lengths}")
    slices = list(zip(*columns)) if isinstance(xs, tuple) else columns[0]
    T = len(slices)
    ys = [None] * T
    for t in reversed(range(T)) if reverse else range(T):
        carry, ys[t] = step(carry, slices[t])
    if isinstance(ys[0], tuple):
        return carry, tuple(stack(column) for column in zip(*ys))
    return carry, stack(ys)


#: Largest block glibc's malloc may serve from its heap instead of a fresh mmap (glibc's maximum).
MALLOC_MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap that glibc keeps instead of handing back to the OS.
MALLOC_TRIM_THRESHOLD = 256 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameter numbers (malloc.h)


class SharedPrograms:
    """``compile(fn, calls, key)`` for a backend that traces (``compile_one(fn, calls)``): one compiled
    function per ``(calls, key)``, shared by every ``fn`` compiled with that key.

    A key says that every function compiled with it computes the same function of its arguments (the
    step of a model of one structure, optimizer and clipping), so a new model of an earlier one's
    structure (a notebook's cell run again, a resumed run, the next run of a sweep) runs the programs
    already traced instead of tracing them again (TensorFlow: about a second for a GRU's training step).
    Each compiled function calls, through a per-thread slot, the ``fn`` of the call in progress: it keeps
    no caller's function, or the model behind it, alive between calls. The ``SIZE`` keys used last are
    kept. ``compilations()`` counts the programs a caller's own calls made.
    """

    SIZE = 32

    def __init__(self, compile_one):
        self.compile_one = compile_one
        self.entries = collections.OrderedDict()  # (calls, key) -> (compiled, slot)

    def clear(self):
        self.entries.clear()

    def __call__(self, fn, calls="many", key=None):
        if key is None:
            return self.compile_one(fn, calls)
        entry = self.entries.get((calls, key))
        if entry is None:
            slot = threading.local()
            compiled = self.compile_one(lambda *args: slot.fn(*args), calls)
            if not hasattr(compiled, "compilations"):  # compiled as itself (calls="few" on TensorFlow)
                return self.compile_one(fn, calls)
            entry = self.entries[(calls, key)] = (compiled, slot)
            while len(self.entries) > self.SIZE:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end((calls, key))
        compiled, slot = entry
        made = 0

        def call(*args):
            nonlocal made
            before, outer = compiled.compilations(), getattr(slot, "fn", None)
            slot.fn = fn
            try:
                return compiled(*args)
            finally:
                slot.fn = outer
                made += compiled.compilations() - before

        call.compilations = lambda: made
        return call


@functools.lru_cache(maxsize=1)
def keep_freed_memory():
    """Let glibc's malloc reuse freed blocks of up to 32 MB instead of returning them to the OS.

    A training step allocates and frees arrays of a few MB (stacked hidden states and their
    gradients). With glibc's defaults they become fresh mmaps or a trimmed heap top, so every
    step touches new pages: on the numpy backend ~1,400 page faults and ~5 ms of kernel time per
    step of the book's model, gone with these settings. Process-wide; called once when the first
    backend loads. ``D2LRNN_MALLOC=default`` leaves malloc alone. Returns whether it applied.
    """
    if os.environ.get("D2LRNN_MALLOC", "").strip().lower() == "default":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process already uses
    except (OSError, AttributeError):  # not glibc (macOS, Windows): nothing to tune
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, MALLOC_TRIM_THRESHOLD))


# -- native recurrent layers -------------------------------------------------------------------


#: The order in which cuDNN-style layers (torch, Gluon) store the gates, in the book's gate letters.
CUDNN_GATE_ORDER = {"rnn": "h", "gru": "rzh", "lstm": "ifco"}


@dataclasses.dataclass(frozen=True)
class NativeRNN:
    """A backend's declaration of its own recurrent layers, used by ``d2lrnn.models.native``.

    Gates are named by the book's letters (GRU: z, r, h; LSTM: i, f, o, c). Weights are passed
    per layer and direction (layer-major, forward first) as ``[W_x, W_h, b_x, b_h]``: the gates'
    input weights, recurrent weights, input biases and recurrent biases, concatenated in
    ``gate_order``, with the weights transposed to (gates * hiddens, inputs) when ``transposed``.
    States are passed the same way, one tuple (H,) or (H, C) per layer and direction.

    - ``build(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after)``
      makes a layer (Keras: a list of one layer per stacked layer);
    - ``describe(layer) -> (config, unsupported)``: the settings of a layer the reader built
      (a dict with cell, num_inputs (None if unknown), num_hiddens, num_layers, bidirectional,
      dropout, reset_after) and the settings d2lrnn cannot run, e.g. ``["batch_first=True"]``;
      ``(None, [])`` for an object that is not a recurrent layer;
    - ``prepare(layer, num_inputs)``: that layer, ready for ``call``;
    - ``call(layer, weights, X, states, training) -> (Y, states)`` for time-major X of shape
      (num_steps, batch, inputs) and Y of shape (num_steps, batch, directions * hiddens);
    - ``weights(layer)``: the layer's own weights as ``call`` takes them (the book's ``RNNModel`` keeps
      a reader's layer's initialization), or None where they cannot be read before the layer's first
      call; ``weights`` is None where the backend declares no reading.
    """

    layer_names: str
    gate_order: dict
    transposed: bool
    stacks_layers: bool
    gru_forms: tuple  # the GRU forms the framework computes: reset_after True and/or False
    build: object
    describe: object
    call: object
    prepare: object = staticmethod(lambda layer, num_inputs: layer)  # default: the layer as built
    weights: object = None

    def supports(self, cell, reset_after=False):
        """Whether the framework has a layer computing ``cell`` (in the given GRU form)."""
        return cell in self.gate_order and (cell != "gru" or reset_after in self.gru_forms)


@dataclasses.dataclass(frozen=True)
class InPlaceHooks:
    """A backend's declaration of what the book's own training cells do in place on its framework.

    The book trains the PyTorch and MXNet way: a backward pass attaches a gradient to every parameter,
    ``sgd`` and ``grad_clipping`` rewrite parameters and gradients in place. TensorFlow's cells keep
    parameters in ``tf.Variable``s that are assigned in place. d2lrnn's own code is functional; these
    hooks let ``d2l.sgd(params, lr, batch_size)``, ``d2l.grad_clipping(net, theta)`` and the book's
    model classes work as the book's cells use them.

    - ``grad(param)``: the gradient the framework's backward pass attached to ``param`` (None if none
      was), or ``grad`` is None where the framework attaches none (TensorFlow);
    - ``set_grad(param, g)``: overwrite that gradient in place (attach it, where there is none yet);
    - ``assign(param, value)``: overwrite the parameter's values in place;
    - ``is_variable(x)``: whether ``x`` is a parameter the framework updates in place (``tf.Variable``);
    - ``is_module(obj)``: whether ``obj`` is a framework module (``nn.Module``, a Gluon ``Block``, a Keras
      layer or model);
    - ``module_params(obj)``: the trainable parameters of a framework module, or None if ``obj`` is not
      one;
    - ``call_with(module, params, *args, training=None)``: the module run with ``params`` in place of
      its own parameters (in ``module_params`` order), so that d2lrnn's functional training can
      differentiate it, in training mode (dropout on) or not (None: the module's own mode); None where
      the framework has no such call;
    - ``device_keyword``: the name a framework module's ``begin_state`` gives the device (the book's
      PyTorch modules take ``device=``, Gluon's layers ``ctx=``), None where it takes none (Keras);
    - ``begin_state_extra``: ``(name, value)`` pairs a framework module's ``begin_state`` is given
      besides the batch size and device, as the book's ``train_ch8`` gives them (Keras 2: ``dtype``);
    - ``module_bases``: ``(layer class, model class, method)`` that the book's ``d2l.Encoder`` and
      ``d2l.Decoder`` (the layer class) and ``d2l.EncoderDecoder`` (the model class) derive from on this
      framework, and the name of the method a module writes (``forward``; Keras: ``call``); None where
      the framework has no modules;
    - ``infer_shapes(module, *args)``: run the module once on ``args`` (not training) if its parameters
      have no shapes yet (Gluon's deferred initialisation, an unbuilt Keras layer); None where modules
      know their shapes when built (PyTorch);
    - ``call_loss(loss, y_hat, y)``: a framework loss object called in its own argument order (Keras
      losses take the labels first); None where every loss takes ``(y_hat, y)``;
    - ``dense_grad(g)``: a gradient as the framework's tape returns it, made a dense tensor (TensorFlow
      returns a gather's, an embedding's, as ``IndexedSlices``); None where gradients are dense;
    - ``book_seq2seq_init(module, device)``: what the book's ``train_seq2seq`` does to a reader's
      encoder-decoder before training (new Xavier-uniform weights on PyTorch and MXNet); None for nothing;
    - ``book_lm_init(module, device)``: what the book's ``train_ch8`` does to a reader's language model
      before training (MXNet: new N(0, 0.01^2) weights); None for nothing.

    What the English 1.0 edition's class API (:mod:`d2lrnn.book.en`) needs of the framework, None where
    it has no such thing:

    - ``parameter(x)``: ``x`` made a trainable parameter of the module it is assigned to (PyTorch's
      ``nn.Parameter``);
    - ``backward(fn)``: ``fn()`` (a loss) computed where gradients are recorded and backpropagated, so that
      ``grad`` gives each parameter's; returns the loss;
    - ``no_grad()``: a context in which nothing is recorded (validation);
    - ``set_training(module, mode)``: the module's training mode (dropout) on or off;
    - ``dense(num_outputs, sigma=None)``: a fully connected layer whose input size is known at its first call,
      its weights drawn from N(0, sigma^2) where the framework's book class asks for that (the book's
      ``LinearRegression``), its bias zero;
    - ``embedding(num_tokens, embed_size)``: the framework's embedding layer;
    - ``run_layer(layer, inputs, H)``: a framework recurrent layer (built by ``native_rnn().build``) run
      on time-major ``inputs`` from state ``H`` (None: zeros) as the book's ``RNN.forward`` runs it, giving
      ``(outputs, state)``;
    - ``layer_inputs``: whether the book's ``RNN`` and ``GRU`` take the number of inputs first (PyTorch's
      layers need it; other frameworks' learn it at the first call);
    - ``initialize(block)``: give a new framework module its parameters (Gluon's ``initialize()``), None
      where layers have them when built;
    - ``scratch_params(module)``: the tensors a module keeps as attributes, its sub-modules' too (MXNet's
      ``get_scratch_params``: a Gluon block does not register them), None where the framework registers
      them as parameters;
    - ``book_parameters(module)``: what the book's ``Module.parameters()`` returns (MXNet: the Gluon
      parameters, or the module's own arrays where it has none), None where the framework's modules have
      ``parameters()``;
    - ``param_list(params)``: what ``parameters()`` returned, as a list of tensors;
    - ``tape_gradients(fn, variables)``: ``(fn(), gradients of it)`` for the variables, recorded by the
      framework's tape, where gradients are not attached (TensorFlow);
    - ``book_layer(cell, num_hiddens, num_layers, dropout)``: the framework's recurrent layer in the form
      the book's ``RNN`` and ``GRU`` build it, where that is not ``native_rnn().build``'s (Keras: one
      ``RNN`` over stacked cells, time-major, giving its states);
    - ``squared_loss_factor``: the factor of the framework's squared-error loss, which the book's
      ``LinearRegression.loss`` averages: 1 (PyTorch's ``MSELoss``, Keras's ``MeanSquaredError``) or 1/2
      (Gluon's ``L2Loss``);
    - ``optimizer_step(optimizer)``: one step of the optimizer a model's ``configure_optimizers`` returned
      (Gluon's ``Trainer.step`` takes a batch size: 1, the loss being a mean).
    """

    grad: object
    set_grad: object
    assign: object
    is_variable: object
    is_module: object
    module_params: object
    call_with: object = None
    device_keyword: object = "device"
    begin_state_extra: tuple = ()
    module_bases: tuple = None
    infer_shapes: object = None
    call_loss: object = None
    dense_grad: object = None
    book_seq2seq_init: object = None
    book_lm_init: object = None
    parameter: object = None
    backward: object = None
    no_grad: object = None
    set_training: object = None
    dense: object = None
    embedding: object = None
    run_layer: object = None
    layer_inputs: bool = False
    initialize: object = None
    scratch_params: object = None
    book_parameters: object = None
    param_list: object = list
    squared_loss_factor: float = 1.0
    optimizer_step: object = staticmethod(lambda optimizer: optimizer.step())
    tape_gradients: object = None
    book_layer: object = None


@dataclasses.dataclass(frozen=True)
class FunctionalHooks:
    """What the English 1.0 edition's functional class API (its JAX cells: Flax modules, parameters held
    outside the model as a pytree, an optimizer state) needs of a framework whose modules are pure
    functions of their parameters. A backend declares it with ``functional_hooks()``; frameworks that train
    in place declare :class:`InPlaceHooks` instead.

    - ``module_base``: the framework's module class (a dataclass: fields are annotations, parameters are
      made in ``setup``);
    - ``compact(fn)``: ``fn`` made a method that may create sub-modules where it runs (``nn.compact``);
    - ``param(module, name, shape, sigma)``: a parameter of ``module`` made in its ``setup``,
      N(0, sigma^2) (sigma None: zeros);
    - ``init(module, key, *args)``: ``(outputs, variables)`` of the module's first call from ``key``
      (a key, or a dict of keys per randomness stream);
    - ``params_of(variables)``: the trainable parameters in ``variables``;
    - ``apply(module, params, *args, method=None, dropout_key=None)``: the module (or its ``method``) run
      with ``params``, dropout drawing from ``dropout_key`` (None: no dropout randomness);
    - ``dense(n, sigma=None)``, ``embedding(num_tokens, size)``, ``dropout(rate)``: the framework's layers
      (the dense layer's weights N(0, sigma^2) where ``sigma`` is given, the dropout layer called as
      ``layer(x, deterministic)``);
    - ``dense_params(params)``: ``(weight, bias)`` of a dense layer's parameters;
    - ``recurrent(cell, num_hiddens)``: a time-major recurrent layer of ``cell`` (``"rnn"``, ``"gru"``),
      called as ``layer(inputs, H)`` (H None: zeros) giving ``(H, outputs)``;
    - ``key(seed)``: a random key; ``split(key)``: two new keys of one;
    - ``value_and_grad(f, has_aux)``: as ``jax.value_and_grad`` over pytrees;
    - ``leaves(tree)``, ``rebuild(tree, leaves)``, ``tree_map(f, *trees)``: pytrees as lists and back;
    - ``pytree_dataclass(cls, data_fields, meta_fields)``: the dataclass ``cls`` made a pytree whose leaves
      are in ``data_fields`` (so that compiled functions take it), the others static.
    """

    module_base: object
    compact: object
    param: object
    init: object
    params_of: object
    apply: object
    dense: object
    dense_params: object
    embedding: object
    dropout: object
    recurrent: object
    key: object
    split: object
    value_and_grad: object
    leaves: object
    rebuild: object
    tree_map: object
    pytree_dataclass: object


# -- the training step's helpers, for the backends without a fused kernel ----------------------------


def sum_of_squares(tensors, reduce_sum):
    """sum_k sum(T_k^2), one product and one reduction per tensor (``reduce_sum``: the backend's sum)."""
    return builtins.sum(reduce_sum(T * T) for T in tensors)


def nonfinite_probe(tensors, reduce_sum):
    """sum_k sum(T_k * 0): 0 when every entry is finite, NaN otherwise (``reduce_sum``: the backend's sum)."""
    return builtins.sum(reduce_sum(T * 0.0) for T in tensors)


def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay, sqrt, scale=operator.mul):
    """The shim's ``adam_update`` written with the backend's operators and ``sqrt`` (see its docstring);
    ``scale(a, b)`` multiplies by one of the numbers ``scalars`` holds (MXNet's symbols broadcast only when
    asked to)."""
    lr, c1, c2 = scalars[0], scalars[1], scalars[2]
    new_params, new_Ms, new_Vs = [], [], []
    for P, G, M, V in zip(params, grads, Ms, Vs):
        M = beta1 * M + (1.0 - beta1) * G
        V = beta2 * V + (1.0 - beta2) * (G * G)
        step = scale(M, c1) / (sqrt(scale(V, c2)) + eps)
        if weight_decay:
            step = step + weight_decay * P
        new_params.append(P - scale(lr, step))
        new_Ms.append(M)
        new_Vs.append(V)
    return new_params, new_Ms, new_Vs


def adam_update_in_place(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay):
    """:func:`adam_update` on NumPy arrays, writing ``params``, ``Ms`` and ``Vs`` (the caller's copies) and
    returning them: the same IEEE operations in the same order, so the same bits, with one temporary array
    per parameter instead of one per operation (the book's seq2seq model at 256 hidden units, 4.6M
    parameters: 42 against ~90 ms an update)."""
    lr, c1, c2 = scalars[0], scalars[1], scalars[2]
    for P, G, M, V in zip(params, grads, Ms, Vs):
        M *= beta1
        M += (1.0 - beta1) * G
        V *= beta2
        squares = G * G
        squares *= 1.0 - beta2
        V += squares
        step = M * c1
        denominator = V * c2
        np.sqrt(denominator, out=denominator)
        denominator += eps
        step /= denominator
        if weight_decay:
            step += weight_decay * P
        step *= lr
        P -= step
    return params, Ms, Vs
