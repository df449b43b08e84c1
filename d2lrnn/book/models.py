"""The book's language-model classes as its cells call them on each framework.

:class:`RNNModelScratch` and :class:`RNNModel` are d2lrnn's (:mod:`d2lrnn.lm.model`) with the call
forms the book's framework cells use: TensorFlow's and Paddle's argument orders and two-argument
``get_params`` / ``init_state`` (those frameworks place tensors themselves), MXNet's ``ctx=``, TensorFlow's
``dtype=``, and the framework methods the cells call on a model (``model.to(device)``,
``model.initialize(...)``, ``net.trainable_variables``), which d2lrnn's models answer without anything to do.
"""

import inspect

from .. import ops
from ..backends import backend_name
from ..lm import model as lm_model
from ..models import RecurrentStack
from ..models.rnn import get_params, init_rnn_state, output_params, rnn

#: Where the book's ``RNNModel`` keeps a reader's framework layer as it was built, the initialization of
#: the output layer the book adds to it (PyTorch's ``nn.Linear``: U(-1/sqrt(h), 1/sqrt(h)), d2lrnn's
#: 'uniform'). Elsewhere the model starts from d2lrnn's N(0, 0.01^2) weights: what the book's MXNet
#: ``train_ch8`` re-initializes every Gluon block to; Keras makes its layers' weights only at their
#: first call.
KEEPS_LAYER_INIT = {"torch": "uniform"}


class FrameworkMethods:
    """What the book's cells call on a model the framework's way."""

    def to(self, device):
        """The model itself, its parameters moved to ``device`` (PyTorch's ``model = model.to(device)`` in
        the book's cells, after building the model without one); its inputs go there too from then on."""
        self.params = [ops.to_device(p, device) for p in self.params]
        self.device = device
        return self

    def initialize(self, *args, **kwargs):
        """Nothing to do (MXNet's ``model.initialize(force_reinit=True, ctx=device)`` in the book's cells):
        d2lrnn draws the starting weights when the model is built."""

    @property
    def trainable_variables(self):
        """The parameters, by the name TensorFlow's cells of the book use (``net.trainable_variables``)."""
        return self.params


def with_device(fn):
    """``fn`` as ``(first, num_hiddens, device) -> ...``: a reader's two-argument function, written as the
    book's TensorFlow cells write ``get_params`` and ``init_state``, is called without the device."""
    try:
        takes_device = len(inspect.signature(fn).parameters) != 2
    except (TypeError, ValueError):  # no signature to read: d2lrnn's form
        takes_device = True
    return fn if takes_device else lambda first, num_hiddens, device: fn(first, num_hiddens)


def _required_arguments(fn):
    """How many positional arguments ``fn`` requires (None where it has no signature to read)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(1 for p in parameters if p.default is p.empty
               and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


class RNNModelScratch(FrameworkMethods, lm_model.RNNModelScratch):
    """The book's ``RNNModelScratch`` (see :class:`d2lrnn.lm.model.RNNModelScratch`), also in TensorFlow's
    argument order ``(vocab_size, num_hiddens, init_state, forward_fn, get_params)``, in Paddle's
    ``(vocab_size, num_hiddens, get_params, init_state, forward_fn)`` (told apart by which function takes
    the forward function's three arguments), and over the reader's two-argument ``get_params`` /
    ``init_state``."""

    def __init__(self, vocab_size, num_hiddens, device=None, get_params=get_params, init_state=init_rnn_state,
                 forward_fn=rnn):
        if callable(device) and _required_arguments(init_state) == 3 != _required_arguments(get_params):
            # Paddle's book form: (V, num_hiddens, get_params, init_state, forward_fn), the forward function
            # (inputs, state, params) last
            device, get_params, init_state, forward_fn = None, device, get_params, init_state
        elif callable(device):  # TensorFlow's book form: (V, num_hiddens, init_state, forward_fn, get_params)
            device, init_state, forward_fn, get_params = None, device, get_params, init_state
        super().__init__(vocab_size, num_hiddens, device, with_device(get_params), with_device(init_state),
                         forward_fn)

    def begin_state(self, batch_size, device=None, ctx=None, **kwargs):
        """A fresh (zero) state for ``batch_size`` sequences (MXNet's cells name the device ``ctx=``,
        TensorFlow's pass ``dtype=``)."""
        return super().begin_state(batch_size, device if ctx is None else ctx)


class RNNModel(FrameworkMethods, lm_model.RNNModel):
    """The book's concise ``RNNModel(rnn_layer, vocab_size)`` (see :class:`d2lrnn.lm.model.RNNModel`).

    On PyTorch a layer the reader built keeps its own starting weights, as in the book, and the output
    layer starts as PyTorch's ``nn.Linear`` does (:data:`KEEPS_LAYER_INIT`).
    """

    def __init__(self, rnn_layer, vocab_size, device=None, **kwargs):
        super().__init__(rnn_layer, vocab_size, device, **kwargs)
        output_init = KEEPS_LAYER_INIT.get(backend_name())
        own = self.rnn.own_params() if output_init and not isinstance(rnn_layer, RecurrentStack) else None
        if own is not None:
            own = [ops.to_device(p, device) for p in own]
            self.params = own + output_params(self.rnn.num_outputs, self.vocab_size, device, output_init)
