"""``d2lrnn train`` and ``d2lrnn generate``: a character RNN language model trained against n-gram
baselines, saved after every epoch in a run folder of its own, and text generated with it."""

import pathlib
import types

from .. import ops
from ..checks import MAX_EPOCHS
from ..data import CORPORA, VAL_STREAMS, baseline_sample, corpus_path, load_data_lm, ngram_perplexities
from ..errors import D2LRNNError, DataError
from ..lm import checkpoint_info, checkpoint_writer, load_checkpoint, make_model, predict, train_lm
from ..lm.checkpoint import corpus_digest
from ..lm.model import num_params
from ..lm.train import SEES_THE_FUTURE, Updater
from ..models import cell_names
from ..models.cell import INITS, TOKEN_BOUND
from ..training.memory import training_bytes
from ..training.metrics import format_perplexity
from ..training.optim import get_optimizer
from ..training.step import PRECISIONS
from .args import (
    SHARED_SETTING_TYPES,
    at_most,
    decay_rate,
    dropout_rate,
    max_tokens,
    nonnegative_float,
    nonnegative_int,
    yes_no,
)
from .command import SCHEDULES, TrainingCommand, refuse_too_large, register
from .resumed import short, stopped_early
from .saving import png_writer

NGRAM_ORDERS = (1, 2, 3, 5)
CELLS = tuple(cell_names())
SAMPLE_CHARS = 100
TIME_MACHINE_PREFIXES = ("time traveller", "traveller")

