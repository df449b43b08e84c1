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
"""

import argparse
import csv
import hashlib
import math
import os
import pathlib
import sys
import time

import numpy as np

from . import checks, ops
from .backends import available_backends, backend_name, generator_state, set_generator_state, use_backend
from .bleu import bleu
from .checkpoint import (
    checkpoint_info,
    checkpoint_kind,
    checkpoint_writer,
    load_checkpoint,
    load_optimizer_state,
)
from .data import CORPORA, baseline_sample, corpus_path, load_data_lm, load_data_nmt_split, ngram_perplexities
from .data.translation import PAIRS_FILE
from .errors import CheckpointError, D2LRNNError, DataError, RunFolderError, TrainingError
from .models import cell_names, make_model
from .models.cell import INITS, TOKEN_BOUND
from .optim import Schedule, get_optimizer
from .runs import open_run_folder
from .seq2seq import evaluate_bleu, make_seq2seq, make_seq2seq_updater, train_seq2seq, translate
from .seq2seq.checkpoint import (
    load_seq2seq_checkpoint,
    parameter_shapes,
    seq2seq_checkpoint_info,
    seq2seq_checkpoint_writer,
)
from .seq2seq.decode import ALPHA
from .seq2seq.train import book_bleu, book_sentences
from .train import SEES_THE_FUTURE, Updater, format_perplexity, predict_ch8, quiet_numerics, train_ch8

NGRAM_ORDERS = (1, 2, 3, 5)
CELLS = tuple(cell_names())
SAMPLE_CHARS = 100
TIME_MACHINE_PREFIXES = ("time traveller", "traveller")
CSV_FIELDS = ("epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds")

#: The settings of a training run, their defaults, and what ``--resume`` restores from the run.
TRAIN_DEFAULTS = {"corpus": "timemachine", "raw": False, "model": "scratch", "cell": "rnn", "num_layers": 1,
                  "dropout": 0.0, "input_dropout": 0.0, "output_dropout": 0.0, "init": "normal",
                  "hidden": 512, "batch_size": 32, "num_steps": 35, "optimizer": "sgd", "lr": 1.0,
                  "weight_decay": 0.0, "schedule": "constant", "warmup": 0, "clip": 1.0, "epochs": 30,
                  "patience": 0, "sampling": "sequential", "max_tokens": -1, "val_fraction": 0.1, "seed": 0}

#: The GRU and LSTM train with what a practitioner would use rather than the book's SGD: Adam with
#: a warm-up and cosine decay, dropout on the inputs and before the output layer, and early
#: stopping. These replace TRAIN_DEFAULTS for ``--cell gru`` / ``--cell lstm`` where the command line
#: gives no value (bench/RESULTS.md has the runs that chose them).
#: The learning rates are the best of a sweep on the Time Machine (the GRU diverges at the LSTM's).
CELL_DEFAULTS = {
    cell: {"hidden": 256, "num_steps": 64, "optimizer": "adam", "lr": lr, "schedule": "cosine",
           "warmup": 100, "input_dropout": 0.1, "output_dropout": 0.3, "epochs": 40, "patience": 3}
    for cell, lr in (("gru", 0.02), ("lstm", 0.04))}


#: The settings of a translation run (``d2lrnn translate-train``), their defaults, and what ``--resume``
#: restores. ``pairs`` None: the bundled English-French pairs; ``num_examples`` None: all of them;
#: ``minutes`` None: no time budget. ``dropout`` acts between layers (none with one layer).
TRANSLATE_DEFAULTS = {"pairs": None, "model": "scratch", "embed_size": 256, "hidden": 256, "num_layers": 2,
                      "dropout": 0.2, "batch_size": 64, "num_steps": 10, "num_examples": None, "min_freq": 2,
                      "optimizer": "adam", "lr": 0.002, "clip": 1.0, "epochs": 30, "minutes": None,
                      "val_fraction": 0.1, "seed": 0}
TRANSLATE_CSV_FIELDS = ("epoch", "train_loss", "val_loss", "val_bleu", "tokens_per_sec", "seconds")
#: The beam width of the beam-search BLEU that ends a translation run.
REPORT_BEAM = 4


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless it is None/False or its help already says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (no usage block), exit code 2."""

    def error(self, message):
        message = message.replace("\r", "\\r").replace("\n", "\\n")  # one line, whatever was typed
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _number(text, kind):
    try:
        return kind(text)
    except ValueError:
        name = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {name}, got {text!r}") from None


def positive_int(text):
    """An integer >= 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonnegative_int(text):
    """An integer >= 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def seed_value(text):
    """A seed: an integer from 0 to 2**32 - 1."""
    value = nonnegative_int(text)
    if value > checks.MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be at most {checks.MAX_SEED}, got {value}")
    return value


def positive_float(text):
    """A finite number > 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {value:g}")
    return value


def nonnegative_float(text):
    """A finite number >= 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of 0 or more, got {value:g}")
    return value


def max_tokens(text):
    """-1 (the whole corpus) or a positive number of tokens."""
    value = _number(text, int)
    if value == 0 or value < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (the whole corpus) or at least 1, got {value}")
    return value


def fraction(text):
    """A number strictly between 0 and 1."""
    value = _number(text, float)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (e.g. 0.1), got {value:g}")
    return value


def dropout_rate(text):
    """A dropout probability: 0 (none) up to, not including, 1."""
    value = _number(text, float)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1 (e.g. 0.2), got {value:g}")
    return value


def yes_no(text):
    """``True``/``False`` as a saved run writes them (``--raw`` itself takes no value)."""
    if text in ("True", "False"):
        return text == "True"
    raise argparse.ArgumentTypeError(f"must be True or False, not {text!r}")


def folder(text):
    """A folder name (not empty)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a folder name")
    return text


def backend_choice(text):
    """The name of a backend d2lrnn knows (its framework is checked when it is switched to)."""
    name = text.strip().lower()
    if name not in available_backends():
        raise argparse.ArgumentTypeError(f"unknown backend {text!r}: choose one of "
                                         f"{', '.join(available_backends())}")
    return name


#: Settings added after runs were first saved: a run saved without them used these defaults.
ADDED_SETTINGS = ("cell", "num_layers", "dropout", "input_dropout", "output_dropout", "optimizer",
                  "weight_decay", "schedule", "warmup", "patience", "init", "raw")

#: The type of each training setting: checks the command line, and the settings a resumed run saved.
SETTING_TYPES = {"raw": yes_no, "num_layers": positive_int, "dropout": dropout_rate,
                 "input_dropout": dropout_rate,
                 "output_dropout": dropout_rate, "hidden": positive_int,
                 "batch_size": positive_int, "num_steps": positive_int, "lr": positive_float,
                 "weight_decay": nonnegative_float, "warmup": nonnegative_int, "clip": positive_float,
                 "epochs": positive_int, "patience": nonnegative_int,
                 "max_tokens": max_tokens, "val_fraction": fraction, "seed": seed_value}


def beam_width(text):
    """A beam width: a whole number >= 1 (1 is greedy search)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (1: greedy search; e.g. 4), got {value}")
    return value


