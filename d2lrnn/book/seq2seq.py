"""The book's ``Encoder``, ``Decoder`` and ``EncoderDecoder`` as framework modules, and training them.

d2lrnn's encoder-decoder classes are functional: ``forward(params, X, ...)``. The book's PyTorch,
MXNet, TensorFlow and Paddle cells instead subclass ``d2l.Encoder`` and ``d2l.Decoder`` as modules of
their framework (``nn.Module``, a Gluon ``Block``, a Keras layer, a Paddle ``nn.Layer``) with
``forward(X, *args)`` (Keras: ``call``), and join them with ``d2l.EncoderDecoder(encoder, decoder)``.
One name serves both: a subclass whose ``forward`` does not take ``params`` first is made a subclass of
the framework's class of that name (:class:`BookName`, the metaclass of this module's :class:`Encoder`,
:class:`Decoder` and :class:`EncoderDecoder`), and ``EncoderDecoder`` of two framework modules is the
framework's ``EncoderDecoder``; a subclass written d2lrnn's way stays one of d2lrnn's functional classes.

:class:`ModuleEncoderDecoder` gives such a model d2lrnn's functional interface (``params``,
``forward(params, ...)``, ``encode``, ``decode``), so :func:`train_seq2seq`, :func:`predict_seq2seq`
and :func:`translate` run it through the backend's ``in_place_hooks().call_with``.
"""

import functools
import inspect

from .. import ops
from ..backends import backend_name
from ..errors import ArgumentError
from ..seq2seq import decode
from ..seq2seq import model as seq2seq_model
from ..seq2seq.train import report_line, teacher_forcing, train_encoder_decoder
from .modules import ModuleParams


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
    hooks = ops.in_place_hooks()
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
    """``{role: class}`` over the framework's module classes (``InPlaceHooks.module_bases``), or None."""
    hooks = ops.in_place_hooks()
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
    hooks = ops.in_place_hooks()
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


class BookName(type):
    """The metaclass of :class:`Encoder`, :class:`Decoder` and :class:`EncoderDecoder`: one name for
    d2lrnn's functional classes and the book's framework modules.

    A class that subclasses one of the three and writes ``forward(self, X, ...)`` (or Keras's ``call``)
    the book's way is made a subclass of the framework's class of that name instead; ``EncoderDecoder``
    called with two framework modules makes the framework's ``EncoderDecoder``.
    """

    def __new__(mcls, name, bases, namespace, **kwargs):
        root = next((b for b in bases if getattr(b, "__dict__", {}).get("_book_root")), None)
        if root is not None and framework_style(namespace):
            framework = framework_class(root.__name__)
            bases = tuple(framework if b is root else b for b in bases)
            return type(framework)(name, bases, dict(namespace), **kwargs)
        return super().__new__(mcls, name, bases, namespace, **kwargs)

    def __call__(cls, *args, **kwargs):
        if cls.__dict__.get("_book_root") and any(is_module(a) for a in args[:2]):
            return framework_class(cls.__name__)(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Encoder(seq2seq_model.Encoder, metaclass=BookName):
    """The book's encoder interface: ``forward(params, X, *args)`` returns what the decoder starts from
    (:class:`d2lrnn.seq2seq.model.Encoder`). A subclass written the framework's way, ``forward(self, X,
    *args)``, is a framework module."""

    _book_root = True


class Decoder(seq2seq_model.Decoder, metaclass=BookName):
    """The book's decoder interface: ``init_state(enc_outputs, *args)``, then ``forward(params, X, state)``
    (:class:`d2lrnn.seq2seq.model.Decoder`). A subclass written the framework's way, ``forward(self, X,
    state)``, is a framework module."""

    _book_root = True


class EncoderDecoder(seq2seq_model.EncoderDecoder, metaclass=BookName):
    """An encoder and a decoder trained as one model (:class:`d2lrnn.seq2seq.model.EncoderDecoder`); given
    two framework modules (the book's cells), the framework's ``EncoderDecoder`` instead."""

    _book_root = True


def train_seq2seq(net, data_iter, lr, num_epochs, tgt_vocab, device=None, *, verbose=True,
                  return_history=False,
                  **options):
    """Train an encoder-decoder as the book's ``train_seq2seq`` does; None, as the book's, or with
    ``return_history`` the history (see :func:`d2lrnn.seq2seq.train.train_encoder_decoder`).

    ``options`` are :func:`d2lrnn.seq2seq.train.train_encoder_decoder`'s (clipping, optimizer,
    validation and BLEU, plots, continuing a run, a time budget). With ``verbose`` the last epoch's losses
    and speed are printed. ``net`` may be the reader's own framework model (``d2l.EncoderDecoder`` of the
    book's framework ``Encoder`` and ``Decoder`` subclasses): then, as the book's ``train_seq2seq`` does,
    it starts from new Xavier-uniform weights (PyTorch, MXNet; not when continuing a ``history``), trains
    on the sum of the sentences' losses, and holds the trained values afterwards.
    """
    model = as_seq2seq(net)
    if model is not net:
        hooks = ops.in_place_hooks()
        if options.get("history") is None and hooks.book_seq2seq_init is not None:
            hooks.book_seq2seq_init(net, device)
        bos = tgt_vocab["<bos>"]
        model.infer_shapes(data_iter, lambda X, X_valid_len, Y, _: (X, teacher_forcing(Y, bos), X_valid_len))
    try:
        history = train_encoder_decoder(model, data_iter, lr, num_epochs, tgt_vocab, device,
                                        summed=model is not net, **options)
    finally:
        if model is not net:
            model.write_back()
    if verbose:
        print(report_line(history, device))
    return history if return_history else None


def predict_seq2seq(net, src_sentence, src_vocab, tgt_vocab, num_steps, device=None,
                    save_attention_weights=False, beam_size=1, alpha=decode.ALPHA):
    """The book's ``predict_seq2seq`` (:func:`d2lrnn.seq2seq.decode.predict_seq2seq`), with d2lrnn's
    encoder-decoder or the reader's own framework model."""
    return decode.predict_seq2seq(as_seq2seq(net), src_sentence, src_vocab, tgt_vocab, num_steps, device,
                                  save_attention_weights, beam_size, alpha)


def translate(net, sentences, src_vocab, tgt_vocab, num_steps, beam_size=1, alpha=decode.ALPHA, max_len=None,
              device=None):
    """Translate ``sentences`` (:func:`d2lrnn.seq2seq.decode.translate`) with d2lrnn's encoder-decoder or
    the reader's own framework model."""
    return decode.translate(as_seq2seq(net), sentences, src_vocab, tgt_vocab, num_steps, beam_size, alpha,
                            max_len, device)
