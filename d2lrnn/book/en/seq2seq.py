"""The English 1.0 edition's encoder-decoder classes: ``Encoder``, ``Decoder``, ``EncoderDecoder`` (a
``Classifier``, trained by ``Trainer``), ``Seq2SeqEncoder`` and ``Seq2Seq`` (masked loss, Adam).

``Encoder`` and ``Decoder`` are the framework's layer classes with the book's interface (the 2.x face's,
:func:`d2lrnn.book.seq2seq.framework_class`); the encoder's recurrent layer is the book's ``GRU`` (the
framework's own), its embedding the framework's.
"""

from ... import ops
from .base import Adam, hooks_for, keras_call, optimizer


class EncoderDecoderMethods:
    """``model(enc_X, dec_X, *args)``: encode, make the decoder's first state, return the decoder's
    outputs (its state dropped)."""

    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder, self.decoder = encoder, decoder

    def forward(self, enc_X, dec_X, *args):
        Y, _ = self.decoder(dec_X, self.first_state(enc_X, *args))
        return Y

    def first_state(self, enc_X, *args):
        """The decoder's state before its first step: made from what the encoder gives for ``enc_X``."""
        return self.decoder.init_state(self.encoder(enc_X, *args), *args)

    def predict_step(self, batch, device, num_steps, save_attention_weights=False):
        """Greedy decoding of ``batch`` = (src, tgt, src_valid_len, _) for ``num_steps`` steps, starting from
        the target's first token: ``(predicted indices (batch, num_steps), attention weights)``."""
        src, tgt, src_valid_len, _ = (ops.to_device(a, device) for a in batch)
        with hooks_for("no_grad").no_grad():
            state = self.first_state(src, src_valid_len)
            token, predicted, weights = ops.reshape(tgt[:, 0], (-1, 1)), [], []
            for _ in range(num_steps):
                Y, state = self.decoder(token, state)
                token = ops.argmax(Y, 2)  # greedy: the likeliest token is the next step's input
                predicted.append(token)
                if save_attention_weights:
                    weights.append(self.decoder.attention_weights)
        return ops.concat(predicted, 1), weights


class Seq2SeqEncoderMethods:
    """Embedding, then a ``num_layers`` GRU over the time-major embeddings: ``(outputs, state)``."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0):
        super().__init__()
        hooks = hooks_for("embedding")
        self.embedding = hooks.embedding(vocab_size, embed_size)
        sizes = (embed_size, num_hiddens) if hooks.layer_inputs else (num_hiddens,)
        self.rnn = self._GRU(*sizes, num_layers, dropout)
        init_seq2seq(self)

    def forward(self, X, *args):
        time_major = ops.astype(ops.transpose(X), "int64")  # (num_steps, batch): the GRU runs along axis 0
        outputs, state = self.rnn(self.embedding(time_major))
        return outputs, state


def init_seq2seq(module):
    """The book's initialization for translation: Xavier-uniform weights for the module's dense and GRU
    layers (PyTorch, MXNet), as the framework's cells of the book do."""
    hooks = hooks_for("module_bases")
    if hooks.book_seq2seq_init is not None:
        hooks.book_seq2seq_init(module, None)


class Seq2SeqMethods:
    """The encoder-decoder trained by the cross-entropy of the target's non-padding tokens, with Adam."""

    def __init__(self, encoder, decoder, tgt_pad, lr):
        super().__init__(encoder, decoder)
        self.save_hyperparameters()

    def validation_step(self, batch):
        *inputs, target = batch
        self.plot("loss", self.loss(self(*inputs), target), train=False)

    def configure_optimizers(self):
        return optimizer(Adam, self)

    def loss(self, Y_hat, Y):
        """The mean cross-entropy over the tokens of ``Y`` that are not ``tgt_pad``."""
        per_token = super().loss(Y_hat, Y, averaged=False)
        counted = ops.astype(ops.reshape(Y, (-1,)) != self.tgt_pad, "float32")  # 0 for padding
        return ops.sum(counted * per_token) / ops.sum(counted)


def seq2seq_classes(classes, hooks):
    """The encoder-decoder classes over the framework's module classes."""
    from ..seq2seq import framework_class

    def make(name, methods, base, extra=None):
        namespace = {"__doc__": methods.__doc__, "__module__": __name__, **(extra or {})}
        return type(name, (methods, base), namespace)

    Encoder, Decoder = framework_class("Encoder"), framework_class("Decoder")
    EncoderDecoder = make("EncoderDecoder", EncoderDecoderMethods, classes["Classifier"])
    extra = {"call": keras_call} if hooks.module_bases[2] != "forward" else {}
    Seq2SeqEncoder = make("Seq2SeqEncoder", Seq2SeqEncoderMethods, Encoder, {"_GRU": classes["GRU"], **extra})
    Seq2Seq = make("Seq2Seq", Seq2SeqMethods, EncoderDecoder)
    return {"Encoder": Encoder, "Decoder": Decoder, "EncoderDecoder": EncoderDecoder,
            "Seq2SeqEncoder": Seq2SeqEncoder, "Seq2Seq": Seq2Seq, "init_seq2seq": init_seq2seq}