def file_name(text):
    """A file name (not empty)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty: give a file name")
    return text


_SHARED_SETTINGS = ("num_layers", "dropout", "hidden", "batch_size", "num_steps", "lr", "clip", "epochs",
                    "val_fraction", "seed")
#: The type of each translation setting: checks the command line, and the settings a resumed run saved.
TRANSLATE_TYPES = {**{key: SETTING_TYPES[key] for key in _SHARED_SETTINGS},
                   "pairs": file_name, "embed_size": positive_int, "num_examples": positive_int,
                   "min_freq": positive_int, "minutes": positive_float}
TRANSLATE_CHOICES = {"model": ("scratch", "concise"), "optimizer": ("adam", "sgd")}
#: How the help shows the settings whose default is None.
_TRANSLATE_SHOWN = {"pairs": "the bundled English-French pairs", "num_examples": "all pairs",
                    "minutes": "no limit"}


def _add_train_parser(commands):
    p = commands.add_parser(
        "train", help="train a character RNN language model",
        description="Train a character-level RNN language model, compare it with n-gram baselines on "
                    "the same held-out text, and save, after every epoch, the best model so far, the "
                    "metrics, a perplexity plot and the state to resume from, in a folder of the run's own.",
        formatter_class=_HelpFormatter)
    d = TRAIN_DEFAULTS

    def setting(flag, help, **kwargs):  # default None: --resume must tell what was given explicitly
        key = flag[2:].replace("-", "_")
        per_cell = {cell: v[key] for cell, v in CELL_DEFAULTS.items() if key in v}
        shown = f"{d[key]}"
        for value in dict.fromkeys(per_cell.values()):
            shown += f"; --cell {'/'.join(c for c, v in per_cell.items() if v == value)}: {value}"
        p.add_argument(flag, default=None, type=SETTING_TYPES.get(key, str),
                       help=f"{help} (default: {shown})", **kwargs)

    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help=f"{', '.join(available_backends())} (default: $D2LRNN_BACKEND, else numpy; "
                        "with --resume, the run's)")
    setting("--corpus", f"{', '.join(CORPORA)}, or the path of a UTF-8 text file", metavar="NAME|PATH")
    p.add_argument("--raw", action="store_true", default=None,
                   help="every character of the text a token (case, punctuation, line breaks) instead of "
                        "the book's cleaning to 26 lower-case letters and space (Tiny Shakespeare: 65)")
    setting("--model", "the RNN from scratch, or the framework's own RNN layer",
            choices=("scratch", "concise"))
    setting("--cell", "the recurrent cell: plain tanh RNN, gated recurrent unit, or long short-term memory",
            choices=CELLS)
    setting("--num-layers", "recurrent layers stacked on each other", metavar="L")
    setting("--dropout", "dropout between recurrent layers while training (with --num-layers 2 or more)",
            metavar="P")
    setting("--input-dropout", "dropout of whole input characters while training", metavar="P")
    setting("--output-dropout", "dropout of the last layer's outputs before the output layer while training",
            metavar="P")
    p.add_argument("--bidirectional", action="store_true",
                   help="refused: a bidirectional model sees the character it is asked to predict (see the "
                        "bidirectional-rnn notebook)")
    setting("--init", "starting weights: the book's N(0, 0.01^2) with zero biases, or the frameworks' "
                      "U(-1/sqrt(h), 1/sqrt(h)), with the rows that input characters pick in "
                      f"U(-{TOKEN_BOUND:.3g}, {TOKEN_BOUND:.3g})", choices=INITS)
    setting("--hidden", "hidden units (per layer and direction)", metavar="N")
    setting("--batch-size", "sequences per minibatch", metavar="N")
    setting("--num-steps", "time steps per sequence", metavar="N")
    setting("--optimizer", "the book's SGD, or Adam (with decoupled weight decay)", choices=("sgd", "adam"))
    setting("--lr", "learning rate (the peak of the schedule)", metavar="RATE")
    setting("--weight-decay", "weight decay (L2 for SGD, decoupled for Adam)", metavar="WD")
    setting("--schedule", "learning rate over training after the warm-up",
            choices=("constant", "cosine", "linear"))
    setting("--warmup", "steps of linear learning-rate warm-up from 0", metavar="STEPS")
    setting("--clip", "gradient clipping: maximum global norm", metavar="NORM")
    setting("--epochs", "passes over the training text (with --resume: the new total)", metavar="N")
    setting("--patience", "stop after N epochs without a better validation perplexity (0: never)",
            metavar="N")
    setting("--sampling", "random subsequences, or sequential partitioning (state carried over)",
            choices=("random", "sequential"))
    setting("--max-tokens", "use only the first N characters of the corpus (-1: all)", metavar="N")
    setting("--val-fraction", "the last part of the text held out for validation", metavar="F")
    setting("--seed", "seed of the initial weights and the data order", metavar="S")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=folder, default=None, metavar="DIR",
                       help="output folder (default: a new runs/<corpus>-<backend>-<model>-<N>); one that "
                            "holds another run is refused unless --overwrite")
    where.add_argument("--resume", type=folder, default=None, metavar="DIR",
                       help="continue the interrupted run in DIR from its last finished epoch, with its "
                            "settings (only --epochs, --backend and --no-progress may be given)")
    p.add_argument("--overwrite", action="store_true",
                   help="let a new run replace the run in --out (its files are replaced when the first "
                        "epoch ends)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run_train)


def _add_generate_parser(commands):
    p = commands.add_parser(
        "generate", help="continue a prefix with a trained model",
        description="Load a checkpoint written by 'd2lrnn train' (on any backend) and continue a prefix: "
                    "greedy by default, sampled with --temperature.",
        formatter_class=_HelpFormatter)
    p.add_argument("--checkpoint", required=True, metavar="FILE|DIR",
                   help="a model.npz written by 'd2lrnn train', or the run folder holding it")
    p.add_argument("--prefix", default=None, metavar="TEXT",
                   help="text to continue (default: the first sample prefix of the training run, "
                        "'time traveller' for the Time Machine)")
    p.add_argument("--num-chars", type=positive_int, default=50, metavar="N", help="characters to generate")
    p.add_argument("--temperature", type=nonnegative_float, default=0.0, metavar="T",
                   help="0: greedy; above 0: sample from softmax(logits / T)")
    p.add_argument("--seed", type=seed_value, default=None, metavar="S",
                   help="seed of the sampling (default: random)")
    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help="backend to run on (default: $D2LRNN_BACKEND, else numpy)")
    p.set_defaults(run=run_generate)


def _add_translate_train_parser(commands):
    p = commands.add_parser(
        "translate-train", help="train an English-French translation model (encoder-decoder)",
        description="Train the chapter's encoder-decoder (GRU layers; the encoder's final state starts the "
                    "decoder and is its context at every step) on sentence pairs with a held-out validation "
                    "split, and save, after every epoch, the model with the best validation BLEU so far, the "
                    "metrics, a loss and BLEU plot and the state to resume from, in a folder of the run's "
                    "own. Ends with the BLEU of greedy and beam search on the validation pairs and the "
                    "book's four sentences.",
        formatter_class=_HelpFormatter)

    def setting(flag, help, **kwargs):  # default None: --resume must tell what was given explicitly
        key = flag[2:].replace("-", "_")
        shown = _TRANSLATE_SHOWN.get(key, TRANSLATE_DEFAULTS[key])
        p.add_argument(flag, default=None, type=TRANSLATE_TYPES.get(key, str),
                       help=f"{help} (default: {shown})", **kwargs)

    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help=f"{', '.join(available_backends())} (default: $D2LRNN_BACKEND, else numpy; "
                        "with --resume, the run's)")
    setting("--pairs", "a UTF-8 file of sentence pairs, one 'source<TAB>target' a line", metavar="PATH")
    setting("--model", "the GRU from scratch, or the framework's own GRU layer",
            choices=TRANSLATE_CHOICES["model"])
    setting("--embed-size", "embedding size of source and target words", metavar="N")
    setting("--hidden", "hidden units of the encoder's and decoder's GRU layers", metavar="N")
    setting("--num-layers", "GRU layers of the encoder and of the decoder", metavar="L")
    setting("--dropout", "dropout between GRU layers while training (none with --num-layers 1)", metavar="P")
    setting("--batch-size", "sentence pairs per minibatch", metavar="N")
    setting("--num-steps", "tokens per sentence: longer ones are cut, shorter ones padded", metavar="N")
    setting("--num-examples", "use only the first N pairs of the file", metavar="N")
    setting("--min-freq", "words seen fewer times in the training pairs read as <unk>", metavar="N")
    setting("--optimizer", "Adam, or the book's SGD", choices=TRANSLATE_CHOICES["optimizer"])
    setting("--lr", "learning rate", metavar="RATE")
    setting("--clip", "gradient clipping: maximum global norm", metavar="NORM")
    setting("--epochs", "passes over the training pairs (with --resume: the new total)", metavar="N")
    setting("--minutes", "stop after the epoch that crosses this much training time (with --resume: the "
                         "new total)", metavar="M")
    setting("--val-fraction", "the share of the pairs held out for validation, drawn at random", metavar="F")
    setting("--seed", "seed of the initial weights, the split and the data order", metavar="S")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=folder, default=None, metavar="DIR",
                       help="output folder (default: a new runs/translate-<backend>-<model>-<N>); one that "
                            "holds another run is refused unless --overwrite")
    where.add_argument("--resume", type=folder, default=None, metavar="DIR",
                       help="continue the interrupted run in DIR from its last finished epoch, with its "
                            "settings (only --epochs, --minutes, --backend and --no-progress may be given)")
    p.add_argument("--overwrite", action="store_true",
                   help="let a new run replace the run in --out (its files are replaced when the first "
                        "epoch ends)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run_translate_train)


def _add_translate_parser(commands):
    p = commands.add_parser(
        "translate", help="translate sentences with a trained model",
        description="Translate sentences with a model written by 'd2lrnn translate-train' (on any backend): "
                    "one translation a line, greedy by default, beam search with --beam. Words the model "
                    "has not seen read as <unk>.",
        formatter_class=_HelpFormatter)
    p.add_argument("sentences", nargs="+", metavar="SENTENCE", help="a sentence to translate, quoted: 'go .'")
    p.add_argument("--checkpoint", required=True, metavar="FILE|DIR",
                   help="a model.npz written by 'd2lrnn translate-train', or the run folder holding it")
    p.add_argument("--beam", type=beam_width, default=1, metavar="K",
                   help="beam width (1: greedy search)")
    p.add_argument("--alpha", type=nonnegative_float, default=ALPHA, metavar="A",
                   help="beam search's length normalisation: a translation of L tokens scores log P / L^A")
    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help="backend to run on (default: $D2LRNN_BACKEND, else numpy)")
    p.set_defaults(run=run_translate)


def build_parser():
    """The argument parser of ``d2lrnn`` with its ``train``, ``generate``, ``translate-train`` and
    ``translate`` commands."""
    from . import __version__

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


def corpus_name(corpus):
    """A short name for a corpus: the bundled name, or the file name without its suffix."""
    return corpus if corpus in CORPORA else pathlib.Path(corpus).stem


def sample_prefixes(corpus, vocab, val_tokens, length=10):
    """Two prefixes to continue: the book's for the Time Machine, else two from the validation text.

    They are ``length`` characters starting at the first word of the validation text and at
    a word halfway through it (any position for text without spaces).
    """
    if corpus == "timemachine":
        return TIME_MACHINE_PREFIXES
    text = "".join(vocab.to_tokens(list(val_tokens[:4000])))
    starts = [i + 1 for i, c in enumerate(text[:-length]) if c == " "] or [0, len(text) // 2]
    middle = min(starts, key=lambda i: abs(i - len(text) // 2))
    return tuple(text[i:i + length].strip() or text[:length] for i in (starts[0], middle))


def model_name(args):
    """``RNN``, ``GRU``, ``LSTM``; ``2-layer GRU`` for a deep one."""
    layers = f"{args.num_layers}-layer " if args.num_layers > 1 else ""
    return f"{layers}{args.cell.upper()}"


def _summary(args, backend, train_iter, val_iter, vocab):
    epochs = f"{args.epochs} epoch{'s' * (args.epochs != 1)}"
    rates = (("between layers", args.dropout), ("input", args.input_dropout), ("output", args.output_dropout))
    dropouts = [f"{what} {p:g}" for what, p in rates if p]
    dropout = f", dropout {', '.join(dropouts)}" if dropouts else ""
    training = f"{'Adam' if args.optimizer == 'adam' else 'SGD'} lr {args.lr:g}"
    if args.warmup:
        training += f", {args.warmup} warm-up steps"
    if args.schedule != "constant":
        training += f", {args.schedule} decay"
    if args.weight_decay:
        training += f", weight decay {args.weight_decay:g}"
    stop = f", early stop after {args.patience} epochs without improvement" if args.patience else ""
    raw = " (raw)" if args.raw else ""
    return (f"corpus {args.corpus}{raw}: {train_iter.num_tokens:,} training / {val_iter.num_tokens:,} "
            f"validation characters, vocabulary {len(vocab)} | backend {backend} | {model_name(args)} "
            f"({args.model}), {args.hidden} hidden units{dropout} | {training} | batch {args.batch_size} x "
            f"{args.num_steps} steps, {epochs}{stop}, {args.sampling} sampling")


def _defaults_note(args):
    """One line naming the per-cell defaults a new run took, and how to get the book's training back."""
    used = getattr(args, "cell_defaults", [])
    if not used:
        return None
    shown = ", ".join(f"--{k.replace('_', '-')} {getattr(args, k)}" for k in used)
    return (f"defaults for --cell {args.cell}: {shown} (the book's training: --optimizer sgd --lr 1 "
            "--schedule constant --warmup 0)")


