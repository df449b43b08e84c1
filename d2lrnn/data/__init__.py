"""The data pipelines: corpora, tokens, vocabulary, n-gram baselines and minibatches for the language
models (``corpus``, ``iterators``, ``ngram``); sentence pairs for translation (``translation``).

The corpora ship with the package (provenance in ``README.md`` next to them). Index work
is done in NumPy; only finished minibatches become tensors of the active backend.
"""

from .corpus import (
    CORPORA,
    corpus_path,
    load_corpus,
    load_corpus_time_machine,
    read_corpus,
    read_raw_text,
    read_time_machine,
    tokenize,
    train_val_split,
)
from .iterators import (
    VAL_STREAMS,
    SeqDataLoader,
    load_data_lm,
    load_data_time_machine,
    seq_data_iter_random,
    seq_data_iter_sequential,
)
from .ngram import NGramLM, baseline_perplexity, baseline_sample, ngram_counts, ngram_perplexities, select_k
from .plots import plot_zipf
from .translation import (
    build_array_nmt,
    load_array,
    load_data_nmt,
    load_data_nmt_split,
    preprocess_nmt,
    read_data_nmt,
    tokenize_nmt,
    truncate_pad,
)
from .vocab import Vocab, count_corpus

__all__ = [
    "CORPORA", "corpus_path", "read_corpus", "read_raw_text", "read_time_machine", "tokenize", "load_corpus",
    "load_corpus_time_machine", "train_val_split", "Vocab", "count_corpus",
    "ngram_counts", "NGramLM", "select_k", "ngram_perplexities", "baseline_perplexity", "baseline_sample",
    "plot_zipf", "seq_data_iter_random", "seq_data_iter_sequential", "SeqDataLoader",
    "load_data_time_machine", "load_data_lm", "VAL_STREAMS",
    "read_data_nmt", "preprocess_nmt", "tokenize_nmt", "truncate_pad", "build_array_nmt", "load_array",
    "load_data_nmt", "load_data_nmt_split",
]
