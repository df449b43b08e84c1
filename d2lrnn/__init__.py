"""d2lrnn: the RNN chapter of Dive into Deep Learning on NumPy, PyTorch, TensorFlow, MXNet and JAX.

Use it as the book does::

    import d2lrnn as d2l
    X, W_xh = d2l.normal(0, 1, (3, 1)), d2l.normal(0, 1, (1, 4))

The backend comes from ``D2LRNN_BACKEND`` (default ``numpy``) or ``d2l.set_backend``.
Only the active backend's framework is imported, and only when first used.

This module is the package face: the book's names (the book's call forms from :mod:`d2lrnn.book`,
the rest from the core: :mod:`d2lrnn.data`, :mod:`d2lrnn.models`, :mod:`d2lrnn.training`,
:mod:`d2lrnn.lm`, :mod:`d2lrnn.seq2seq`). Nothing inside the package imports it.
"""

import functools

import numpy as _np

from . import models, ops
from ._version import __version__  # noqa: F401 - d2l.__version__
from .backends import (
    ALIASES,
    SHIM_FUNCTIONS,
    available_backends,
    backend_name,
    get_backend,
    set_backend,
    use_backend,
)
from .book.data import DATA_HUB, DATA_URL, download, download_extract
from .book.forms import book_function
from .book.models import RNNModel, RNNModelScratch
from .book.paddle_forms import place_as_device
from .book.plotting import plot, set_axes, set_figsize, show_list_len_pair_hist, use_svg_display
from .book.seq2seq import Decoder, Encoder, EncoderDecoder, predict_seq2seq, train_seq2seq, translate
from .book.training import SGD, evaluate_loss, grad_clipping, predict_ch8, sgd, train_ch8, train_epoch_ch8
from .data import (
    CORPORA,
    VAL_STREAMS,
    NGramLM,
    SeqDataLoader,
    Vocab,
    baseline_perplexity,
    build_array_nmt,
    corpus_path,
    count_corpus,
    load_array,
    load_corpus,
    load_corpus_time_machine,
    load_data_lm,
    load_data_nmt,
    load_data_nmt_split,
    load_data_time_machine,
    ngram_counts,
    ngram_perplexities,
    plot_zipf,
    preprocess_nmt,
    read_corpus,
    read_data_nmt,
    read_time_machine,
    select_k,
    seq_data_iter_random,
    seq_data_iter_sequential,
    tokenize,
    tokenize_nmt,
    train_val_split,
    truncate_pad,
)
from .errors import (
    ArgumentError,
    BackendError,
    CheckpointError,
    D2LRNNError,
    DataError,
    RunFolderError,
    TrainingError,
)
from .lm import (
    FullBPTT,
    RandomizedTruncation,
    RegularTruncation,
    StackedRNNModelScratch,
    Updater,
    checkpoint_info,
    evaluate_perplexity,
    load_checkpoint,
    make_eval_step,
    make_model,
    make_train_step,
    save_checkpoint,
    state_gradient_norms,
)
from .models import (
    get_gru_params,
    get_lstm_params,
    get_params,
    gru,
    gru_textbook,
    init_gru_state,
    init_lstm_state,
    init_rnn_state,
    lstm,
    lstm_textbook,
    rnn,
    rnn_layer,
    rnn_textbook,
)
from .seq2seq import (
    MaskedSoftmaxCELoss,
    Seq2SeqDecoder,
    Seq2SeqEncoder,
    beam_search,
    bleu,
    corpus_bleu,
    greedy_search,
    load_seq2seq_checkpoint,
    make_seq2seq,
    save_seq2seq_checkpoint,
    sequence_mask,
)
from .training import Accumulator, Adam, Animator, Schedule, Timer, progress_bar

#: The book's dtype names (``d2l.astype(x, d2l.int32)``), as NumPy dtypes: every backend's tensor makers
#: and ``astype`` take them.
float32, int32, int64 = _np.float32, _np.int32, _np.int64