def _best_ngram_note(baselines):
    best = min(baselines, key=baselines.get)
    return "" if best == 3 else f"; the best is the {best}-gram's {baselines[best]:.2f}"


def perplexity_table(model, train_ppl, val_ppl, baselines, name="RNN"):
    """The network's train/validation perplexity above the n-gram models' validation perplexity."""
    rows = [(f"{name} ({model})", format_perplexity(train_ppl), format_perplexity(val_ppl))]
    rows += [(f"{n}-gram (add-k)", "-", format_perplexity(ppl)) for n, ppl in sorted(baselines.items())]
    width = max(16, max(len(row[0]) for row in rows) + 2)
    lines = [f"{'perplexity':<{width}}{'train':>10}{'validation':>12}"]
    lines += [f"{label:<{width}}{train:>10}{val:>12}" for label, train, val in rows]
    trigram = baselines[3]
    verdict = "beats" if val_ppl < trigram else "does not beat"
    sign = "<" if val_ppl < trigram else ">="
    lines.append(f"the {name} {verdict} the trigram on the validation text "
                 f"({format_perplexity(val_ppl)} {sign} {format_perplexity(trigram)})")
    best = min(baselines, key=baselines.get)
    if best != 3:  # on a small text a shorter context can count better; on a big one a longer
        below = val_ppl < baselines[best]
        lines.append(f"and {'beats' if below else 'does not beat'} the best n-gram, the {best}-gram "
                     f"({format_perplexity(val_ppl)} {'<' if below else '>='} "
                     f"{format_perplexity(baselines[best])})")
    return "\n".join(lines)


