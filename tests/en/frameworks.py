"""A reader's framework code, as the 1.0 edition's cells write it, for the tests' own models."""

import importlib


def parameter(backend, array):
    """``array`` as a trainable parameter the framework's way (PyTorch: ``nn.Parameter``, MXNet: an array
    with a gradient attached)."""
    if backend == "torch":
        torch = importlib.import_module("torch")
        return torch.nn.Parameter(torch.tensor(array))
    if backend == "mxnet":
        mx = importlib.import_module("mxnet")
        param = mx.np.array(array)
        param.attach_grad()
        return param
    if backend == "tensorflow":  # (Keras 3 tracks a keras.Variable, not a tf.Variable, on a model)
        tf = importlib.import_module("tensorflow")
        return tf.keras.Variable(array) if keras3(backend) else tf.Variable(array)
    raise NotImplementedError(backend)


def keras3(backend):
    """Whether the env's framework is TensorFlow with Keras 3, which has no time-major layers (the 1.0
    edition's d2l.RNN and d2l.GRU are Keras 2's)."""
    if backend != "tensorflow":
        return False
    return hasattr(importlib.import_module("tensorflow").keras.layers.Layer, "stateless_call")


def decoder_class(backend, d2l):
    """A decoder of our own for ``d2l.Seq2Seq`` (not the book's): it starts from the encoder's final state
    and reads only the shifted target, with no context vector: logits = W(GRU(E[X^T], H_enc)), batch-major."""
    if backend == "jax":
        return _flax_decoder(d2l)
    fw = importlib.import_module({"torch": "torch", "mxnet": "mxnet", "tensorflow": "tensorflow"}[backend])

    class StateOnlyDecoder(d2l.Decoder):
        def __init__(self, vocab_size, embed_size, num_hiddens, num_layers):
            super().__init__()
            if backend == "torch":
                self.lookup = fw.nn.Embedding(vocab_size, embed_size)
                self.gru = d2l.GRU(embed_size, num_hiddens, num_layers)
                self.logits = fw.nn.Linear(num_hiddens, vocab_size)
            elif backend == "mxnet":
                self.lookup = fw.gluon.nn.Embedding(vocab_size, embed_size)
                self.gru = d2l.GRU(num_hiddens, num_layers)
                self.logits = fw.gluon.nn.Dense(vocab_size, flatten=False)
                self.initialize(fw.init.Xavier())
            else:
                self.lookup = fw.keras.layers.Embedding(vocab_size, embed_size)
                self.gru = d2l.GRU(num_hiddens, num_layers)
                self.logits = fw.keras.layers.Dense(vocab_size)

        def init_state(self, encoded, *args):
            return encoded[1]  # the encoder's (outputs, state): its final state only

        def decode(self, X, H, **kwargs):
            steps = self.lookup(d2l.astype(d2l.transpose(X), d2l.int32))
            Hs, H = self.gru(steps, H, **kwargs)
            return d2l.swapaxes(self.logits(Hs), 0, 1), H

        if backend == "tensorflow":
            def call(self, X, H, training=False):
                return self.decode(X, H, training=training)
        else:
            def forward(self, X, H):
                return self.decode(X, H)

    return StateOnlyDecoder


def _flax_decoder(d2l):
    nn = importlib.import_module("flax.linen")

    class StateOnlyDecoder(d2l.Decoder):
        vocab_size: int
        embed_size: int
        num_hiddens: int
        num_layers: int

        def setup(self):
            self.lookup = nn.Embed(self.vocab_size, self.embed_size)
            self.gru = d2l.GRU(self.num_hiddens, self.num_layers)
            self.logits = nn.Dense(self.vocab_size)

        def init_state(self, encoded, *args):
            return encoded[1]

        def __call__(self, X, H, training=False):
            steps = self.lookup(d2l.astype(d2l.transpose(X), d2l.int32))
            Hs, H = self.gru(steps, H, training=training)
            return d2l.swapaxes(self.logits(Hs), 0, 1), H

    return StateOnlyDecoder
