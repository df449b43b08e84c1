"""The shim's contract, declared once: every function a backend module defines, its signature and what
it does. The backend modules (``numpy.py``, ``torch.py``, ``tensorflow.py``, ``mxnet.py``, ``jax.py``)
carry implementations only, with these signatures; when a backend loads, each of its functions gets
the docstring written here, so ``help(d2l.matmul)`` reads the same on every backend.
``tests/backends/test_shim.py`` checks every backend against these signatures.

Tensors are float32 unless a dtype is given, indices int64; random numbers come from one shared NumPy
generator (:func:`d2lrnn.backends.generator`), so every backend draws the same numbers for a seed.
"""

# Every function below is a declaration: its body is its docstring.

# -- Creating and converting tensors -------------------------------------------------------------------------

def normal(mean, std, shape, device=None):
    """Samples of N(mean, std^2) with the given shape, float32, from the shared NumPy generator."""


def uniform(low, high, shape, device=None):
    """Samples of U(low, high) with the given shape, float32, from the shared NumPy generator."""


def zeros(shape, dtype=None, device=None):
    """A float32 (or ``dtype``) tensor of zeros."""


def ones(shape, dtype=None, device=None):
    """A float32 (or ``dtype``) tensor of ones."""


def zeros_like(x):
    """Zeros with the shape and dtype of ``x``."""


def arange(start, stop=None, step=1, dtype=None, device=None):
    """``start, start+step, ...`` below ``stop``: int64 for integer arguments, else float32."""


def tensor(data, dtype=None, device=None):
    """A tensor from Python data or an array: floats become float32, integers int64."""


def from_numpy(array, device=None):
    """A tensor holding a NumPy array (float32/int64 by d2lrnn's rules)."""


def to_numpy(x):
    """A NumPy array with the values of ``x``: no gradient attached, and writable (a copy where the
    framework's own view is read-only).
    """


def astype(x, dtype):
    """``x`` converted to ``dtype``: a NumPy dtype or its name (``'float32'``), or the framework's own
    (``torch.int64``, ``tf.float32``), as every function here that takes a dtype accepts."""


def shape(x):
    """The shape of ``x`` as a tuple of ints."""


def size(x):
    """The number of elements of ``x``."""


def is_tensor(x):
    """True if ``x`` is a tensor of this backend (one being traced inside a compiled function too)."""


# -- Shaping -------------------------------------------------------------------------------------------------

def reshape(x, shape):
    """``x`` with a new shape (one entry may be -1)."""


def transpose(x, axes=None):
    """``x`` with its axes permuted (reversed when ``axes`` is None)."""


def concat(tensors, axis=0):
    """Join tensors along an existing axis."""


def stack(tensors, axis=0):
    """Join tensors along a new axis."""


def unstack(x, axis=0):
    """Split ``x`` along ``axis`` into a list of tensors with that axis removed."""


def take(x, indices, axis=0):
    """Gather entries of ``x`` along ``axis`` (rows of a weight matrix, for an embedding)."""


# -- Arithmetic and activations ------------------------------------------------------------------------------

def matmul(a, b):
    """Matrix product (batched over leading axes).

    A stack of rows times one matrix, (..., k) @ (k, n), runs as one 2-D product (the output layer of a
    decoder over all its steps): a batched product per leading index is several times slower on the
    CPU for some frameworks, its gradient more so.
    """


def dense(X, W, b):
    """A dense layer over a stack of rows: X W + b for ``X`` (..., k), ``W`` (k, n) and ``b`` (n,).

    :func:`matmul`, then ``+ b``; where the framework has a layer kernel that adds the bias itself
    (MXNet's FullyConnected), that kernel, whose backward pass then sums the bias's gradient over the rows
    too (a broadcast add's backward on MXNet took 9 of the 22 ms of a seq2seq decoder's output layer).
    """


def linear(X, W, b=None):
    """X W^T (+ b) for a 2-D ``X`` and a weight ``W`` of shape (out, in); ``b`` broadcasts to it.

    ``W`` may come from :func:`prepack_linear`; where the framework can, the addend is fused into the
    product.
    """


def prepack_linear(W):
    """``W`` laid out for fast repeated ``linear(X, W)`` (weight prepacking).

    Where the framework's product reads every layout alike, or where packing would not pay (torch's small
    weights), ``W`` itself; elsewhere a form that only ``linear`` takes (a reordered tensor, W^T stored),
    with ``linear(X, prepack_linear(W))`` equal to ``linear(X, W)``. A packed weight only feeds
    ``linear``, outside automatic differentiation (the hand-written scans of ``models/bptt.py``).
    """


def tanh(x):
    """Elementwise tanh."""


def tanh_grad(Y, dY):
    """dY * (1 - Y^2), the gradient through Y = tanh(X) given Y: for hand-written backward passes."""


def sigmoid(x):
    """Elementwise 1 / (1 + exp(-x)), without overflow for large negative x."""


def sigmoid_grad(Y, dY):
    """dY * Y * (1 - Y), the gradient through Y = sigmoid(X) given Y: for hand-written backward passes."""


