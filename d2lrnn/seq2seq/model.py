"""The encoder-decoder architecture and the chapter's RNN instance of it, written once above the shim.

An encoder reads the source sentence X (batch, num_steps) of token indices; a decoder starts from
a state made of what the encoder computed and produces the target sentence one token after
another::

    encoder:  E_t = embedding[x_t],   (H_1..H_T, state) = RNN(E_1..E_T)
    decoder:  c = H_T of the encoder's last layer (the context), s_0 = the encoder's final state
              (S_t', s_t') = RNN([embedding[y_t'-1], c], s_t'-1),   O_t' = S_t' W_hq + b_q

The context c is concatenated to the decoder's input at every step; it stays the encoder's
state even while the decoder's own state moves on (``Seq2SeqDecoder.init_state`` keeps it in the
state as its first entry). Like the book, the encoder reads the padded sentence to its end (its
``<pad>`` tokens included), so a sentence translates the same alone or in a batch.

With ``attention=True`` the decoder also looks back at every source word (Luong et al. 2015: global
attention with the "general" score, after the recurrent layers)::

    a_t't = softmax over t of S_t' W_a H_t^T (the source's valid steps only),   c_t' = sum_t a_t't H_t
    O_t' = tanh([S_t', c_t'] W_c + b_c) W_hq + b_q

so the one vector c is no longer all the decoder knows of a long sentence. The recurrent layers still
run over the whole target at once, since the attention reads their outputs, not their inputs.

With ``bidirectional=True`` the encoder's layers read the sentence both ways, num_hiddens / 2 units in each
direction (as OpenNMT's ``brnn``): H_t = [H->_t, H<-_t] and each layer's final state [H->_T, H<-_1] keep
num_hiddens features, so the decoder and the attention are unchanged while every H_t knows the words after t.

With ``tie_embeddings=True`` the decoder's output layer reads its weights from its own embedding,
W_hq = embedding^T (Press and Wolf 2017), so a word's input and output vectors are one (embed_size must
equal num_hiddens): the largest matrix of a small model on a large vocabulary is gone.

As for the language models, parameters are one flat list of tensors with a name each
(``encoder.embedding``, ``encoder.W_xz``, ..., ``decoder.W_hq``, ``decoder.b_q``); ``forward``
takes them as its first argument, so ``value_and_grad`` differentiates it on every backend. The
recurrent layers are the language models' stacker (:class:`d2lrnn.models.RecurrentStack`, the
cell from scratch) or the framework's own layer (:class:`d2lrnn.models.native.NativeLayer`,
``rnn='concise'``, or a layer the reader built: ``torch.nn.GRU(embed_size, num_hiddens, 2)``).
"""

from .. import checks, ops
from ..backends import checked_indices, checked_lengths
from ..errors import ArgumentError
from ..keys import device_key, key_of, own
from ..models.native import NativeLayer
from ..models.stack import RecurrentStack, check_dropout
from .loss import _sequence_mask

#: What the ``rnn`` argument of the encoder and decoder accepts besides a framework layer.
RNN_KINDS = ("scratch", "concise")


def xavier_uniform(shape, device=None):
    """U(-a, a) with a = sqrt(6 / (fan_in + fan_out)): the weights the book's ``train_seq2seq``
    starts from (``nn.init.xavier_uniform_``), drawn from d2lrnn's generator."""
    bound = (6.0 / (shape[0] + shape[1])) ** 0.5
    return ops.uniform(-bound, bound, shape, device=device)


def init_weights(shapes, device=None):
    """Xavier-uniform weights (2 axes) and zero biases (1 axis), in the order of ``shapes``."""
    return [xavier_uniform(s, device) if len(s) == 2 else ops.zeros(s, device=device) for s in shapes]


def attention_shapes(num_hiddens):
    """``{name: shape}`` of the decoder's attention weights (``W_a``, ``W_c``, ``b_c``): what
    ``attention=True`` adds before its dense layer, here and in checkpoints."""
    h = num_hiddens
    return {"W_a": (h, h), "W_c": (2 * h, h), "b_c": (h,)}


