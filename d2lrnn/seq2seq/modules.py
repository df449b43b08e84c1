"""The book's ``Encoder``, ``Decoder`` and ``EncoderDecoder`` as framework modules, and training them.

d2lrnn's encoder-decoder classes are functional: ``forward(params, X, ...)``. The book's PyTorch,
MXNet and TensorFlow cells instead subclass ``d2l.Encoder`` and ``d2l.Decoder`` as modules of their
framework (``nn.Module``, a Gluon ``Block``, a Keras layer) with ``forward(X, *args)`` (Keras:
``call``), and join them with ``d2l.EncoderDecoder(encoder, decoder)``. One name serves both: a
subclass whose ``forward`` does not take ``params`` first is made a subclass of this module's
framework class (the metaclass in :mod:`d2lrnn.seq2seq.model` does it), and ``EncoderDecoder`` of two
framework modules is the framework's ``EncoderDecoder``.

:class:`ModuleEncoderDecoder` gives such a model d2lrnn's functional interface (``params``,
``forward(params, ...)``, ``encode``, ``decode``), so ``d2l.train_seq2seq``, ``d2l.predict_seq2seq``
and ``d2l.translate`` run it through the backend's ``imperative().call_with``.
"""

import functools
import inspect

from .. import ops
from ..backends import backend_name
from ..errors import ArgumentError
from ..models.module import ModuleParams


def framework_style(namespace):
    """Whether a class body writes its model the framework's way: a ``forward`` (or Keras ``call``)
    whose first argument after ``self`` is not ``params``."""
    for method in ("forward", "call"):
        fn = namespace.get(method)
        if callable(fn):
            names = list(inspect.signature(fn).parameters)
            return len(names) < 2 or names[1] != "params"
    return False


def is_module(obj):
    """Whether ``obj`` is a module of the active backend's framework."""
    hooks = ops.imperative()
    return hooks is not None and hooks.is_module(obj)


def framework_class(role):
    """The book's ``role`` class on the active backend's framework; a one-line error where it has none."""
    classes = _framework_classes(backend_name())
    if classes is None:
        raise ArgumentError(f"d2l.{role} subclasses on the {backend_name()} backend are written d2lrnn's "
                            f"way, with forward(self, params, X, ...) (the {backend_name()} backend has no "
                            "framework modules)")
    return classes[role]


def _not_written(self, *args, **kwargs):
    raise NotImplementedError(f"{type(self).__name__} is an interface: subclass it and write its forward")


@functools.cache
def _framework_classes(backend):
    """``{role: class}`` over the framework's module classes (``Imperative.module_bases``), or None."""
    hooks = ops.imperative()
    bases = hooks.module_bases if hooks is not None else None
    if bases is None:
        return None
    Layer, Model, method = bases

    class Encoder(Layer):
        """The book's encoder interface: ``forward(X, *args)`` (Keras: ``call``) returns what the decoder
        starts from."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)

    class Decoder(Layer):
        """The book's decoder interface: ``init_state(enc_outputs, *args)``, then ``forward(X, state)``
        (Keras: ``call``) returning ``(outputs, state)``."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)

        def init_state(self, enc_outputs, *args):
            raise NotImplementedError(f"{type(self).__name__}: write init_state(self, enc_outputs, *args)")

    class EncoderDecoder(Model):
        """The book's encoder-decoder: ``net(enc_X, dec_X, *args)`` encodes, makes the decoder's first
        state and decodes (keyword arguments, such as Keras's ``training``, reach both halves)."""

        def __init__(self, encoder, decoder, **kwargs):
            super().__init__(**kwargs)
            self.encoder, self.decoder = encoder, decoder

    def run(self, enc_X, dec_X, *args, **kwargs):
        enc_outputs = self.encoder(enc_X, *args, **kwargs)
        dec_state = self.decoder.init_state(enc_outputs, *args)
        return self.decoder(dec_X, dec_state, **kwargs)

    setattr(Encoder, method, _not_written)
    setattr(Decoder, method, _not_written)
    setattr(EncoderDecoder, method, run)
    return {"Encoder": Encoder, "Decoder": Decoder, "EncoderDecoder": EncoderDecoder}


def as_seq2seq(net):
    """``net`` itself, or a :class:`ModuleEncoderDecoder` over the reader's framework ``EncoderDecoder``."""
    hooks = ops.imperative()
    if hooks is None or not hooks.is_module(net):
        return net
    if hooks.call_with is None:
        raise ArgumentError(f"d2l.train_seq2seq cannot run a {type(net).__name__} module on this backend")
    for part in ("encoder", "decoder"):
        if not hooks.is_module(getattr(net, part, None)):
            raise ArgumentError(f"the model has no {part} module: build it as d2l.EncoderDecoder(encoder, "
                                "decoder)")
    return ModuleEncoderDecoder(net, hooks)


class ModuleEncoderDecoder(ModuleParams):
    """The reader's framework ``EncoderDecoder`` with d2lrnn's functional interface.

    ``params`` are the module's trainable parameters, the encoder's then the decoder's; ``forward``,
    ``encode`` and ``decode`` run the module (or one half) with a given list. Trained the way the
    book's ``train_seq2seq`` trains it (``book_objective``): the gradient of the sum of the sentences'
    :class:`~d2lrnn.seq2seq.MaskedSoftmaxCELoss`, reported per target token.
    """

    book_objective = True

    def __init__(self, module, hooks):
        super().__init__(module, hooks)
        self.encoder, self.decoder = module.encoder, module.decoder

    def _read_params(self):
        own = self._hooks.module_params(self.module)
        encoder = self._hooks.module_params(self.encoder)
        halves = encoder + self._hooks.module_params(self.decoder)
        if len(own) != len(halves) or any(a is not b for a, b in zip(own, halves)):
            raise ArgumentError("the model's parameters must be its encoder's followed by its decoder's: "
                                "keep every parameter inside net.encoder or net.decoder")
        self._n = len(encoder)
        return own

    def split(self, params):
        """``params`` as (the encoder's, the decoder's)."""
        self.params  # noqa: B018 - reads the split point
        n = self._n
        return list(params[:n]), list(params[n:])

    def forward(self, params, enc_X, dec_X, *args, training=False):
        return self._hooks.call_with(self.module, params, enc_X, dec_X, *args, training=training)

    def encode(self, params, enc_X, *args, training=False):
        """The decoder's first state for source sentences ``enc_X``."""
        enc_params, _ = self.split(params)
        enc_outputs = self._hooks.call_with(self.encoder, enc_params, enc_X, *args, training=training)
        return self.decoder.init_state(enc_outputs, *args)

    def decode(self, params, dec_X, state, training=False):
        """``(outputs, new_state)`` of the decoder for inputs ``dec_X`` from ``state``."""
        _, dec_params = self.split(params)
        return self._hooks.call_with(self.decoder, dec_params, dec_X, state, training=training)

    def config(self):
        return None