def relu(x):
    """Elementwise max(x, 0)."""


def exp(x):
    """Elementwise e^x."""


def sin(x):
    """The elementwise sine (the book's sine-wave data: ``d2l.sin(0.01 * time)``)."""


def log(x):
    """Elementwise natural logarithm."""


def sqrt(x):
    """Elementwise square root."""


def abs(x):
    """Elementwise |x|."""


def maximum(x, y):
    """Elementwise maximum (either argument may be a Python number)."""


def minimum(x, y):
    """Elementwise minimum (either argument may be a Python number)."""


# -- Reductions ----------------------------------------------------------------------------------------------

def sum(x, axis=None, keepdims=False):
    """Sum over ``axis`` (all axes when None)."""


def mean(x, axis=None, keepdims=False):
    """Mean over ``axis`` (all axes when None)."""


def max(x, axis=None, keepdims=False):
    """Maximum over ``axis`` (all axes when None)."""


def argmax(x, axis=None):
    """Index (int64) of the largest entry along ``axis``."""


def sum_of_squares(tensors):
    """sum_k sum(T_k^2) over a list of tensors, as a scalar tensor: the squared global norm that gradient
    clipping takes. One fused operation for the whole list where the framework has one (MXNet's
    ``multi_sum_sq``), instead of three per tensor."""


def nonfinite_probe(tensors):
    """A scalar tensor that is 0 when every entry of every tensor in the list is finite, and not finite (NaN
    or -inf) otherwise: what a training run checks its parameters with after each step. One fused operation
    where the framework has one (MXNet's ``multi_all_finite``), else sum(T * 0) over the tensors (x * 0 is NaN
    exactly for inf and NaN)."""


# -- Classification helpers ----------------------------------------------------------------------------------

def one_hot(indices, depth):
    """float32 one-hot vectors: shape ``indices.shape + (depth,)``."""


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``."""


def log_softmax(x, axis=-1):
    """x - log(sum(exp(x))) along ``axis``, computed stably."""


def softmax_cross_entropy(logits, labels):
    """Per-example -log softmax(logits)[label]; ``logits`` is (n, classes), ``labels`` (n,) ints."""


# -- Optimizer steps -----------------------------------------------------------------------------------------

def adam_update(params, grads, Ms, Vs, scalars, beta1, beta2, eps, weight_decay=0.0):
    """One Adam step of every parameter, as three new lists ``(params, Ms, Vs)``; the inputs stay as they are:

        M <- beta1 M + (1 - beta1) G,        V <- beta2 V + (1 - beta2) G^2
        P <- P - lr (c1 M / (sqrt(c2 V) + eps) + weight_decay P)

    ``scalars`` is one float32 tensor [lr, c1, c2], with the bias corrections c1 = 1 / (1 - beta1^t) and
    c2 = 1 / (1 - beta2^t) of step t. One function for the whole update, so that a backend can run it as
    one fused kernel where the framework's computes this formula to float32 rounding."""


# -- The framework's own recurrent layers, and dropout -------------------------------------------------------

def native_rnn():
    """The framework's own recurrent layers, declared for d2lrnn's adapter (a
    :class:`d2lrnn.backends.NativeRNN`), or None where it has none (the cells' own recurrences run
    instead: :mod:`d2lrnn.models.native`).
    """


def dropout(x, p):
    """Each element zeroed with probability ``p``, the rest scaled by 1 / (1 - p) (inverted dropout).

    The masks come from a generator other than the shared one (reset by ``manual_seed``), so dropout
    does not shift the numbers the shared generator gives to parameters and data.
    """


# -- The book's in-place training on the framework -----------------------------------------------------------

def in_place_hooks():
    """How the framework trains in place, for the book's own cells (a
    :class:`d2lrnn.backends.InPlaceHooks`: attached gradients, variables, running a module with other
    parameters, the module classes the book's ``Encoder`` and ``Decoder`` derive from), or None where
    tensors carry no gradients and only the functional forms apply (:mod:`d2lrnn.book.inplace`).
    """


# -- Randomness, gradients, compilation, devices -------------------------------------------------------------

def manual_seed(seed):
    """Seed the shared NumPy generator (parameters and data come from it) and the one dropout draws
    its masks from.
    """


def detach(x):
    """``x`` without gradient tracking."""


def value_and_grad(f, has_aux=False):
    """``value_and_grad(f)(params, *args) -> (f(params, *args), grads)`` by the framework's automatic
    differentiation.

    ``params`` is a list of tensors and ``grads`` a list of the same shapes. With
    ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is ``((value, aux), grads)``.
    """


def custom_vjp(fwd, bwd, differentiable=False):
    """A function with a hand-written gradient: ``custom_vjp(fwd, bwd)(*args) -> outputs``.

    ``fwd(*args) -> (outputs, residuals)`` computes a tuple of outputs (without gradient tracking
    where the framework tracks); ``bwd(residuals, *output_grads) -> input_grads`` returns one gradient
    per argument (an output that was not used gets a zero gradient).

    ``differentiable=True`` promises that ``fwd`` is written in operations the framework can differentiate
    and that ``bwd`` computes exactly their gradient. A backend whose own backward pass is faster than
    ``bwd``'s operations dispatched one by one from Python then records ``fwd`` and differentiates it
    instead (MXNet, whose engine runs a recorded backward pass without Python); the others call ``bwd``.
    """