def metrics_csv_writer(history, fields=CSV_FIELDS):
    """A writer of the per-epoch history as CSV, one column per field of ``fields`` (the language
    model's: ``epoch,train_ppl,val_ppl,tokens_per_sec,seconds``)."""
    rows = list(zip(*(history[k] for k in fields)))

    def write(f):
        writer = csv.writer(f)
        writer.writerow(fields)
        writer.writerows(rows)

    return write


def perplexity_plot_writer(history, baselines, title="", best_epoch=None):
    """A writer of a PNG of train and validation perplexity per epoch, with the bigram and trigram
    as dashed lines and the best epoch (the one ``model.npz`` holds) marked."""
    epochs, train, val = list(history["epoch"]), list(history["train_ppl"]), list(history["val_ppl"])

    def write(f):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        fig = Figure(figsize=(6, 4), dpi=100)
        FigureCanvasAgg(fig)  # rendered off-screen: no display needed
        ax = fig.add_subplot()
        ax.plot(epochs, train, "-o", markersize=3, label="RNN train")
        ax.plot(epochs, val, "-s", markersize=3, label="RNN validation")
        for n, style in ((2, "tab:gray"), (3, "tab:red")):
            ax.axhline(baselines[n], linestyle="--", color=style, label=f"{n}-gram validation")
        if best_epoch in epochs:
            ax.plot([best_epoch], [val[epochs.index(best_epoch)]], "*", color="black", markersize=10,
                    label=f"best (epoch {best_epoch})")
        ax.set(xlabel="epoch", ylabel="perplexity", title=title)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        with quiet_numerics():  # a diverged epoch's inf is simply not drawn
            fig.savefig(f, format="png")

    return write


def _corpus_digest(train_iter, val_iter, chunk=1 << 20, int64=False):
    """A fingerprint of the token stream: a resumed run must read the same text.

    The SHA-1 of the indices as stored (one byte per character), after their type's name. With
    ``int64=True``, the SHA-1 of the indices as int64, computed a chunk at a time: what runs saved
    before the stream was stored compactly hold (8 times the bytes to hash).
    """
    digest = hashlib.sha1()
    if not int64:
        digest.update(f"{train_iter.corpus.dtype.str}:".encode())
    for tokens in (train_iter.corpus, val_iter.corpus):
        for start in range(0, len(tokens), chunk):
            piece = tokens[start:start + chunk]
            digest.update(piece.astype(np.int64).tobytes() if int64 else piece.tobytes())
    return digest.hexdigest()


def _hparams(args, backend, prefixes, baselines, digest):
    hparams = {key: getattr(args, key) for key in TRAIN_DEFAULTS}
    if args.corpus not in CORPORA:
        hparams["corpus_path"] = str(corpus_path(args.corpus).resolve())
    hparams.update(backend=backend, token="char", prefixes=list(prefixes), corpus_sha1=digest,
                   ngram_val_ppl={str(n): ppl for n, ppl in baselines.items()})
    return hparams


class EpochSaver:
    """``on_epoch`` of :func:`train_ch8` for the command line: after every epoch, one set of files.

    ``model.npz`` when the validation perplexity is the best so far, and always ``metrics.csv``,
    ``perplexity.png`` and ``last.npz`` (the parameters, history and random-generator states to
    resume from), written together by :meth:`RunFolder.write`.
    """

    def __init__(self, folder, vocab, hparams, baselines, title, train_iter, history=None, updater=None):
        self.folder, self.vocab, self.hparams, self.updater = folder, vocab, hparams, updater
        self.baselines, self.title, self.train_iter = baselines, title, train_iter
        self.best = _best_epoch(history) if history else None  # (epoch, validation perplexity) of model.npz
        self.saved = history["epoch"][-1] if history else None  # the last epoch on disk

    def __call__(self, epoch, net, history):
        val_ppl = history["val_ppl"][-1]
        files = {}
        best = self.best
        if best is None or val_ppl < best[1]:
            best = (epoch, val_ppl)
            files["model.npz"] = (checkpoint_writer(net, self.vocab, self.hparams, history), "wb")
        files["metrics.csv"] = (metrics_csv_writer(history), "w")
        files["perplexity.png"] = (perplexity_plot_writer(history, self.baselines, self.title, best[0]), "wb")
        resume, opt_state = _run_state(epoch, self.train_iter, self.updater)
        last = checkpoint_writer(net, self.vocab, self.hparams, history, resume, opt_state)
        files["last.npz"] = (last, "wb")
        self.folder.write(files)
        self.best, self.saved = best, epoch

    def where(self):
        """What is on disk, for a message after a failure."""
        if self.best is None:
            return "no epoch finished, so nothing was saved"
        return (f"the best model of this run (epoch {self.best[0]}, validation perplexity "
                f"{format_perplexity(self.best[1])}) is in {self.folder / 'model.npz'}")


def _run_state(epoch, train_iter, updater):
    """What ``last.npz`` keeps to resume after ``epoch``: the random generators' states (the shared one
    and the loader's), and the optimizer's state (None for SGD, which keeps nothing)."""
    resume = {"epoch": epoch, "generator": generator_state(), "loader_generator": train_iter.rng_state()}
    opt_state = updater.state_dict() if updater is not None else None
    if opt_state is not None and not opt_state["arrays"]:
        opt_state = None
    return resume, opt_state


def _best_epoch(history):
    """(epoch, validation perplexity) of the first epoch with the lowest validation perplexity so far,
    by the rule :class:`EpochSaver` saves by; None for an empty history."""
    best = None
    for epoch, val_ppl in zip(history["epoch"], history["val_ppl"]):
        if best is None or val_ppl < best[1]:
            best = (epoch, val_ppl)
    return best


def _report(args, folder, baselines, prefixes, epochs_done):
    """Print the best epoch's perplexities against the baselines, and samples from the saved best model."""
    net, vocab, info = load_checkpoint(folder / "model.npz")
    history = info["history"]
    print()
    print(perplexity_table(args.model, history["train_ppl"][-1], history["val_ppl"][-1], baselines,
                           model_name(args)))
    print(f"model.npz holds epoch {history['epoch'][-1]} of {epochs_done}, the one with the best validation "
          "perplexity")
    print(f"\nsamples (greedy, {SAMPLE_CHARS} characters):")
    for prefix in prefixes:
        print(f"  {predict_ch8(prefix, SAMPLE_CHARS, net, vocab)}")


def _num_params(vocab_size, args):
    """How many numbers the model's parameters hold (before it is built)."""
    G, h, L = {"rnn": 1, "gru": 3, "lstm": 4}.get(args.cell, 4), args.hidden, args.num_layers
    layers = G * ((vocab_size + h + 1) * h + (L - 1) * (2 * h + 1) * h)
    return layers + vocab_size * h + vocab_size


def _check_memory(vocab_size, args):
    """Refuse a model whose parameters alone would not fit in this machine's memory."""
    _refuse_too_large(_num_params(vocab_size, args), f"--hidden {args.hidden}", "--hidden")


def _refuse_too_large(num_params, given, fix):
    """Refuse a model of ``num_params`` numbers if they, their gradients and updates would not fit in this
    machine's memory; ``given`` names the settings that make it so, ``fix`` the ones to lower."""
    need = 4 * num_params * 4  # float32: params, grads, updates, slack
    try:
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return
    if need > have:
        raise D2LRNNError(f"{given} needs about {need / 2**30:.0f} GB for the model's "
                          f"parameters and their gradients, more than this machine's {have / 2**30:.0f} GB: "
                          f"use a smaller {fix}")