def embedding_params(vocab_size, embed_size, device=None):
    """The embedding matrix (vocab_size, embed_size) ~ N(0, 1), the frameworks' default."""
    return ops.normal(0, 1, (vocab_size, embed_size), device=device)


def recurrent_layer(rnn, cell, num_inputs, num_hiddens, num_layers, dropout, reset_after,
                    bidirectional=False):
    """The recurrent stack an encoder or decoder runs: from scratch, the framework's own layer, or a
    framework layer the reader built (checked: it must read ``num_inputs`` features and run in both
    directions exactly when ``bidirectional``)."""
    if isinstance(rnn, str):
        if rnn not in RNN_KINDS:
            raise ArgumentError(f"rnn is {rnn!r}: use 'scratch' (the cell from scratch), 'concise' (the "
                                "framework's own layer) or a framework layer such as torch.nn.GRU(...)")
        if rnn == "scratch":
            if reset_after is None:  # the frameworks' GRU form, which the book's seq2seq (nn.GRU) computes
                reset_after = cell == "gru"
            return RecurrentStack(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout,
                                  reset_after)
        return NativeLayer(cell, num_inputs, num_hiddens, num_layers, bidirectional, dropout, reset_after)
    if isinstance(rnn, RecurrentStack):
        layer = rnn
    else:
        layer = NativeLayer.wrap(rnn, num_inputs, inputs=f"the embedding and context give {num_inputs}")
    if layer.num_inputs != num_inputs:
        raise ArgumentError(f"the recurrent layer takes {layer.num_inputs} inputs but gets {num_inputs}: "
                            f"build it with input size {num_inputs}")
    if layer.bidirectional and not bidirectional:
        raise ArgumentError("the decoder starts from the encoder's state, so both run in one direction: "
                            "build the layer without bidirectional (an encoder reads both ways with "
                            "bidirectional=True)")
    if bidirectional and not layer.bidirectional:
        raise ArgumentError("bidirectional=True runs the encoder's layer in both directions: build it with "
                            "bidirectional=True, num_hiddens / 2 units each way")
    return layer


class _Module:
    """Parameters with names, and ``net(...)`` calling ``forward`` with them."""

    params, param_names = [], ()

    def __call__(self, *args, **kwargs):
        return self.forward(self.params, *self.checked(*args), **kwargs)

    def checked(self, *args):
        """The arguments of a call, checked (token indices in the vocabulary); ``forward``, what compiled
        steps run, takes them unchecked."""
        return args

    def named_params(self):
        """``{name: tensor}`` in the order of the flat list."""
        return dict(zip(self.param_names, self.params, strict=True))


class Encoder(_Module):
    """The encoder interface: ``forward(params, X, *args)`` returns what the decoder starts from."""

    def forward(self, params, X, *args, training=False):
        raise NotImplementedError


class Decoder(_Module):
    """The decoder interface: ``init_state(enc_outputs, *args)`` turns the encoder's outputs into the
    decoder's first state; ``forward(params, X, state)`` returns ``(outputs, new_state)``."""

    def init_state(self, enc_outputs, *args):
        raise NotImplementedError

    def forward(self, params, X, state, training=False):
        raise NotImplementedError


def embedded(embedding, X, dropout=0.0):
    """The embeddings of the words X (batch, num_steps), time first: (num_steps, batch, embed_size), with
    ``dropout`` (a rate; 0: none) on their units."""
    E = ops.take(embedding, ops.transpose(X))
    return ops.dropout(E, dropout) if dropout else E


def _kind(layer):
    return "concise" if isinstance(layer, NativeLayer) else "scratch"


def _part_key(part):
    """``compile_key`` of the encoder's or decoder's: its class, layer, sizes and device; None for the
    reader's own code."""
    layer = part.rnn.compile_key()
    if layer is None or not own(part):
        return None
    return (type(part), layer, part.vocab_size, part.embed_size, getattr(part, "embed_dropout", 0.0),
            getattr(part, "output_dropout", 0.0), getattr(part, "attention", False),
            getattr(part, "tie_embeddings", False), device_key(part.device))


