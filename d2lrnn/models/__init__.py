"""Language models: the RNN from scratch and the framework's own RNN layer behind one interface.

Every model has ``params`` (a list of tensors), ``forward(params, X, state)``,
``net(X, state)``, ``begin_state(batch_size, device)``, ``vocab_size``, ``num_hiddens``,
``kind``, and converts its parameters to and from the from-scratch layout
``[W_xh, W_hh, b_h, W_hq, b_q]`` (``scratch_params`` / ``load_scratch_params``), which is
what checkpoints store, so a model trained on one backend loads on any other.
"""

from .. import checks
from ..errors import ArgumentError
from .rnn_scratch import RNNModelScratch


def make_model(kind, vocab_size, num_hiddens, device=None):
    """A fresh model of ``kind`` ('scratch' or 'concise'; also their ``net.kind`` names)."""
    kind = {"rnn_scratch": "scratch", "rnn_concise": "concise"}.get(kind, kind)
    vocab_size = checks.positive_int("vocab_size", vocab_size, " (len(vocab))")
    num_hiddens = checks.positive_int("num_hiddens", num_hiddens, " (hidden units, e.g. 512)")
    if kind == "scratch":
        return RNNModelScratch(vocab_size, num_hiddens, device)
    if kind == "concise":
        from .rnn_concise import RNNModel, rnn_layer

        return RNNModel(rnn_layer(vocab_size, num_hiddens), vocab_size, device)
    raise ArgumentError(f"unknown model {kind!r}: choose 'scratch' or 'concise'")