def _resume_state(args, folder, train_iter, val_iter, vocab, digest):
    """The model and history of the run in ``folder``, with its random generators put back."""
    net, saved_vocab, info = load_checkpoint(folder / "last.npz")
    saved = info["hparams"].get("corpus_sha1")
    if saved_vocab != vocab or saved not in (digest, _corpus_digest(train_iter, val_iter, int64=True)):
        raise DataError(f"the corpus {args.corpus} is not the text the run in {folder.path} was trained on "
                        "(it changed since): resume needs the same text; start a new run instead")
    resume, history = info["resume"], info["history"]
    try:
        set_generator_state(resume["generator"])
        train_iter.set_rng_state(resume["loader_generator"])
        if history["epoch"][-1] != resume["epoch"]:
            raise ValueError("history and epoch disagree")
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise CheckpointError(f"{folder / 'last.npz'} holds a damaged resume state ({err}): start a new "
                              "run") from None
    return net, history


def run_stem(args, backend):
    """The run folder's name before its number: ``timemachine-numpy-scratch`` for the plain one-layer
    RNN (as before cells), ``timemachine-numpy-scratch-gru``, ``...-scratch-lstm-l2`` otherwise."""
    parts = [corpus_name(args.corpus), backend, args.model]
    if args.cell != "rnn" or args.num_layers > 1:
        parts.append(args.cell + (f"-l{args.num_layers}" if args.num_layers > 1 else ""))
    return "-".join(parts)