#: The settings of a training run, their defaults, and what ``--resume`` restores from the run.
TRAIN_DEFAULTS = {"corpus": "timemachine", "raw": False, "model": "scratch", "cell": "rnn", "num_layers": 1,
                  "dropout": 0.0, "input_dropout": 0.0, "output_dropout": 0.0, "locked_dropout": False,
                  "weight_drop": 0.0, "ema": 0.0, "init": "normal", "precision": "float32",
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

#: What the Tiny Shakespeare presets share: raw characters, the LSTM on the framework's layer with uniform
#: starting weights, batches of 64 x 64, Adam 0.01, input and output dropout 0.1 and 0.3, every epoch run.
_TINY_SHAKESPEARE = {"corpus": "tinyshakespeare", "raw": True, "model": "concise", "cell": "lstm",
                     "init": "uniform", "batch_size": 64, "num_steps": 64, "lr": 0.01, "input_dropout": 0.1,
                     "output_dropout": 0.3, "patience": 0}

#: Named recipes (``--preset NAME``): settings chosen by measurement for a training budget on a corpus
#: (bench/RESULTS.md, section lm-presets, has the runs). Settings given on the command line win; the
#: preset's fill the rest before the cell's defaults do. Each says what it was measured on: a preset's
#: epochs fit its minutes on that backend and machine.
PRESETS = {
    "timemachine-5min": {
        "measured": "torch, 2 idle cores (2-core AMD EPYC with AVX-512): 3.99 in 4.5 minutes",
        "settings": {"corpus": "timemachine", "model": "concise", "cell": "lstm", "init": "uniform",
                     "hidden": 384, "lr": 0.03, "input_dropout": 0.1, "output_dropout": 0.3,
                     "weight_drop": 0.15, "ema": 0.998, "epochs": 46, "patience": 0},
    },
    "tinyshakespeare-10min": {
        "measured": "torch, 2 idle cores (2-core AMD EPYC with AVX-512): 1.441 nats/char in 9.0 minutes, "
                    "where a plain PyTorch LSTM reached 1.438 in 10",
        "settings": {**_TINY_SHAKESPEARE, "hidden": 512, "warmup": 61, "epochs": 15},
    },
    "tinyshakespeare-bf16": {
        "measured": "torch with bfloat16 products, 2 idle cores (2-core AMD EPYC with AVX-512 BF16): 1.456 "
                    "nats/char in 5.0 minutes and 1.432 in 9.8, where a plain PyTorch LSTM reached 1.490 and "
                    "1.449 in 5 and 10",
        "settings": {**_TINY_SHAKESPEARE, "hidden": 512, "warmup": 74, "precision": "bfloat16", "epochs": 18},
    },
    "tinyshakespeare-bf16-5min": {
        "measured": "torch with bfloat16 products, 2 idle cores (2-core AMD EPYC with AVX-512 BF16): 1.431 "
                    "nats/char in 4.4 minutes, where a plain PyTorch LSTM reached 1.470 in 5",
        "settings": {**_TINY_SHAKESPEARE, "hidden": 640, "warmup": 74, "precision": "bfloat16", "epochs": 8},
    },
    "tinyshakespeare-bf16-10min": {
        "measured": "torch with bfloat16 products, 2 idle cores (2-core AMD EPYC with AVX-512 BF16): 1.408 "
                    "nats/char in 9.4 minutes, where a plain PyTorch LSTM reached 1.443 in 10",
        "settings": {**_TINY_SHAKESPEARE, "hidden": 704, "warmup": 74, "precision": "bfloat16", "epochs": 12,
                     "weight_decay": 0.1, "ema": 0.998},
    },
}

#: Settings added after runs were first saved: a run saved without them used these defaults.
ADDED_SETTINGS = ("cell", "num_layers", "dropout", "input_dropout", "output_dropout", "optimizer",
                  "weight_decay", "schedule", "warmup", "patience", "init", "raw", "locked_dropout",
                  "weight_drop", "ema", "precision")

#: The type of each training setting: checks the command line, and the settings a resumed run saved.
SETTING_TYPES = {**SHARED_SETTING_TYPES, "raw": yes_no, "input_dropout": dropout_rate,
                 "output_dropout": dropout_rate, "locked_dropout": yes_no, "weight_drop": dropout_rate,
                 "ema": decay_rate, "weight_decay": nonnegative_float, "warmup": nonnegative_int,
                 "patience": at_most(nonnegative_int, MAX_EPOCHS), "max_tokens": max_tokens}
#: The values each setting with a fixed set of them may take.
SETTING_CHOICES = {"model": ("scratch", "concise"), "cell": CELLS, "init": INITS,
                   "optimizer": ("sgd", "adam"), "schedule": SCHEDULES,
                   "sampling": ("random", "sequential"), "precision": PRECISIONS}
#: The columns of a language model's ``metrics.csv``.
CSV_FIELDS = ("epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds")


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


def _flag(args, key):
    """``--key value`` as a setting of ``args`` is given on the command line (a switch without a value)."""
    value, flag = getattr(args, key), f"--{key.replace('_', '-')}"
    if isinstance(value, bool):
        return flag if value else f"{flag} off"
    return f"{flag} {value}"


def model_name(args):
    """``RNN``, ``GRU``, ``LSTM``; ``2-layer GRU`` for a deep one."""
    layers = f"{args.num_layers}-layer " if args.num_layers > 1 else ""
    return f"{layers}{args.cell.upper()}"


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


def perplexity_plot_writer(history, baselines, title="", best_epoch=None):
    """A writer of a PNG of train and validation perplexity per epoch, with the bigram and trigram
    as dashed lines and the best epoch (the one ``model.npz`` holds) marked."""
    epochs, train, val = list(history["epoch"]), list(history["train_ppl"]), list(history["val_ppl"])

    def draw(fig):
        from matplotlib.ticker import MaxNLocator

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

    return png_writer(draw, (6, 4))


class LanguageModelCommand(TrainingCommand):
    """``d2lrnn train``."""

    name, kind, what = "train", "lm", "a language model"
    example, out_pattern = "runs/timemachine-numpy-scratch-1", "runs/<corpus>-<backend>-<model>-<N>"
    plot, csv_fields = "perplexity.png", CSV_FIELDS
    defaults, types, choices = TRAIN_DEFAULTS, SETTING_TYPES, SETTING_CHOICES
    added = {key: TRAIN_DEFAULTS[key] for key in ADDED_SETTINGS}  # their defaults have not changed since
    model_settings = {"kind": "model", "cell": "cell", "num_hiddens": "hidden", "num_layers": "num_layers",
                      "dropout": "dropout", "input_dropout": "input_dropout",
                      "output_dropout": "output_dropout", "locked_dropout": "locked_dropout",
                      "weight_drop": "weight_drop"}
    help = "train a character RNN language model"
    description = ("Train a character-level RNN language model, compare it with n-gram baselines on the same "
                   "held-out text, and save, after every epoch, the best model so far, the metrics, a "
                   "perplexity plot and the state to resume from, in a folder of the run's own.")

    def default_text(self, key):
        per_cell = {cell: v[key] for cell, v in CELL_DEFAULTS.items() if key in v}
        shown = f"{self.defaults[key]}"
        for value in dict.fromkeys(per_cell.values()):
            shown += f"; --cell {'/'.join(c for c, v in per_cell.items() if v == value)}: {value}"
        return shown

    def add_settings(self, p, setting):
        setting("--corpus", f"{', '.join(CORPORA)}, or the path of a UTF-8 text file", metavar="NAME|PATH")
        p.add_argument("--raw", action="store_true", default=None,
                       help="every character of the text a token (case, punctuation, line breaks) instead of "
                            "the book's cleaning to 26 lower-case letters and space (Tiny Shakespeare: 65)")
        setting("--model", "the RNN from scratch, or the framework's own RNN layer",
                choices=SETTING_CHOICES["model"])
        setting("--cell", "the recurrent cell: plain tanh RNN, gated recurrent unit, or long short-term "
                "memory", choices=CELLS)
        setting("--num-layers", "recurrent layers stacked on each other", metavar="L")
        setting("--dropout", "dropout between recurrent layers while training (with --num-layers 2 or more)",
                metavar="P")
        setting("--input-dropout", "dropout of whole input characters while training", metavar="P")
        setting("--output-dropout", "dropout of the last layer's outputs before the output layer while "
                "training", metavar="P")
        p.add_argument("--locked-dropout", action="store_true", default=None,
                       help="one dropout mask per sequence, the same at every step, for --input-dropout (a "
                            "dropped character is dropped throughout the sequence), --dropout and "
                            "--output-dropout, instead of a fresh mask per unit and step (AWD-LSTM's locked "
                            "dropout; --dropout with it needs --model scratch)")
        setting("--weight-drop", "DropConnect on the recurrent weights W_h*: the probability of dropping "
                "each entry, one mask per minibatch, while training", metavar="P")
        p.add_argument("--preset", choices=tuple(PRESETS), default=None,
                       help="a recipe chosen by measurement for a training budget: its settings fill the "
                            "ones not given ("
                            + "; ".join(f"{name}: {preset['measured']}" for name, preset in PRESETS.items())
                            + "; the settings: docs/cli.md)")
        p.add_argument("--bidirectional", action="store_true",
                       help="refused: a bidirectional model sees the character it is asked to predict (see "
                            "the bidirectional-rnn notebook)")
        setting("--init", "starting weights: the book's N(0, 0.01^2) with zero biases, or the frameworks' "
                          "U(-1/sqrt(h), 1/sqrt(h)), with the rows that input characters pick in "
                          f"U(-{TOKEN_BOUND:.3g}, {TOKEN_BOUND:.3g})", choices=INITS)
        setting("--hidden", "hidden units (per layer and direction)", metavar="N")
        setting("--batch-size", "sequences per minibatch", metavar="N")
        setting("--num-steps", "time steps per sequence", metavar="N")
        setting("--optimizer", "the book's SGD, or Adam (with decoupled weight decay)",
                choices=SETTING_CHOICES["optimizer"])
        setting("--lr", "learning rate (the peak of the schedule)", metavar="RATE")
        setting("--weight-decay", "weight decay (L2 for SGD, decoupled for Adam)", metavar="WD")
        self.add_schedule_settings(setting, "validate, save and generate with")
        setting("--clip", "gradient clipping: maximum global norm", metavar="NORM")
        setting("--precision", "the products' precision while training: float32, or bfloat16 with the "
                               "weights kept in float32 (torch; fast on CPUs with bfloat16 instructions)",
                choices=PRECISIONS)
        setting("--epochs", "passes over the training text (with --resume: the new total)", metavar="N")
        setting("--patience", "stop after N epochs without a better validation perplexity (0: never)",
                metavar="N")
        setting("--sampling", "random subsequences, or sequential partitioning (state carried over)",
                choices=("random", "sequential"))
        setting("--max-tokens", "use only the first N characters of the corpus (-1: all)", metavar="N")
        setting("--val-fraction", "the last part of the text held out for validation", metavar="F")
        setting("--seed", "seed of the initial weights and the data order", metavar="S")

    def run(self, args):
        if args.preset and args.resume:
            raise D2LRNNError(f"--resume continues the run with its own settings: drop --preset "
                              f"{args.preset}")
        if args.bidirectional:
            raise D2LRNNError(f"--bidirectional: {SEES_THE_FUTURE}; 'd2lrnn train' trains language models, "
                              "so drop --bidirectional (the bidirectional-rnn notebook shows where it helps)")
        return super().run(args)

    def fill_settings(self, args):
        """Every setting not given takes its default: the preset's, then the cell's own, where they have one
        (recorded for the summary's note)."""
        preset = PRESETS[args.preset]["settings"] if args.preset else {}
        args.preset_settings = [key for key in TRAIN_DEFAULTS if key in preset and getattr(args, key) is None]
        for key in args.preset_settings:
            setattr(args, key, preset[key])
        own = CELL_DEFAULTS.get(args.cell or TRAIN_DEFAULTS["cell"], {})
        args.cell_defaults = [key for key in TRAIN_DEFAULTS if key in own and getattr(args, key) is None]
        for key in args.cell_defaults:
            setattr(args, key, own[key])
        super().fill_settings(args)

    def check(self, args):
        if args.dropout and args.num_layers == 1:
            raise D2LRNNError(f"--dropout {args.dropout:g} acts between recurrent layers, and one layer has "
                              "none: add --num-layers 2 (or more), or drop --dropout")
        if args.locked_dropout and not (args.dropout or args.input_dropout or args.output_dropout):
            raise D2LRNNError("--locked-dropout locks the masks of --input-dropout, --dropout and "
                              "--output-dropout, and all three are 0: give one of them a rate, or drop "
                              "--locked-dropout")
        if args.locked_dropout and args.dropout and args.model == "concise":
            raise D2LRNNError("--locked-dropout with --dropout needs --model scratch: the framework's "
                              "multi-layer layer draws its own masks between its layers")

    def read(self, args):
        corpus_path(args.corpus)  # an unknown corpus fails before a framework is imported

    def names_a_file(self, key, value):
        return key == "corpus" and value not in CORPORA

    def check_resumed(self, args, path, info):
        """Refuse to resume a run whose epochs were scored on another cut of the validation text (the
        best model would be chosen by two measures), or that stopped early: it is finished (one more
        epoch would stop it again, and its result would no longer be the finished run's)."""
        streams = info["hparams"].get("val_streams")
        if streams != VAL_STREAMS:
            cut = ("one row per minibatch row (d2lrnn before 2026-11-27)" if streams is None
                   else f"{short(streams)} rows")
            raise D2LRNNError(f"the run in {path} scored its validation text cut into {cut}, this d2lrnn "
                              f"into {VAL_STREAMS} rows: its epochs and new ones would not compare, so it "
                              "cannot be resumed; nothing was changed (its model.npz still generates): "
                              "start a new run")
        if stopped_early(info["history"], "val_ppl", args.patience, args.epochs) is not None:
            done = info["history"]["epoch"][-1]
            raise D2LRNNError(f"the run in {path} stopped early after epoch {done} of {args.epochs} (no "
                              f"better validation perplexity for {args.patience} epochs): it is finished, "
                              "nothing was changed; start a new run to train with other settings")

    def info(self, path, follow_symlinks=True):
        return checkpoint_info(path, follow_symlinks)

    def data(self, args, early):
        ops.manual_seed(args.seed)
        train_iter, val_iter, vocab = load_data_lm(args.corpus, args.batch_size, args.num_steps,
                                                   args.sampling == "random", args.max_tokens,
                                                   args.val_fraction, seed=args.seed, raw=args.raw)
        params = num_params(len(vocab), args.cell, args.hidden, args.num_layers)
        need = training_bytes(params, args.optimizer, args.cell,
                              args.batch_size * args.num_steps * args.hidden * args.num_layers,
                              args.batch_size * args.num_steps * len(vocab))
        refuse_too_large(need, f"--hidden {args.hidden} with --batch-size {args.batch_size} and --num-steps "
                               f"{args.num_steps}", "--hidden, --batch-size or --num-steps")
        if "warmup" in getattr(args, "cell_defaults", []):  # the cell's default: at most a tenth of a run
            args.warmup = min(args.warmup, args.epochs * len(train_iter) // 10)
        return types.SimpleNamespace(train_iter=train_iter, val_iter=val_iter, vocab=vocab)

    def digest(self, data):
        return corpus_digest(data.train_iter, data.val_iter)

    def stem(self, args, backend):
        return run_stem(args, backend)

    def summary(self, args, backend, data):
        epochs = f"{args.epochs} epoch{'s' * (args.epochs != 1)}"
        rates = (("between layers", args.dropout), ("input", args.input_dropout),
                 ("output", args.output_dropout))
        dropouts = [f"{what} {p:g}" for what, p in rates if p]
        locked = "locked " if args.locked_dropout else ""
        dropout = f", {locked}dropout {', '.join(dropouts)}" if dropouts else ""
        if args.weight_drop:
            dropout += f", weight drop {args.weight_drop:g}"
        training = self.optimizer_summary(args)
        stop = f", early stop after {args.patience} epochs without improvement" if args.patience else ""
        raw = " (raw)" if args.raw else ""
        return (f"corpus {args.corpus}{raw}: {data.train_iter.num_tokens:,} training / "
                f"{data.val_iter.num_tokens:,} validation characters, vocabulary {len(data.vocab)} | backend "
                f"{backend} | {model_name(args)} ({args.model}), {args.hidden} hidden units{dropout} | "
                f"{training} | batch {args.batch_size} x {args.num_steps} steps, {epochs}{stop}, "
                f"{args.sampling} sampling")

    def note(self, args, resumed):
        """The preset's settings and the per-cell defaults a new run took, and how to get the book's
        training back."""
        preset, own = getattr(args, "preset_settings", []), getattr(args, "cell_defaults", [])
        if resumed or not (preset or own):
            return None
        lines = []
        if preset:
            lines.append(f"--preset {args.preset}: " + ", ".join(_flag(args, key) for key in preset))
        if own:
            lines.append(f"defaults for --cell {args.cell}: " + ", ".join(_flag(args, key) for key in own)
                         + " (the book's training: --optimizer sgd --lr 1 --schedule constant --warmup 0)")
        return "\n".join(lines)

    def before_training(self, args, data):
        fit, held, note = baseline_sample(data.train_iter.corpus, data.val_iter.corpus)
        baselines = ngram_perplexities(fit, held, len(data.vocab), ns=NGRAM_ORDERS)
        print("n-gram validation perplexity: " + ", ".join(f"{n}-gram {p:.2f}" for n, p in baselines.items())
              + f" (the trigram's {baselines[3]:.2f} is the one to beat{_best_ngram_note(baselines)})"
              + (f"; a sample of the large text: {note}" if note else ""), flush=True)
        data.baselines = baselines
        data.prefixes = sample_prefixes(args.corpus, data.vocab, data.val_iter.corpus)

    def build(self, args, data):
        return make_model(args.model, len(data.vocab), args.hidden, args.placement, cell=args.cell,
                          num_layers=args.num_layers, dropout=args.dropout, input_dropout=args.input_dropout,
                          output_dropout=args.output_dropout, init=args.init,
                          locked_dropout=bool(args.locked_dropout), weight_drop=args.weight_drop)

    def load_run(self, path, args, data, digest):
        net, saved_vocab, info = load_checkpoint(path, args.placement, follow_symlinks=False)
        saved = info["hparams"].get("corpus_sha1")
        if saved_vocab != data.vocab or saved != digest:
            raise DataError(f"the corpus {args.corpus} is not the text the run in {path.parent} was trained "
                            "on (it changed since): resume needs the same text; start a new run instead")
        return net, info["history"], info["resume"]

    def updater(self, args, net, data):
        return _updater(args, net, data.schedule)

    def hparams(self, args, backend, digest, data):
        hparams = {key: getattr(args, key) for key in TRAIN_DEFAULTS}
        if args.corpus not in CORPORA:
            hparams["corpus_path"] = str(corpus_path(args.corpus).resolve())
        hparams.update(backend=backend, token="char", prefixes=list(data.prefixes), corpus_sha1=digest,
                       ngram_val_ppl={str(n): ppl for n, ppl in data.baselines.items()},
                       val_streams=VAL_STREAMS)  # how the validation text is cut (load_data_lm)
        return hparams

    def title(self, args, backend):
        return f"{corpus_name(args.corpus)}, {backend}, {model_name(args)} ({args.model})"

    def writer(self, net, data, hparams, history, resume=None, opt_state=None):
        return checkpoint_writer(net, data.vocab, hparams, history, resume, opt_state)

    def best(self, history, i):
        return -history["val_ppl"][i]

    def best_text(self, history, i):
        return f"validation perplexity {format_perplexity(history['val_ppl'][i])}"

    def plot_writer(self, history, data, title, best_epoch):
        return perplexity_plot_writer(history, data.baselines, title, best_epoch)

    def fit(self, args, net, data, history, on_epoch, updater):
        return train_lm(net, data.train_iter, args.lr, args.epochs, None, args.sampling == "random",
                        clip=args.clip, val_iter=data.val_iter, progress=not args.no_progress, plot=False,
                        verbose=False, history=history, on_epoch=on_epoch, updater=updater,
                        patience=args.patience or None)

    def stopped_early(self, args, history):
        return (f"stopped early after epoch {history['epoch'][-1]} of {args.epochs}: the validation "
                f"perplexity did not improve for {args.patience} epochs")

    def report(self, args, out, data, epochs_done):
        """The best epoch's perplexities against the baselines, and samples from the saved best model."""
        net, vocab, info = load_checkpoint(out / "model.npz", args.placement)
        history = info["history"]
        print()
        print(perplexity_table(args.model, history["train_ppl"][-1], history["val_ppl"][-1], data.baselines,
                               model_name(args)))
        print(f"model.npz holds epoch {history['epoch'][-1]} of {epochs_done}, the one with the best "
              "validation perplexity")
        print(f"\nsamples (greedy, {SAMPLE_CHARS} characters):")
        for prefix in data.prefixes:
            print(f"  {predict(prefix, SAMPLE_CHARS, net, vocab)}")


def run_stem(args, backend):
    """The run folder's name before its number: ``timemachine-numpy-scratch`` for the plain one-layer
    RNN (as before cells), ``timemachine-numpy-scratch-gru``, ``...-scratch-lstm-l2`` otherwise."""
    parts = [corpus_name(args.corpus), backend, args.model]
    if args.cell != "rnn" or args.num_layers > 1:
        parts.append(args.cell + (f"-l{args.num_layers}" if args.num_layers > 1 else ""))
    return "-".join(parts)


def _updater(args, net, schedule):
    """The optimizer, ``schedule`` and clipping of a run, as one :class:`d2lrnn.lm.train.Updater`."""
    optimizer = get_optimizer(args.optimizer, args.lr, args.weight_decay)
    return Updater(net, optimizer, args.clip, schedule=schedule, average=args.ema, precision=args.precision)


TRAIN = register(LanguageModelCommand())
