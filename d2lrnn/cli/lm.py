"""``d2lrnn train`` and ``d2lrnn generate``: a character RNN language model trained against n-gram
baselines, saved after every epoch in a run folder of its own, and text generated with it."""

import argparse
import hashlib
import pathlib
import time

import numpy as np

from .. import ops
from ..backends import available_backends, backend_name, set_generator_state, use_backend
from ..checkpoint import checkpoint_info, checkpoint_writer, load_checkpoint, load_optimizer_state
from ..data import CORPORA, baseline_sample, corpus_path, load_data_lm, ngram_perplexities
from ..errors import CheckpointError, D2LRNNError, DataError, TrainingError
from ..models import cell_names, make_model
from ..models.cell import INITS, TOKEN_BOUND
from ..optim import Schedule, get_optimizer
from ..runs import open_run_folder
from ..train import SEES_THE_FUTURE, Updater, format_perplexity, predict_ch8, quiet_numerics, train_ch8
from .common import (
    SHARED_SETTING_TYPES,
    _checkpoint_path,
    _duration,
    _HelpFormatter,
    _interrupted,
    _refuse_too_large,
    _resume_folder,
    _run_state,
    backend_choice,
    dropout_rate,
    folder,
    max_tokens,
    metrics_csv_writer,
    nonnegative_float,
    nonnegative_int,
    positive_int,
    seed_value,
    yes_no,
)

NGRAM_ORDERS = (1, 2, 3, 5)
CELLS = tuple(cell_names())
SAMPLE_CHARS = 100
TIME_MACHINE_PREFIXES = ("time traveller", "traveller")

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

#: Settings added after runs were first saved: a run saved without them used these defaults.
ADDED_SETTINGS = ("cell", "num_layers", "dropout", "input_dropout", "output_dropout", "optimizer",
                  "weight_decay", "schedule", "warmup", "patience", "init", "raw")

#: The type of each training setting: checks the command line, and the settings a resumed run saved.
SETTING_TYPES = {**SHARED_SETTING_TYPES, "raw": yes_no, "input_dropout": dropout_rate,
                 "output_dropout": dropout_rate, "weight_decay": nonnegative_float, "warmup": nonnegative_int,
                 "patience": nonnegative_int, "max_tokens": max_tokens}


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