def _train_here(args, backend, start):
    """``d2lrnn train`` on the already active backend."""
    ops.manual_seed(args.seed)
    train_iter, val_iter, vocab = load_data_lm(args.corpus, args.batch_size, args.num_steps,
                                               args.sampling == "random", args.max_tokens,
                                               args.val_fraction, seed=args.seed, raw=args.raw)
    _check_memory(len(vocab), args)
    if "warmup" in getattr(args, "cell_defaults", []):  # the cell's default: at most a tenth of a short run
        args.warmup = min(args.warmup, args.epochs * len(train_iter) // 10)
    digest = _corpus_digest(train_iter, val_iter)
    stem = run_stem(args, backend)
    resume = args.resume is not None
    with open_run_folder(args.resume or args.out, "runs", stem, args.overwrite, resume) as out:
        print(_summary(args, backend, train_iter, val_iter, vocab))
        note = _defaults_note(args)
        if note and not resume:
            print(note)
        print(f"output folder {out.path}", flush=True)
        fit, held, note = baseline_sample(train_iter.corpus, val_iter.corpus)
        baselines = ngram_perplexities(fit, held, len(vocab), ns=NGRAM_ORDERS)
        print("n-gram validation perplexity: " + ", ".join(f"{n}-gram {p:.2f}" for n, p in baselines.items())
              + f" (the trigram's {baselines[3]:.2f} is the one to beat{_best_ngram_note(baselines)})"
              + (f"; a sample of the large text: {note}" if note else ""), flush=True)
        prefixes = sample_prefixes(args.corpus, vocab, val_iter.corpus)
        if resume:
            net, history = _resume_state(args, out, train_iter, val_iter, vocab, digest)
            print(f"resuming after epoch {history['epoch'][-1]} of {args.epochs}", flush=True)
        else:
            net = make_model(args.model, len(vocab), args.hidden, cell=args.cell, num_layers=args.num_layers,
                             dropout=args.dropout, input_dropout=args.input_dropout,
                             output_dropout=args.output_dropout, init=args.init)
            history = None
        updater = _updater(args, net, len(train_iter))
        if resume:
            saved = load_optimizer_state(out / "last.npz")
            if saved is not None:
                updater.load_state_dict(saved)
            elif args.optimizer != "sgd":
                raise CheckpointError(f"{out / 'last.npz'} holds no {args.optimizer} state to continue: "
                                      "start a new run")
            else:
                updater.t = history["epoch"][-1] * len(train_iter)  # SGD's only state: the schedule's step
        hparams = _hparams(args, backend, prefixes, baselines, digest)
        title = f"{corpus_name(args.corpus)}, {backend}, {model_name(args)} ({args.model})"
        saver = EpochSaver(out, vocab, hparams, baselines, title, train_iter, history, updater)
        try:
            history = train_ch8(net, train_iter, vocab, args.lr, args.epochs, None, args.sampling == "random",
                                clip=args.clip, val_iter=val_iter, progress=not args.no_progress, plot=False,
                                verbose=False, history=history, on_epoch=saver, updater=updater,
                                patience=args.patience or None)
        except TrainingError as err:
            raise TrainingError(f"{err.cause}; {saver.where()}", err.epoch, err.step) from None
        except KeyboardInterrupt:
            raise _interrupted(saver, out, "d2lrnn train") from None
        if history["epoch"][-1] < args.epochs:
            print(f"stopped early after epoch {history['epoch'][-1]} of {args.epochs}: the validation "
                  f"perplexity did not improve for {args.patience} epochs")
        _report(args, out, baselines, prefixes, history["epoch"][-1])
        print(f"\nwall time {_duration(time.perf_counter() - start)}")
        for what, name in (("checkpoint", "model.npz"), ("metrics", "metrics.csv"),
                           ("plot", "perplexity.png"), ("resume", "last.npz")):
            print(f"{what:<11} {out / name}")
    return 0


def _interrupted(saver, out, command):
    """The KeyboardInterrupt to leave with after Ctrl-C: what is saved, and how to continue."""
    if saver.saved is None:
        return KeyboardInterrupt("interrupted before the first epoch finished; nothing was saved")
    return KeyboardInterrupt(f"interrupted; epochs 1-{saver.saved} are saved in {out.path}: continue "
                             f"with: {command} --resume {out.path}")


def _updater(args, net, steps_per_epoch):
    """The optimizer, schedule and clipping of a run, as one :class:`d2lrnn.train.Updater`."""
    optimizer = get_optimizer(args.optimizer, args.lr, args.weight_decay)
    total = args.epochs * steps_per_epoch
    schedule = None
    if args.schedule != "constant" or args.warmup:
        if args.warmup >= total:
            raise D2LRNNError(f"--warmup {args.warmup} is not shorter than the run's {total} steps "
                              f"({args.epochs} epochs of {steps_per_epoch}): use a smaller --warmup")
        schedule = Schedule(args.lr, total, args.warmup, args.schedule)
    return Updater(net, optimizer, args.clip, schedule=schedule)


def _duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def _fill_settings(args):
    """A new run: every setting not given takes its default (the cell's own, where it has one).
    Returns the names of the cell's defaults that were used, for the summary."""
    cell = args.cell or TRAIN_DEFAULTS["cell"]
    used = []
    for key, value in TRAIN_DEFAULTS.items():
        if getattr(args, key) is None:
            if key in CELL_DEFAULTS.get(cell, {}):
                value = CELL_DEFAULTS[cell][key]
                used.append(key)
            setattr(args, key, value)
    args.cell_defaults = used


def _resume_settings(args):
    """``--resume DIR``: the run's own settings (``--epochs`` may raise the total); returns its backend."""
    path, last = _resume_folder(args, "lm")
    info = checkpoint_info(last)
    saved, resume = info["hparams"], info["resume"]
    if not isinstance(resume, dict) or not isinstance(resume.get("epoch"), int):
        raise CheckpointError(f"{last} holds no resume state: it is not a run's last.npz")
    for key in TRAIN_DEFAULTS:
        value = saved.get(key, TRAIN_DEFAULTS[key] if key in ADDED_SETTINGS else None)
        check = SETTING_TYPES.get(key)
        try:
            value = check(str(value)) if check else value
        except argparse.ArgumentTypeError as err:
            raise CheckpointError(f"{last} is corrupt: its setting {key} {err}: start a new run") from None
        given = getattr(args, key)
        if key != "epochs" and given is not None and given != value:
            flag = "--" + key.replace("_", "-")
            raise D2LRNNError(f"--resume continues the run with its own settings: drop {flag} "
                              f"(the run used {value})")
        if given is None:
            setattr(args, key, value)
    if args.corpus not in CORPORA and saved.get("corpus_path"):
        args.corpus = saved["corpus_path"]  # the run may have been started from another folder
    if resume["epoch"] >= args.epochs:
        raise D2LRNNError(f"the run in {path} has already finished {resume['epoch']} of {args.epochs} "
                          f"epochs: pass --epochs N with N > {resume['epoch']} to train it further")
    return saved.get("backend")


#: Per kind of run: the command that writes and resumes it, an example of its folder's name, what it is.
_RUN_KINDS = {"lm": ("d2lrnn train", "runs/timemachine-numpy-scratch-1", "a language model"),
              "seq2seq": ("d2lrnn translate-train", "runs/translate-numpy-scratch-1", "a translation")}


def _resume_folder(args, kind):
    """The folder ``--resume`` names and its ``last.npz``, checked to hold a run of ``kind`` ('lm' or
    'seq2seq'); one line naming the right command otherwise."""
    command, example, _ = _RUN_KINDS[kind]
    path = pathlib.Path(args.resume)
    if args.overwrite:
        raise D2LRNNError("--resume continues a run and --overwrite replaces one: give only one of them")
    if not path.is_dir():
        raise RunFolderError(f"--resume {path}: no such run folder: pass the folder a run wrote, "
                             f"e.g. {example}")
    last = path / "last.npz"
    if not last.is_file():
        raise RunFolderError(f"{path} holds no state to resume from (no last.npz): pass a folder that "
                             f"'{command}' wrote")
    found = checkpoint_kind(last)
    if found != kind:
        other, _, what = _RUN_KINDS[found]
        raise RunFolderError(f"{path} holds {what} run: continue it with {other} --resume {path}")
    return path, last


def run_train(args):
    """``d2lrnn train``: the backend is switched to first, before any tensor is made."""
    start = time.perf_counter()
    if args.bidirectional:
        raise D2LRNNError(f"--bidirectional: {SEES_THE_FUTURE}; 'd2lrnn train' trains language models, so "
                          "drop --bidirectional (the bidirectional-rnn notebook shows where it helps)")
    saved_backend = _resume_settings(args) if args.resume else _fill_settings(args)
    if args.dropout and args.num_layers == 1:
        raise D2LRNNError(f"--dropout {args.dropout:g} acts between recurrent layers, and one layer has "
                          "none: add --num-layers 2 (or more), or drop --dropout")
    corpus_path(args.corpus)  # an unknown corpus fails before a framework is imported
    with use_backend(args.backend or saved_backend or backend_name()) as module:
        return _train_here(args, module.__name__.rsplit(".", 1)[-1], start)


def _checkpoint_path(text):
    """The checkpoint file ``--checkpoint`` names: the file itself, or a run folder's best model."""
    path = pathlib.Path(text)
    if path.is_dir() and (path / "model.npz").is_file():
        path = path / "model.npz"
    return path


def run_generate(args):
    """``d2lrnn generate``: load a checkpoint on the chosen backend and print the continuation."""
    if args.prefix is not None and not args.prefix:
        raise D2LRNNError("--prefix is empty: give some text to continue, e.g. --prefix 'time traveller'")
    path = _checkpoint_path(args.checkpoint)
    with use_backend(args.backend or backend_name()):
        net, vocab, info = load_checkpoint(path)
        prefix = args.prefix
        if prefix is None:
            prefix = ((info.get("hparams") or {}).get("prefixes") or TIME_MACHINE_PREFIXES)[0]
        print(predict_ch8(str(prefix), args.num_chars, net, vocab, temperature=args.temperature,
                          seed=args.seed))
    return 0


# -- translation ------------------------------------------------------------------------------------

#: The plot of a translation run (the language model's is perplexity.png).
LOSS_PLOT = "loss.png"


def pairs_name(pairs):
    """A short name for the pairs: the bundled file's, or the file name without its suffix."""
    return f"{PAIRS_FILE.stem} (bundled)" if pairs is None else pathlib.Path(pairs).stem


def translation_model_name(args):
    """``2-layer GRU encoder-decoder``."""
    layers = f"{args.num_layers}-layer " if args.num_layers > 1 else ""
    return f"{layers}GRU encoder-decoder"


def _translate_summary(args, backend, train_iter, val_iter, src_vocab, tgt_vocab):
    epochs = f"{args.epochs} epoch{'s' * (args.epochs != 1)}"
    budget = f", at most {args.minutes:g} minutes" if args.minutes else ""
    dropout = f", dropout {args.dropout:g}" if args.dropout else ""
    optimizer = "Adam" if args.optimizer == "adam" else "SGD"
    return (f"pairs {pairs_name(args.pairs)}: {train_iter.num_pairs:,} training / {val_iter.num_pairs:,} "
            f"validation pairs, vocabularies {len(src_vocab):,} source / {len(tgt_vocab):,} target words | "
            f"backend {backend} | {translation_model_name(args)} ({args.model}), embedding "
            f"{args.embed_size}, {args.hidden} hidden units{dropout} | {optimizer} lr {args.lr:g}, clip "
            f"{args.clip:g} | batch {args.batch_size} x {args.num_steps} steps, {epochs}{budget}")


def _pairs_digest(train_iter, val_iter):
    """A fingerprint of the split's index arrays: a resumed run must read the same pairs."""
    digest = hashlib.sha1()
    for array in (*train_iter.arrays, *val_iter.arrays):
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    return digest.hexdigest()


def _translate_hparams(args, backend, digest):
    hparams = {key: getattr(args, key) for key in TRANSLATE_DEFAULTS}
    if args.pairs is not None:
        hparams["pairs"] = str(pathlib.Path(args.pairs).resolve())
    hparams.update(backend=backend, token="word", pairs_sha1=digest)
    return hparams


def translation_plot_writer(history, title="", best_epoch=None):
    """A writer of a PNG of the training and validation loss per token (left) and the validation BLEU-4
    (right) per epoch, with the best epoch (the one ``model.npz`` holds) marked."""
    epochs = list(history["epoch"])
    train, val = list(history["train_loss"]), list(history["val_loss"])
    bleu = [math.nan if b is None else b for b in history["val_bleu"]]

    def write(f):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        fig = Figure(figsize=(9, 3.6), dpi=100)
        FigureCanvasAgg(fig)  # rendered off-screen: no display needed
        losses, scores = fig.subplots(1, 2)
        losses.plot(epochs, train, "-o", markersize=3, label="train")
        losses.plot(epochs, val, "-s", markersize=3, label="validation")
        losses.set(xlabel="epoch", ylabel="loss per target token")
        scores.plot(epochs, bleu, "-^", markersize=3, color="tab:green", label="validation (greedy)")
        if best_epoch in epochs:
            scores.plot([best_epoch], [bleu[epochs.index(best_epoch)]], "*", color="black", markersize=10,
                        label=f"best (epoch {best_epoch})")
        scores.set(xlabel="epoch", ylabel="BLEU-4")
        for ax in (losses, scores):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(True, alpha=0.3)
            ax.legend()
        fig.suptitle(title)
        fig.tight_layout()
        with quiet_numerics():  # a diverged epoch's inf is simply not drawn
            fig.savefig(f, format="png")

    return write


class TranslationSaver:
    """``on_epoch`` of :func:`~d2lrnn.seq2seq.train_seq2seq` for ``d2lrnn translate-train``: after every
    epoch, one set of files: ``model.npz`` when the validation BLEU is the best so far (on a tie, when
    the validation loss is lower: early on, or on short sentences, BLEU-4 is often 0 for several
    epochs), and always ``metrics.csv``, ``loss.png`` and ``last.npz`` (parameters, history, Adam's state
    and the random generators' states to resume from)."""

    def __init__(self, folder, src_vocab, tgt_vocab, num_steps, hparams, title, train_iter, history=None,
                 updater=None):
        self.folder, self.src_vocab, self.tgt_vocab, self.num_steps = folder, src_vocab, tgt_vocab, num_steps
        self.hparams, self.title, self.train_iter, self.updater = hparams, title, train_iter, updater
        self.best = _best_bleu_epoch(history) if history else None  # (epoch, BLEU, loss) of model.npz
        self.saved = history["epoch"][-1] if history else None  # the last epoch on disk

    def _writer(self, net, history, resume=None, opt_state=None):
        return seq2seq_checkpoint_writer(net, self.src_vocab, self.tgt_vocab, self.num_steps, self.hparams,
                                         history, resume, opt_state)

    def __call__(self, epoch, net, history):
        files, best = {}, self.best
        if _better_bleu(history["val_bleu"][-1], history["val_loss"][-1], best):
            best = (epoch, history["val_bleu"][-1], history["val_loss"][-1])
            files["model.npz"] = (self._writer(net, history), "wb")
        files["metrics.csv"] = (metrics_csv_writer(history, TRANSLATE_CSV_FIELDS), "w")
        files[LOSS_PLOT] = (translation_plot_writer(history, self.title, best[0]), "wb")
        resume, opt_state = _run_state(epoch, self.train_iter, self.updater)
        files["last.npz"] = (self._writer(net, history, resume, opt_state), "wb")
        self.folder.write(files)
        self.best, self.saved = best, epoch

    def where(self):
        """What is on disk, for a message after a failure."""
        if self.best is None:
            return "no epoch finished, so nothing was saved"
        return (f"the best model of this run (epoch {self.best[0]}, validation BLEU-4 {self.best[1]:.3f}) is "
                f"in {self.folder / 'model.npz'}")


def _better_bleu(val_bleu, val_loss, best):
    """Whether an epoch's validation BLEU and loss beat ``best`` ((epoch, BLEU, loss) or None): a higher
    BLEU, or the same BLEU and a lower loss."""
    return best is None or val_bleu > best[1] or (val_bleu == best[1] and val_loss < best[2])


def _best_bleu_epoch(history):
    """(epoch, validation BLEU, validation loss) of the epoch :class:`TranslationSaver` keeps as the best;
    None for an empty history."""
    best = None
    for epoch, val_bleu, val_loss in zip(history["epoch"], history["val_bleu"], history["val_loss"]):
        if _better_bleu(val_bleu, val_loss, best):
            best = (epoch, val_bleu, val_loss)
    return best


def translation_table(name, epoch, epochs_done, train_loss, val_loss, greedy, beam, beam_size=REPORT_BEAM):
    """The best epoch's loss per target token (train, validation) and validation BLEU-4 (greedy, beam)."""
    rows = [("loss per target token", f"{train_loss:.3f}", f"{val_loss:.3f}"),
            ("BLEU-4, greedy", "-", f"{greedy:.3f}"),
            (f"BLEU-4, beam search (k={beam_size})", "-", f"{beam:.3f}")]
    header = f"{name}, epoch {epoch} of {epochs_done}"
    width = max(len(header), *(len(row[0]) for row in rows)) + 2
    lines = [f"{header:<{width}}{'train':>8}{'validation':>12}"]
    lines += [f"{label:<{width}}{train:>8}{val:>12}" for label, train, val in rows]
    return "\n".join(lines)


def _translate_report(args, folder, val_iter, epochs_done):
    """Print the best epoch's losses and validation BLEU (greedy and beam search, from the saved best
    model), and its translations of the book's four sentences."""
    net, src_vocab, tgt_vocab, info = load_seq2seq_checkpoint(folder / "model.npz")
    history = info["history"]
    greedy = evaluate_bleu(net, val_iter, tgt_vocab)
    beam = evaluate_bleu(net, val_iter, tgt_vocab, beam_size=REPORT_BEAM)
    print()
    name = f"{translation_model_name(args)} ({args.model})"
    print(translation_table(name, history["epoch"][-1], epochs_done, history["train_loss"][-1],
                            history["val_loss"][-1], greedy, beam))
    print(f"model.npz holds epoch {history['epoch'][-1]}: the best validation BLEU-4 (greedy, "
          f"{val_iter.num_pairs:,} pairs; on a tie, the lowest validation loss)")
    mean, preds = book_bleu(net, src_vocab, tgt_vocab, args.num_steps)
    print(f"\nthe book's sentences (greedy; BLEU with k=2 and the book's weights, mean {mean:.3f}):")
    for source, target, pred in zip(*book_sentences(), preds):
        print(f"  {source} => {pred} (BLEU {bleu(pred, target, k=2):.3f}; the book's: {target})")


def _check_translation_memory(args, src_vocab, tgt_vocab):
    """Refuse a model whose parameters alone would not fit in this machine's memory."""
    shapes = parameter_shapes({"cell": "gru", "src_vocab_size": len(src_vocab),
                               "tgt_vocab_size": len(tgt_vocab), "embed_size": args.embed_size,
                               "num_hiddens": args.hidden, "num_layers": args.num_layers,
                               "dropout": args.dropout, "reset_after": True})
    _refuse_too_large(sum(math.prod(shape) for shape in shapes.values()),
                      f"--hidden {args.hidden} with --embed-size {args.embed_size}",
                      "--hidden or --embed-size")


def _translate_resume_state(args, folder, train_iter, src_vocab, tgt_vocab, digest):
    """The model and history of the translation run in ``folder``, with its random generators put back."""
    last = folder / "last.npz"
    net, saved_src, saved_tgt, info = load_seq2seq_checkpoint(last)
    if saved_src != src_vocab or saved_tgt != tgt_vocab or info["hparams"].get("pairs_sha1") != digest:
        raise DataError(f"the pairs {args.pairs or pairs_name(None)} are not the pairs the run in "
                        f"{folder.path} was trained on (they changed since): resume needs the same pairs; "
                        "start a new run instead")
    resume, history = info["resume"], info["history"]
    try:
        set_generator_state(resume["generator"])
        train_iter.set_rng_state(resume["loader_generator"])
        if any(len(history[key]) != len(history["epoch"]) for key in TRANSLATE_CSV_FIELDS) or \
                history["epoch"][-1] != resume["epoch"]:
            raise ValueError("history and epoch disagree")
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise CheckpointError(f"{last} holds a damaged resume state ({err}): start a new run") from None
    return net, history


def _translate_here(args, backend, start, data):
    """``d2lrnn translate-train`` on the already active backend, with the pairs already read."""
    train_iter, val_iter, src_vocab, tgt_vocab = data
    _check_translation_memory(args, src_vocab, tgt_vocab)
    ops.manual_seed(args.seed)
    digest = _pairs_digest(train_iter, val_iter)
    resume = args.resume is not None
    with open_run_folder(args.resume or args.out, "runs", f"translate-{backend}-{args.model}", args.overwrite,
                         resume) as out:
        print(_translate_summary(args, backend, train_iter, val_iter, src_vocab, tgt_vocab))
        print(f"output folder {out.path}", flush=True)
        if resume:
            net, history = _translate_resume_state(args, out, train_iter, src_vocab, tgt_vocab, digest)
            print(f"resuming after epoch {history['epoch'][-1]} of {args.epochs}", flush=True)
        else:
            net = make_seq2seq(len(src_vocab), len(tgt_vocab), args.embed_size, args.hidden, args.num_layers,
                               args.dropout, rnn=args.model)
            history = None
        updater = make_seq2seq_updater(net, tgt_vocab, args.lr, args.clip, args.optimizer)
        if resume:
            saved = load_optimizer_state(out / "last.npz")
            if saved is not None:
                updater.load_state_dict(saved)
            elif args.optimizer != "sgd":
                raise CheckpointError(f"{out / 'last.npz'} holds no {args.optimizer} state to continue: "
                                      "start a new run")
            else:
                updater.t = history["epoch"][-1] * len(train_iter)
        title = f"{pairs_name(args.pairs)}, {backend}, {translation_model_name(args)} ({args.model})"
        hparams = _translate_hparams(args, backend, digest)
        saver = TranslationSaver(out, src_vocab, tgt_vocab, args.num_steps, hparams, title, train_iter,
                                 history, updater)
        try:
            history = train_seq2seq(net, train_iter, args.lr, args.epochs, tgt_vocab, clip=args.clip,
                                    val_iter=val_iter, progress=not args.no_progress, plot=False,
                                    verbose=False, history=history, on_epoch=saver, updater=updater,
                                    time_budget=args.minutes * 60 if args.minutes else None)
        except TrainingError as err:
            raise TrainingError(f"{err.cause}; {saver.where()}", err.epoch, err.step) from None
        except KeyboardInterrupt:
            raise _interrupted(saver, out, "d2lrnn translate-train") from None
        if history["epoch"][-1] < args.epochs:
            print(f"stopped after epoch {history['epoch'][-1]} of {args.epochs}: the {args.minutes:g} "
                  "minutes of --minutes are used")
        _translate_report(args, out, val_iter, history["epoch"][-1])
        print(f"\nwall time {_duration(time.perf_counter() - start)}")
        for what, name in (("checkpoint", "model.npz"), ("metrics", "metrics.csv"), ("plot", LOSS_PLOT),
                           ("resume", "last.npz")):
            print(f"{what:<11} {out / name}")
    return 0


def _fill_translate_settings(args):
    """A new translation run: every setting not given takes its default (dropout: none with one layer)."""
    if args.dropout and args.num_layers == 1:
        raise D2LRNNError(f"--dropout {args.dropout:g} acts between GRU layers, and one layer has none: add "
                          "--num-layers 2 (or more), or drop --dropout")
    for key, value in TRANSLATE_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.num_layers == 1:
        args.dropout = 0.0


def _saved_translate_setting(last, key, value):
    """A setting a translation run saved, checked as the command line checks it."""
    if value is None and TRANSLATE_DEFAULTS[key] is None:
        return None
    try:
        if key in TRANSLATE_CHOICES:
            if value not in TRANSLATE_CHOICES[key]:
                choices = ", ".join(TRANSLATE_CHOICES[key])
                raise argparse.ArgumentTypeError(f"is {value!r}, not one of {choices}")
            return value
        return TRANSLATE_TYPES[key](str(value))
    except argparse.ArgumentTypeError as err:
        raise CheckpointError(f"{last} is corrupt: its setting {key} {err}: start a new run") from None


def _translate_resume_settings(args):
    """``--resume DIR`` of a translation run: its own settings (``--epochs`` and ``--minutes`` may raise
    the totals); returns its backend."""
    path, last = _resume_folder(args, "seq2seq")
    info = seq2seq_checkpoint_info(last)
    saved, resume = info["hparams"], info["resume"]
    if not isinstance(resume, dict) or not isinstance(resume.get("epoch"), int):
        raise CheckpointError(f"{last} holds no resume state: it is not a run's last.npz")
    for key in TRANSLATE_DEFAULTS:
        value = _saved_translate_setting(last, key, saved.get(key))
        given = getattr(args, key)
        if key == "pairs" and given is not None:
            given = str(pathlib.Path(given).resolve())
        if key not in ("epochs", "minutes") and given is not None and given != value:
            flag = "--" + key.replace("_", "-")
            raise D2LRNNError(f"--resume continues the run with its own settings: drop {flag} "
                              f"(the run used {value})")
        if getattr(args, key) is None:
            setattr(args, key, value)
    if resume["epoch"] >= args.epochs:
        raise D2LRNNError(f"the run in {path} has already finished {resume['epoch']} of {args.epochs} "
                          f"epochs: pass --epochs N with N > {resume['epoch']} to train it further")
    seconds = (info["history"].get("seconds") or [0.0])[-1]
    if args.minutes and isinstance(seconds, (int, float)) and seconds >= args.minutes * 60:
        raise D2LRNNError(f"the run in {path} has already trained {seconds / 60:.3g} of its {args.minutes:g} "
                          f"minutes: pass --minutes M with M > {seconds / 60:.3g} to train it further")
    return saved.get("backend")


def _check_pairs_file(pairs):
    """A ``--pairs`` file that is missing or a folder is refused before anything else."""
    if pairs is not None and not pathlib.Path(pairs).is_file():
        what = "is a folder" if pathlib.Path(pairs).is_dir() else "does not exist"
        raise DataError(f"pairs file '{pairs}' {what}: pass a text file of 'source<TAB>target' lines, or "
                        "leave out --pairs for the bundled English-French pairs")


def run_translate_train(args):
    """``d2lrnn translate-train``: the pairs are read (NumPy only, so bad pairs fail before a framework is
    imported), then the backend is switched to, before any tensor is made."""
    start = time.perf_counter()
    saved_backend = _translate_resume_settings(args) if args.resume else _fill_translate_settings(args)
    _check_pairs_file(args.pairs)
    try:
        data = load_data_nmt_split(args.batch_size, args.num_steps, args.num_examples, args.val_fraction,
                                   args.min_freq, args.seed, args.pairs)
    except DataError as err:  # name the file the problem is in, if the message does not
        if args.pairs is None or str(args.pairs) in str(err):
            raise
        raise DataError(f"--pairs {args.pairs}: {err}") from None
    with use_backend(args.backend or saved_backend or backend_name()) as module:
        return _translate_here(args, module.__name__.rsplit(".", 1)[-1], start, data)


def run_translate(args):
    """``d2lrnn translate``: one translation a line, with a model loaded on the chosen backend."""
    for number, sentence in enumerate(args.sentences, 1):
        if not sentence.strip():
            which = f"sentence {number}" if len(args.sentences) > 1 else "the sentence"
            raise D2LRNNError(f"{which} to translate is empty: give at least one word, e.g. d2lrnn translate "
                              "'go .' --checkpoint FILE")
    path = _checkpoint_path(args.checkpoint)
    with use_backend(args.backend or backend_name()):
        net, src_vocab, tgt_vocab, info = load_seq2seq_checkpoint(path)
        lines = translate(net, args.sentences, src_vocab, tgt_vocab, info["num_steps"], args.beam, args.alpha)
    for line in lines:
        print(line)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