def scan(step, carry, xs, reverse=False, unroll=False):
    """Run ``step`` over the steps of ``xs`` (its leading axis), carrying a state: ``(carry_T, ys)``.

        carry_t, y_t = step(carry_{t-1}, x_t)   for t = 1..T,   ys = [y_1; ...; y_T] (stacked on axis 0)

    ``xs`` is a tensor or a tuple of tensors (sliced together, one length T >= 1), the carry a tensor or
    a tuple of tensors, and ``y_t`` a tensor or a tuple of tensors (``()`` for none); ``ys`` mirrors it.
    ``reverse=True`` runs t = T..1 and still returns ``ys`` in the steps' order (``jax.lax.scan``'s
    meaning). Where the framework compiles a loop as one (JAX under ``jit``) the step is compiled once,
    not once per step; elsewhere each input is unstacked once and each output stacked once.
    ``unroll=True`` asks such a framework to compile T copies of the step instead, where the loop is short
    enough (JAX: up to ``UNROLL_MAX_STEPS``); a hint, with the same result, that the others ignore.
    """


def compile(fn, calls="many", key=None):
    """``fn`` compiled into one program per input signature where the framework compiles free functions
    (a compiled step gets fresh dropout randomness at every call, and reports how many programs it
    built with ``compilations()``); ``fn`` itself where it does not.

    ``calls="few"`` is for a function called only a few times per input shape (a decoding step): it is
    compiled only where the framework would otherwise compile each of its operations on its own at
    their first call (JAX), and runs eagerly where tracing it would cost more than it saves (TensorFlow).

    ``key`` (hashable) says that ``fn`` computes the same function of its arguments as every other
    function compiled with an equal key: where compiling traces (TensorFlow, JAX), their calls share
    the programs traced so far instead of tracing them again (``compilations()`` counts those this
    function's own calls made). The key must name everything ``fn`` reads besides its arguments.
    Dropout in a shared program draws what it would draw in a program of its own: from the generator
    ``manual_seed`` seeds, whichever function traced it.
    """


def autocast(dtype, device=None):
    """A context manager inside which the framework's products run in ``dtype`` ('bfloat16') on ``device``
    (None: the CPU) while the weights, their gradients and the losses stay float32: automatic mixed
    precision, as the framework does it. None where the framework has none that d2lrnn uses (its callers
    then say so in one line)."""


def try_gpu(i=0):
    """GPU ``i`` if the framework sees one, else the CPU."""


def cpu():
    """The CPU device."""


def num_gpus():
    """How many GPUs the framework sees."""


def to_device(x, device):
    """``x`` on ``device`` (no copy if it is already there); ``device`` None leaves it where it is."""


def device_of(x):
    """The device ``x`` lives on, as ``to_device`` and the creators (``zeros``, ``arange``, ...) take it, so
    a tensor made inside a computation goes beside its inputs; None where the framework puts new tensors
    where they are needed by itself (NumPy, TensorFlow, JAX)."""


def set_num_threads(n):
    """Limit the framework's CPU threads to ``n`` where it still can; a framework that sizes its pool
    when it starts records the setting for the processes started afterwards, or has nothing to change.
    """


#: Every function a backend must define, with one signature across backends.
SHIM_FUNCTIONS = (
    # creating and converting tensors
    "normal", "uniform", "zeros", "ones", "zeros_like", "arange", "tensor", "from_numpy", "to_numpy",
    "astype", "shape", "size", "is_tensor",
    # shaping
    "reshape", "transpose", "concat", "stack", "unstack", "take",
    # arithmetic and activations
    "matmul", "dense", "linear", "prepack_linear", "tanh", "tanh_grad", "sigmoid", "sigmoid_grad", "relu",
    "exp", "sin", "log", "sqrt", "abs", "maximum", "minimum",
    # reductions
    "sum", "mean", "max", "argmax", "sum_of_squares", "nonfinite_probe",
    # classification helpers
    "one_hot", "softmax", "log_softmax", "softmax_cross_entropy",
    # optimizer steps
    "adam_update",
    # the framework's own recurrent layers, and dropout
    "native_rnn", "dropout",
    # the book's in-place training on the framework
    "in_place_hooks",
    # randomness, gradients, compilation, devices
    "manual_seed", "detach", "value_and_grad", "custom_vjp", "scan", "compile", "autocast", "try_gpu", "cpu",
    "num_gpus",
    "to_device", "device_of", "set_num_threads",
)

#: The book's other names for shim functions (``d2l.reduce_sum`` and so on).
ALIASES = {
    "reduce_sum": "sum",
    "reduce_mean": "mean",
    "numpy": "to_numpy",
    "to": "to_device",
}