__all__ = [
    "ops", "available_backends", "backend_name", "get_backend", "set_backend", "use_backend",
    "ArgumentError", "BackendError", "CheckpointError", "D2LRNNError", "DataError", "RunFolderError",
    "TrainingError",
    *SHIM_FUNCTIONS, *ALIASES,
    "CORPORA", "corpus_path", "read_corpus", "read_time_machine", "tokenize", "load_corpus",
    "load_corpus_time_machine", "train_val_split", "Vocab", "count_corpus", "ngram_counts", "NGramLM",
    "select_k", "ngram_perplexities", "baseline_perplexity", "plot_zipf", "seq_data_iter_random",
    "seq_data_iter_sequential", "SeqDataLoader", "load_data_time_machine", "load_data_lm", "VAL_STREAMS",
    "models", "make_model", "RNNModel", "RNNModelScratch", "StackedRNNModelScratch", "rnn_layer",
    "get_params", "init_rnn_state", "rnn", "rnn_textbook", "get_gru_params", "init_gru_state", "gru",
    "gru_textbook", "get_lstm_params", "init_lstm_state", "lstm", "lstm_textbook", "Animator", "progress_bar",
    "Accumulator", "Timer", "grad_clipping", "sgd", "SGD", "Adam", "Schedule", "Updater", "make_train_step",
    "make_eval_step",
    "train_epoch_ch8", "evaluate_loss", "evaluate_perplexity", "predict_ch8", "train_ch8",
    "FullBPTT", "RegularTruncation", "RandomizedTruncation", "state_gradient_norms",
    "save_checkpoint", "load_checkpoint", "checkpoint_info", "bleu", "corpus_bleu",
    "read_data_nmt", "preprocess_nmt", "tokenize_nmt", "truncate_pad", "build_array_nmt", "load_array",
    "load_data_nmt", "load_data_nmt_split", "sequence_mask", "MaskedSoftmaxCELoss", "Encoder", "Decoder",
    "EncoderDecoder", "Seq2SeqEncoder", "Seq2SeqDecoder", "make_seq2seq", "train_seq2seq", "predict_seq2seq",
    "translate", "greedy_search", "beam_search", "save_seq2seq_checkpoint", "load_seq2seq_checkpoint",
    "DATA_HUB", "DATA_URL", "download", "download_extract", "plot", "set_axes", "set_figsize",
    "show_list_len_pair_hist", "use_svg_display", "float32", "int32", "int64",
]


#: Shim functions that place a new tensor: the book's MXNet cells name the device ``ctx=``, its Paddle cells
#: ``place=``.
_PLACING = ("normal", "uniform", "zeros", "ones", "arange", "tensor", "from_numpy")


def _ctx_as_device(fn):
    """``fn`` also taking MXNet's ``ctx=`` for ``device=`` (``d2l.zeros(shape, ctx=device)``), and Paddle's
    ``place=`` (``d2l.tensor(x, place=device)``)."""

    @functools.wraps(fn)
    def placed(*args, **kwargs):
        kwargs = place_as_device(fn.__name__, kwargs)
        if "ctx" in kwargs:
            if "device" in kwargs:
                raise ArgumentError(f"d2l.{fn.__name__}: give the device once, as device= or ctx=")
            kwargs["device"] = kwargs.pop("ctx")
        return fn(*args, **kwargs)

    return placed


def __getattr__(name):
    # d2l.matmul, d2l.normal, ...: forwarded to the active backend at call time, in d2lrnn's call form
    # or the active framework's (book/forms.py).
    if name in SHIM_FUNCTIONS or name in ALIASES:
        fn = book_function(ALIASES.get(name, name), getattr(ops, name))
        return _ctx_as_device(fn) if name in _PLACING else fn
    if name == "plt":  # the book's d2l.plt: pyplot, imported when first asked for
        import matplotlib.pyplot

        return matplotlib.pyplot
    raise AttributeError(f"module 'd2lrnn' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