class Seq2SeqEncoder(Encoder):
    """The RNN encoder: an embedding, then ``num_layers`` recurrent layers of ``cell`` (the GRU).

    ``forward(params, X, *args)`` takes X (batch, num_steps) of token indices and returns
    ``(outputs, state)``: the last layer's states at every step (num_steps, batch, num_hiddens) and
    the final state of every layer (a tuple). ``dropout`` acts between the layers in training,
    ``embed_dropout`` on the embedded words (each unit of each word's embedding, a fresh mask per step).
    ``rnn`` is 'scratch' (the cell's equations, :mod:`d2lrnn.models`), 'concise' (the framework's own
    layer) or a framework layer that reads ``embed_size`` features. ``reset_after`` picks the GRU's
    form: by default the frameworks' (reset gate after the recurrent product), the form the book's
    seq2seq computes with ``nn.GRU``, from scratch too, so scratch and concise are the same model;
    ``reset_after=False`` gives the GRU chapter's form from scratch. ``bidirectional=True`` runs each layer
    both ways with ``num_hiddens // 2`` units a direction and joins them: the outputs and every layer's
    final state stay ``num_hiddens`` wide, [forward, backward] (the module docstring).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers=1, dropout=0.0, rnn="scratch",
                 cell="gru", reset_after=None, device=None, embed_dropout=0.0, bidirectional=False):
        self.vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(src_vocab))")
        self.embed_size = checks.positive_int("embed_size", embed_size, " (e.g. 32)")
        self.embed_dropout = check_dropout(embed_dropout, "embed_dropout")
        self.bidirectional = checks.flag("bidirectional", bidirectional)
        if self.bidirectional and isinstance(rnn, str):
            num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 32)")
            if num_hiddens % 2:
                raise ArgumentError(f"bidirectional=True gives each direction half of num_hiddens, and "
                                    f"{num_hiddens} is odd: give an even num_hiddens")
            num_hiddens //= 2
        self.rnn = recurrent_layer(rnn, cell, self.embed_size, num_hiddens, num_layers, dropout, reset_after,
                                   self.bidirectional)
        self.num_hiddens, self.kind, self.device = self.rnn.num_outputs, _kind(self.rnn), device
        self.params = [embedding_params(self.vocab_size, self.embed_size, device)] + \
            init_weights(self.rnn.shapes(), device)
        self.param_names = ("embedding",) + self.rnn.names

    def checked(self, X, *args):
        return (checked_indices("X", X, self.vocab_size, "the source vocabulary"), *args)

    def compile_key(self):
        """What :meth:`forward` computes besides its arguments (``ops.compile``'s ``key``)."""
        return _part_key(self)

    def forward(self, params, X, *args, training=False):
        X = ops.to_device(X, self.device)  # as the book's X.to(device): the iterators make it on the CPU
        E = embedded(params[0], X, self.embed_dropout if training else 0.0)
        state = self.rnn.begin_state(ops.shape(X)[0], self.device)
        outputs, state = self.rnn.forward(params[1:], E, state, training)
        return outputs, self.joined(state) if self.bidirectional else state

    def joined(self, state):
        """A bidirectional stack's final state (each layer's forward, then backward, cell states) as one
        state per layer, [forward, backward] side by side: what a one-way decoder of num_hiddens starts
        from."""
        n = len(self.rnn.cell.state_names)
        return tuple(ops.concat([state[2 * n * layer + i], state[2 * n * layer + n + i]], 1)
                     for layer in range(self.rnn.num_layers) for i in range(n))


class Seq2SeqDecoder(Decoder):
    """The RNN decoder: an embedding, recurrent layers reading [embedding, context], a dense layer.

    ``init_state((outputs, state))`` gives ``(context,) + state``: the encoder's last-layer final H,
    kept fixed, then the encoder's final state, from which the decoder's layers start (so they have
    the encoder's ``num_hiddens`` and ``num_layers``). ``forward(params, X, state)`` takes X (batch,
    num_steps) of target indices and returns the logits (batch, num_steps, vocab_size) and the new
    state. ``rnn``, ``cell``, ``reset_after``, ``embed_dropout``: as for :class:`Seq2SeqEncoder`;
    ``output_dropout`` drops units of the last layer's states (with ``attention``, of the attentional
    states) before the dense layer in training. ``attention=True`` adds global attention over the source
    (the module docstring; parameters ``W_a``, ``W_c``, ``b_c``), and ``init_state`` then also keeps the
    encoder's states (batch, num_steps, num_hiddens) and the source's mask (batch, num_steps) from its
    valid lengths: ``(context, H, mask) + state``. ``tie_embeddings=True`` uses the embedding's transpose
    as the dense layer's weights (no ``W_hq``; ``embed_size`` must equal ``num_hiddens``).
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers=1, dropout=0.0, rnn="scratch",
                 cell="gru", reset_after=None, device=None, embed_dropout=0.0, output_dropout=0.0,
                 attention=False, tie_embeddings=False):
        self.vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(tgt_vocab))")
        self.embed_size = checks.positive_int("embed_size", embed_size, " (e.g. 32)")
        self.embed_dropout = check_dropout(embed_dropout, "embed_dropout")
        self.output_dropout = check_dropout(output_dropout, "output_dropout")
        self.attention = checks.flag("attention", attention)
        self.tie_embeddings = checks.flag("tie_embeddings", tie_embeddings)
        num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 32)")
        if self.tie_embeddings and self.embed_size != num_hiddens:
            raise ArgumentError(f"tie_embeddings=True makes the embedding ({self.embed_size} wide) the "
                                f"output layer's weights, which read {num_hiddens} hidden units: make "
                                "embed_size equal num_hiddens")
        self.rnn = recurrent_layer(rnn, cell, self.embed_size + num_hiddens, num_hiddens, num_layers, dropout,
                                   reset_after)
        self.num_hiddens, self.kind, self.device = self.rnn.num_hiddens, _kind(self.rnn), device
        attention = attention_shapes(num_hiddens) if self.attention else {}
        dense = {"b_q": (self.vocab_size,)} if self.tie_embeddings else \
            {"W_hq": (num_hiddens, self.vocab_size), "b_q": (self.vocab_size,)}
        # Tied, the embedding starts as the output layer would (Xavier): N(0, 1) rows would give logits
        # of spread sqrt(num_hiddens) from the first step.
        embedding = xavier_uniform((self.vocab_size, self.embed_size), device) if self.tie_embeddings else \
            embedding_params(self.vocab_size, self.embed_size, device)
        self.params = [embedding] + \
            init_weights(self.rnn.shapes() + list(attention.values()) + list(dense.values()), device)
        self.param_names = ("embedding",) + self.rnn.names + tuple(attention) + tuple(dense)

    def init_state(self, enc_outputs, *args):
        outputs, state = enc_outputs
        context = state[-len(self.rnn.cell.state_names)]  # H of the last layer (LSTM: before its C)
        if not self.attention:
            return (context,) + tuple(state)
        H = ops.transpose(outputs, (1, 0, 2))  # batch first, as every entry of the state, for beam search
        batch, steps = ops.shape(H)[:2]
        mask = ops.ones((batch, steps), device=ops.device_of(H))
        valid_len = args[0] if args else None
        if valid_len is not None:
            mask = _sequence_mask(mask, ops.to_device(valid_len, ops.device_of(H)))
        return (context, H, mask) + tuple(state)

    def checked(self, X, *args):
        return (checked_indices("X", X, self.vocab_size, "the target vocabulary"), *args)

    def compile_key(self):
        """What :meth:`forward` computes besides its arguments (``ops.compile``'s ``key``)."""
        return _part_key(self)

    def forward(self, params, X, state, training=False):
        kept = 3 if self.attention else 1  # (context,) or (context, H, mask): the state's fixed entries
        context, rnn_state = state[0], tuple(state[kept:])
        n = 1 + len(self.rnn.names)
        rnn_params, attention_params = params[1:n], params[n:n + 3]
        X = ops.to_device(X, self.device)
        E = embedded(params[0], X, self.embed_dropout if training else 0.0)
        if getattr(self.rnn, "native", None) is None:  # the cell's own recurrence
            Hs, rnn_state = self.rnn.forward(self.fold_context(rnn_params, context), E, rnn_state, training)
        else:  # a framework layer reads [E_t, c] at every step
            C = ops.zeros((ops.shape(E)[0], 1, 1), device=self.device) + context
            Hs, rnn_state = self.rnn.forward(rnn_params, ops.concat([E, C], 2), rnn_state, training)
        S = ops.transpose(Hs, (1, 0, 2))  # (batch, num_steps, num_hiddens)
        if self.attention:
            S = self.attend(attention_params, S, *state[1:3])
        if training and self.output_dropout:
            S = ops.dropout(S, self.output_dropout)
        W_hq = ops.transpose(params[0]) if self.tie_embeddings else params[-2]
        O = ops.dense(S, W_hq, params[-1])  # S W_hq + b_q: (batch, num_steps, vocab)
        return O, tuple(state[:kept]) + rnn_state

    @staticmethod
    def attend(params, S, H, mask):
        """The attentional states tanh([S_t', c_t'] W_c + b_c) for the decoder's states S (batch, T', h),
        with c_t' = sum_t softmax_t(S_t' W_a H_t^T) H_t over the encoder's states H (batch, T, h) where
        ``mask`` (batch, T) is 1."""
        W_a, W_c, b_c = params
        scores = ops.matmul(ops.matmul(S, W_a), ops.transpose(H, (0, 2, 1)))  # (batch, T', T)
        # Padding gets a score of -1e6, not -inf: exp gives exactly 0 without inf - inf in the gradient.
        mask = ops.reshape(mask, (ops.shape(mask)[0], 1, ops.shape(mask)[1]))
        A = ops.softmax(scores * mask - 1e6 * (1 - mask), axis=-1)
        C = ops.matmul(A, H)  # (batch, T', h)
        return ops.tanh(ops.matmul(ops.concat([S, C], 2), W_c) + b_c)


    def fold_context(self, params, context):
        """The recurrent layers' parameters with the context folded into the first layer's biases.

        [E_t, c] W_x + b = E_t W_x[:e] + (c W_x[e:] + b): the context's part is the same at every
        step, so it is computed once per sentence, as a bias with one row per sentence, and the
        steps multiply only their embeddings (e = embed_size).
        """
        names, e = self.rnn.cell.names, self.embed_size
        first = dict(zip(names, params[:len(names)]))
        for g in self.rnn.cell.gates:
            W = first[f"W_x{g}"]
            first[f"W_x{g}"], first[f"b_{g}"] = W[:e], first[f"b_{g}"] + ops.matmul(context, W[e:])
        return [first[name] for name in names] + list(params[len(names):])


class EncoderDecoder(_Module):
    """An encoder and a decoder trained as one model: ``net(enc_X, dec_X, *args) -> (outputs, state)``.

    ``params`` is the encoder's list followed by the decoder's (names ``encoder.*``, ``decoder.*``);
    setting it sets theirs, so ``net.encoder(X)`` and ``net.decoder(Y, state)`` use the trained values.
    """

    def __init__(self, encoder, decoder):
        for part, cls in ((encoder, Encoder), (decoder, Decoder)):
            if not isinstance(part, cls):
                raise ArgumentError("EncoderDecoder takes an Encoder and a Decoder, got "
                                    f"{type(part).__name__} for the {cls.__name__.lower()}: subclass "
                                    f"d2l.{cls.__name__}")
        self.encoder, self.decoder = encoder, decoder

    @property
    def params(self):
        return list(self.encoder.params) + list(self.decoder.params)

    @params.setter
    def params(self, params):
        params = list(params)
        n = len(self.encoder.params)
        if len(params) != n + len(self.decoder.params):
            raise ArgumentError(f"expected {n + len(self.decoder.params)} parameters "
                                f"({n} encoder, {len(self.decoder.params)} decoder), got {len(params)}")
        self.encoder.params, self.decoder.params = params[:n], params[n:]

    @property
    def param_names(self):
        return tuple("encoder." + n for n in self.encoder.param_names) + \
            tuple("decoder." + n for n in self.decoder.param_names)

    def split(self, params):
        """``params`` as (the encoder's, the decoder's)."""
        n = len(self.encoder.params)
        return list(params[:n]), list(params[n:])

    def checked(self, enc_X, dec_X, *args):
        """Source and target indices in the encoder's and decoder's vocabularies, and the source's valid
        lengths (the first further argument, if any) from 0 to its num_steps."""
        enc_X, = self.encoder.checked(enc_X)
        dec_X, *_ = self.decoder.checked(dec_X, None)
        if args and args[0] is not None:
            checked_lengths("enc_valid_len", args[0], ops.shape(enc_X)[1])
        return (enc_X, dec_X, *args)

    def encode(self, params, enc_X, *args, training=False):
        """The decoder's first state for source sentences ``enc_X``."""
        enc_params, _ = self.split(params)
        enc_outputs = self.encoder.forward(enc_params, enc_X, *args, training=training)
        return self.decoder.init_state(enc_outputs, *args)

    def decode(self, params, dec_X, state, training=False):
        """``(outputs, new_state)`` of the decoder for inputs ``dec_X`` from ``state``."""
        _, dec_params = self.split(params)
        return self.decoder.forward(dec_params, dec_X, state, training=training)

    def forward(self, params, enc_X, dec_X, *args, training=False):
        state = self.encode(params, enc_X, *args, training=training)
        return self.decode(params, dec_X, state, training=training)

    def compile_key(self):
        """What :meth:`forward`, :meth:`encode` and :meth:`decode` compute besides their arguments
        (``ops.compile``'s ``key``): the encoder's and the decoder's; None where either is the reader's."""
        parts = [key_of(self.encoder), key_of(self.decoder)]
        if None in parts or not own(self, ("forward", "encode", "decode")):
            return None
        return (type(self), *parts)

    @property
    def kind(self):
        return getattr(self.encoder, "kind", "custom")

    @property
    def device(self):
        """Where the decoder's parameters live (what training and decoding default to), None if unsaid."""
        return getattr(self.decoder, "device", None)

    def config(self):
        """The settings that rebuild this model (see :func:`make_seq2seq`), or None for the reader's own."""
        enc, dec = self.encoder, self.decoder
        if not (isinstance(enc, Seq2SeqEncoder) and isinstance(dec, Seq2SeqDecoder)):
            return None
        layer = enc.rnn
        return {"kind": "seq2seq", "rnn": enc.kind, "cell": layer.cell.name,
                "src_vocab_size": enc.vocab_size, "tgt_vocab_size": dec.vocab_size,
                "embed_size": enc.embed_size, "num_hiddens": enc.num_hiddens, "num_layers": layer.num_layers,
                "dropout": layer.dropout, "reset_after": layer.cell.reset_after,
                "embed_dropout": enc.embed_dropout, "output_dropout": dec.output_dropout,
                "attention": dec.attention, "tie_embeddings": dec.tie_embeddings,
                "bidirectional": enc.bidirectional}


def make_seq2seq(src_vocab_size, tgt_vocab_size, embed_size=32, num_hiddens=32, num_layers=2, dropout=0.1,
                 rnn="scratch", cell="gru", reset_after=None, device=None, embed_dropout=0.0,
                 output_dropout=0.0, attention=False, tie_embeddings=False, bidirectional=False):
    """The chapter's model: ``EncoderDecoder(Seq2SeqEncoder(...), Seq2SeqDecoder(...))`` (defaults: the
    book's sizes, whose only dropout is ``dropout``, between the recurrent layers). ``embed_dropout``
    acts on the embedded words of encoder and decoder, ``output_dropout`` on the decoder's states before
    its dense layer, both in training only; ``attention`` gives the decoder global attention over the
    source words and ``tie_embeddings`` makes its output layer's weights its embedding's transpose
    (:class:`Seq2SeqDecoder`); ``bidirectional`` reads the source both ways (:class:`Seq2SeqEncoder`). The
    encoder's parameters are drawn first, then the decoder's."""
    encoder = Seq2SeqEncoder(src_vocab_size, embed_size, num_hiddens, num_layers, dropout, rnn, cell,
                             reset_after, device, embed_dropout, bidirectional)
    decoder = Seq2SeqDecoder(tgt_vocab_size, embed_size, num_hiddens, num_layers, dropout, rnn, cell,
                             reset_after, device, embed_dropout, output_dropout, attention, tie_embeddings)
    return EncoderDecoder(encoder, decoder)
