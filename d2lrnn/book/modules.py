"""A reader's own framework model, trained and sampled by d2lrnn's functional code.

The book's concise sections write their language model as a framework module: on PyTorch a
``class RNNModel(nn.Module)`` whose ``forward(inputs, state)`` returns ``(outputs, state)`` and whose
``begin_state(device, batch_size=1)`` makes the zero state, and then call ``d2l.train_ch8`` on it.
d2lrnn trains functionally, so :class:`ModuleModel` reads the module's trainable parameters into a
list, runs the module with whatever list it is given (the backend's ``in_place_hooks().call_with``), and
:meth:`ModuleModel.write_back` copies the trained values into the module's own parameters.
"""

from .. import ops
from ..backends import generator_state_kept
from ..errors import ArgumentError


def as_model(net):
    """``net`` itself if d2lrnn can train it as it is, else a :class:`ModuleModel` over a framework
    module (an :class:`ArgumentError` where the backend cannot run one functionally)."""
    hooks = ops.in_place_hooks()
    if hooks is None or not hooks.is_module(net):
        return net
    if hooks.call_with is None:
        raise ArgumentError(f"d2l.train_ch8 cannot train a {type(net).__name__} module on this backend "
                            "yet: build the model with d2l.RNNModel(rnn_layer, vocab_size)")
    return ModuleModel(net, hooks)


class ModuleParams:
    """A framework module's trainable parameters as d2lrnn's flat list ``params``, read when first asked
    for (Gluon and Keras know their shapes only after the module's first call); training replaces the
    list, and :meth:`write_back` copies it into the module's own parameters."""

    kind = "module"

    def __init__(self, module, hooks):
        self.module, self._hooks, self._params = module, hooks, None

    def _read_params(self):
        return self._hooks.module_params(self.module)

    @property
    def params(self):
        if self._params is None:
            self._params = [ops.detach(p) for p in self._read_params()]
        return self._params

    @params.setter
    def params(self, values):
        self._params = list(values)

    @property
    def param_names(self):
        return tuple(f"param{i}" for i in range(len(self.params)))

    def infer_shapes(self, data_iter, arguments):
        """Give the module's parameters their shapes (Gluon, Keras: at its first call) by calling it once,
        not training, on ``arguments(*batch)`` for the first minibatch of ``data_iter``, read without
        moving d2lrnn's generator (training then sees the same minibatches)."""
        if self._hooks.infer_shapes is None:
            return
        with generator_state_kept():
            batch = next(iter(data_iter))
        self._hooks.infer_shapes(self.module, *arguments(*batch))

    def write_back(self):
        """Copy ``params`` (the trained values) into the module's own parameters."""
        if self._params is None:
            return
        for own, value in zip(self._hooks.module_params(self.module), self._params):
            self._hooks.assign(own, value)


class ModuleModel(ModuleParams):
    """A framework module (the book's concise ``RNNModel``) with d2lrnn's model interface."""

    def __init__(self, module, hooks):
        super().__init__(module, hooks)
        self._batch_size = None
        if not hasattr(module, "vocab_size"):
            raise ArgumentError("d2l.train_ch8 reads the model's vocab_size: set self.vocab_size in its "
                                "__init__, as the book's RNNModel does")
        self.vocab_size = module.vocab_size
        self.num_hiddens = getattr(module, "num_hiddens", None)  # only for titles: Gluon's RNNModel has none

    def forward(self, params, X, state):
        """The module run with ``params``; its state travels as the one element of a tuple."""
        Y, new_state = self._hooks.call_with(self.module, params, X, state[0])
        return Y, (new_state,)

    def __call__(self, X, state):
        if self._params is None:  # nothing trained yet: the module as it is
            Y, new_state = self.module(X, state[0])
            return Y, (new_state,)
        return self.forward(self._params, X, state)

    def begin_state(self, batch_size, device=None):
        """The module's own zero state, asked for by keyword (the book's PyTorch order is (device,
        batch_size); Gluon names the device ``ctx``, Keras takes none)."""
        self._batch_size = batch_size
        keyword = self._hooks.device_keyword
        extra = dict(self._hooks.begin_state_extra, **({keyword: device} if keyword else {}))
        return (self.module.begin_state(batch_size=batch_size, **extra),)

    def batch_size_of(self, state):
        """The batch size of the state this model last began: states come from the module, whose layout
        (where the batch axis is) d2lrnn does not know, and carry the batch size they began with."""
        return self._batch_size
