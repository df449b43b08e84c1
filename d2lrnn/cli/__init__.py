"""The ``d2lrnn`` command: train a character RNN language model and generate text from it; train an
English-French translation model and translate with it.

``d2lrnn train`` loads a corpus, computes the n-gram baselines on the same train/validation
split, trains with a progress bar, then prints the perplexities next to the baselines,
two sample continuations, and where it wrote its files. Every run writes into a folder of its
own (:mod:`d2lrnn.runs`): after every epoch the best model so far (``model.npz``), the metrics
(``metrics.csv``), the plot (``perplexity.png``) and the state to resume from (``last.npz``), as
one set. ``d2lrnn generate`` continues a prefix with a saved model.

``d2lrnn translate-train`` trains the chapter's encoder-decoder on sentence pairs with a held-out
validation split, under the same run-folder rules (the plot is ``loss.png``, ``model.npz`` the
epoch with the best validation BLEU), then reports the BLEU of greedy and beam search and the
book's four sentences. ``d2lrnn translate`` translates sentences with a saved model.

:func:`main` takes an argument list and returns the exit code: 0 done, 1 training diverged,
2 bad arguments, input or output folder, 130 interrupted.

The commands live in submodules: :mod:`d2lrnn.cli.lm` (``train``, ``generate``),
:mod:`d2lrnn.cli.translate` (``translate-train``, ``translate``) and :mod:`d2lrnn.cli.common` (what
they share). Their names are re-exported here, as they were when the command was one module.
"""

import sys

from ..errors import D2LRNNError, TrainingError
from .common import (
    CSV_FIELDS,
    _Parser,
    backend_choice,
    beam_width,
    dropout_rate,
    file_name,
    folder,
    fraction,
    max_tokens,
    metrics_csv_writer,
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    seed_value,
    yes_no,
)
from .lm import (
    ADDED_SETTINGS,
    CELL_DEFAULTS,
    CELLS,
    NGRAM_ORDERS,
    SAMPLE_CHARS,
    SETTING_TYPES,
    TIME_MACHINE_PREFIXES,
    TRAIN_DEFAULTS,
    EpochSaver,
    _add_generate_parser,
    _add_train_parser,
    corpus_name,
    model_name,
    perplexity_plot_writer,
    perplexity_table,
    run_generate,
    run_stem,
    run_train,
    sample_prefixes,
)
from .lm import _best_ngram_note as _best_ngram_note
from .lm import _corpus_digest as _corpus_digest
from .lm import _updater as _updater
from .translate import (
    LOSS_PLOT,
    REPORT_BEAM,
    TRANSLATE_CHOICES,
    TRANSLATE_CSV_FIELDS,
    TRANSLATE_DEFAULTS,
    TRANSLATE_TYPES,
    TranslationSaver,
    _add_translate_parser,
    _add_translate_train_parser,
    pairs_name,
    run_translate,
    run_translate_train,
    translation_model_name,
    translation_plot_writer,
    translation_table,
)

__all__ = [
    "ADDED_SETTINGS", "CELLS", "CELL_DEFAULTS", "CSV_FIELDS", "LOSS_PLOT", "NGRAM_ORDERS", "REPORT_BEAM",
    "SAMPLE_CHARS", "SETTING_TYPES", "TIME_MACHINE_PREFIXES", "TRAIN_DEFAULTS", "TRANSLATE_CHOICES",
    "TRANSLATE_CSV_FIELDS", "TRANSLATE_DEFAULTS", "TRANSLATE_TYPES", "EpochSaver", "TranslationSaver",
    "backend_choice", "beam_width", "build_parser", "corpus_name", "dropout_rate", "file_name", "folder",
    "fraction", "main", "max_tokens", "metrics_csv_writer", "model_name", "nonnegative_float",
    "nonnegative_int", "pairs_name", "perplexity_plot_writer", "perplexity_table", "positive_float",
    "positive_int", "run_generate", "run_stem", "run_train", "run_translate", "run_translate_train",
    "sample_prefixes", "seed_value", "translation_model_name", "translation_plot_writer",
    "translation_table", "yes_no",
]


def build_parser():
    """The argument parser of ``d2lrnn`` with its ``train``, ``generate``, ``translate-train`` and
    ``translate`` commands."""
    from .. import __version__

    parser = _Parser(prog="d2lrnn", description="The RNN chapter of Dive into Deep Learning on NumPy, "
                     "PyTorch, TensorFlow or MXNet: train a character language model, generate text; train "
                     "an English-French translation model, translate.",
                     epilog="Run 'd2lrnn COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"d2lrnn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=_Parser)
    _add_train_parser(commands)
    _add_generate_parser(commands)
    _add_translate_train_parser(commands)
    _add_translate_parser(commands)
    return parser


def _fail(message, code):
    one_line = str(message).replace("\r", "\\r").replace("\n", "\\n")
    print(f"d2lrnn: error: {one_line}", file=sys.stderr)
    return code


def main(argv=None):
    """Run ``d2lrnn`` with ``argv`` (default: the command line) and return the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a one-line argument error
        return exit_.code if isinstance(exit_.code, int) else 0
    try:
        return args.run(args)
    except TrainingError as err:
        return _fail(err, 1)
    except D2LRNNError as err:
        return _fail(err, 2)
    except MemoryError:
        return _fail("out of memory: use a smaller --hidden, --batch-size or --num-steps", 2)
    except KeyboardInterrupt as err:
        print(f"\nd2lrnn: {err or 'interrupted'}", file=sys.stderr)
        return 130
