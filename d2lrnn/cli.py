"""The ``d2lrnn`` command: train a character RNN language model, and generate text from a checkpoint.

``d2lrnn train`` loads a corpus, computes the n-gram baselines on the same train/validation
split, trains with a progress bar, then prints the perplexities next to the baselines,
two sample continuations, and where it wrote the checkpoint, metrics CSV and plot.
``d2lrnn generate`` continues a prefix with a saved model. :func:`main` takes an argument
list and returns the exit code: 0 done, 1 training diverged, 2 bad arguments or input,
130 interrupted.
"""

import argparse
import csv
import math
import pathlib
import sys
import time

from . import ops
from .backends import available_backends, backend_name, use_backend
from .checkpoint import atomic_write, load_checkpoint, save_checkpoint
from .data import CORPORA, corpus_path, load_data_lm, ngram_perplexities
from .errors import D2LRNNError, TrainingError
from .models import make_model
from .train import predict_ch8, train_ch8

NGRAM_ORDERS = (1, 2, 3, 5)
SAMPLE_CHARS = 100
TIME_MACHINE_PREFIXES = ("time traveller", "traveller")
CSV_FIELDS = ("epoch", "train_ppl", "val_ppl", "tokens_per_sec", "seconds")


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default unless it is None/False or its help already says it."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (no usage block), exit code 2."""

    def error(self, message):
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


def positive_float(text):
    """A finite number > 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def nonnegative_float(text):
    """A finite number >= 0."""
    value = _number(text, float)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of 0 or more, got {text}")
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
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (e.g. 0.1), got {text}")
    return value


def backend_choice(text):
    """The name of a backend d2lrnn knows (its framework is checked when it is switched to)."""
    name = text.strip().lower()
    if name not in available_backends():
        raise argparse.ArgumentTypeError(f"unknown backend {text!r}: choose one of "
                                         f"{', '.join(available_backends())}")
    return name


def _add_train_parser(commands):
    p = commands.add_parser(
        "train", help="train a character RNN language model",
        description="Train a character-level RNN language model, compare it with n-gram baselines on "
                    "the same held-out text, and save a checkpoint, a metrics CSV and a perplexity plot.",
        formatter_class=_HelpFormatter)
    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help=f"{', '.join(available_backends())} (default: $D2LRNN_BACKEND, else numpy)")
    p.add_argument("--corpus", default="timemachine", metavar="NAME|PATH",
                   help=f"{', '.join(CORPORA)}, or the path of a UTF-8 text file")
    p.add_argument("--model", choices=("scratch", "concise"), default="scratch",
                   help="the RNN from scratch, or the framework's own RNN layer")
    p.add_argument("--hidden", type=positive_int, default=512, metavar="N", help="hidden units")
    p.add_argument("--batch-size", type=positive_int, default=32, metavar="N", help="sequences per minibatch")
    p.add_argument("--num-steps", type=positive_int, default=35, metavar="N", help="time steps per sequence")
    p.add_argument("--lr", type=positive_float, default=1.0, metavar="RATE", help="SGD learning rate")
    p.add_argument("--clip", type=positive_float, default=1.0, metavar="NORM",
                   help="gradient clipping: maximum global norm")
    p.add_argument("--epochs", type=positive_int, default=30, metavar="N",
                   help="passes over the training text")
    p.add_argument("--sampling", choices=("random", "sequential"), default="sequential",
                   help="random subsequences, or sequential partitioning (state carried over)")
    p.add_argument("--max-tokens", type=max_tokens, default=-1, metavar="N",
                   help="use only the first N characters of the corpus (-1: all)")
    p.add_argument("--val-fraction", type=fraction, default=0.1, metavar="F",
                   help="the last part of the text held out for validation")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="seed of the initial weights and the sampling")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default: runs/<corpus>-<backend>-<model>)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run_train)


def _add_generate_parser(commands):
    p = commands.add_parser(
        "generate", help="continue a prefix with a trained model",
        description="Load a checkpoint written by 'd2lrnn train' (on any backend) and continue a prefix: "
                    "greedy by default, sampled with --temperature.",
        formatter_class=_HelpFormatter)
    p.add_argument("--checkpoint", required=True, metavar="FILE",
                   help="a model.npz written by 'd2lrnn train'")
    p.add_argument("--prefix", default=None, metavar="TEXT",
                   help="text to continue (default: the first sample prefix of the training run, "
                        "'time traveller' for the Time Machine)")
    p.add_argument("--num-chars", type=positive_int, default=50, metavar="N", help="characters to generate")
    p.add_argument("--temperature", type=nonnegative_float, default=0.0, metavar="T",
                   help="0: greedy; above 0: sample from softmax(logits / T)")
    p.add_argument("--seed", type=int, default=None, metavar="S",
                   help="seed of the sampling (default: random)")
    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help="backend to run on (default: $D2LRNN_BACKEND, else numpy)")
    p.set_defaults(run=run_generate)


def build_parser():
    """The argument parser of ``d2lrnn`` with its ``train`` and ``generate`` commands."""
    from . import __version__

    parser = _Parser(prog="d2lrnn", description="The RNN chapter of Dive into Deep Learning on NumPy, "
                     "PyTorch, TensorFlow or MXNet: train a character language model, generate text.",
                     epilog="Run 'd2lrnn COMMAND --help' for the options of a command.")
    parser.add_argument("--version", action="version", version=f"d2lrnn {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=_Parser)
    _add_train_parser(commands)
    _add_generate_parser(commands)
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


def _make_out_dir(out):
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise D2LRNNError(f"cannot create the output folder {out}: {err.strerror or err}: "
                          "choose another --out") from None
    return out


def _summary(args, backend, train_iter, val_iter, vocab):
    return (f"corpus {args.corpus}: {train_iter.num_tokens:,} training / {val_iter.num_tokens:,} validation "
            f"characters, vocabulary {len(vocab)} | backend {backend} | model {args.model}, "
            f"{args.hidden} hidden units | {args.epochs} epochs, {args.sampling} sampling")


def perplexity_table(model, train_ppl, val_ppl, baselines):
    """The RNN's train/validation perplexity above the n-gram models' validation perplexity."""
    rows = [(f"RNN ({model})", f"{train_ppl:.2f}", f"{val_ppl:.2f}")]
    rows += [(f"{n}-gram (add-k)", "-", f"{ppl:.2f}") for n, ppl in sorted(baselines.items())]
    lines = [f"{'perplexity':<16}{'train':>8}{'validation':>12}"]
    lines += [f"{name:<16}{train:>8}{val:>12}" for name, train, val in rows]
    trigram = baselines[3]
    verdict = "beats" if val_ppl < trigram else "does not beat"
    sign = "<" if val_ppl < trigram else ">="
    lines.append(f"the RNN {verdict} the trigram on the validation text ({val_ppl:.2f} {sign} {trigram:.2f})")
    return "\n".join(lines)


def write_metrics_csv(path, history):
    """Write the per-epoch history as CSV (``epoch,train_ppl,val_ppl,tokens_per_sec,seconds``)."""
    def write(f):
        writer = csv.writer(f)
        writer.writerow(CSV_FIELDS)
        writer.writerows(zip(*(history[k] for k in CSV_FIELDS)))

    return atomic_write(path, write, mode="w", encoding="utf-8")


def write_perplexity_plot(path, history, baselines, title=""):
    """Save a PNG of train and validation perplexity per epoch; the bigram and trigram are dashed lines."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(6, 4), dpi=100)
    FigureCanvasAgg(fig)  # rendered off-screen: no display needed
    ax = fig.add_subplot()
    ax.plot(history["epoch"], history["train_ppl"], "-o", markersize=3, label="RNN train")
    ax.plot(history["epoch"], history["val_ppl"], "-s", markersize=3, label="RNN validation")
    for n, style in ((2, "tab:gray"), (3, "tab:red")):
        ax.axhline(baselines[n], linestyle="--", color=style, label=f"{n}-gram validation")
    ax.set(xlabel="epoch", ylabel="perplexity", title=title)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    return atomic_write(path, lambda f: fig.savefig(f, format="png"))


def _hparams(args, backend, prefixes, baselines):
    keys = ("corpus", "model", "hidden", "batch_size", "num_steps", "lr", "clip", "epochs", "sampling",
            "max_tokens", "val_fraction", "seed")
    hparams = {key: getattr(args, key) for key in keys}
    hparams.update(backend=backend, token="char", prefixes=list(prefixes),
                   ngram_val_ppl={str(n): ppl for n, ppl in baselines.items()})
    return hparams


def _report(args, net, vocab, history, baselines, prefixes):
    """Print the perplexity table and the greedy continuations of ``prefixes``."""
    print()
    print(perplexity_table(args.model, history["train_ppl"][-1], history["val_ppl"][-1], baselines))
    print(f"\nsamples (greedy, {SAMPLE_CHARS} characters):")
    for prefix in prefixes:
        print(f"  {predict_ch8(prefix, SAMPLE_CHARS, net, vocab)}")


def _save_outputs(out, args, backend, net, vocab, history, baselines, prefixes):
    """Write the checkpoint, metrics CSV and plot into ``out``; return ``{what: path}``."""
    hparams = _hparams(args, backend, prefixes, baselines)
    title = f"{corpus_name(args.corpus)}, {backend}, {args.model}"
    return {"checkpoint": save_checkpoint(out / "model.npz", net, vocab, hparams, history),
            "metrics": write_metrics_csv(out / "metrics.csv", history),
            "plot": write_perplexity_plot(out / "perplexity.png", history, baselines, title)}


def _train_here(args, backend, start):
    """``d2lrnn train`` on the already active backend."""
    ops.manual_seed(args.seed)
    train_iter, val_iter, vocab = load_data_lm(args.corpus, args.batch_size, args.num_steps,
                                               args.sampling == "random", args.max_tokens,
                                               args.val_fraction, seed=args.seed)
    out = _make_out_dir(pathlib.Path(args.out or f"runs/{corpus_name(args.corpus)}-{backend}-{args.model}"))
    print(_summary(args, backend, train_iter, val_iter, vocab), flush=True)
    baselines = ngram_perplexities(train_iter.corpus, val_iter.corpus, len(vocab), ns=NGRAM_ORDERS)
    print("n-gram validation perplexity: " + ", ".join(f"{n}-gram {p:.2f}" for n, p in baselines.items())
          + f" (the trigram's {baselines[3]:.2f} is the one to beat)", flush=True)
    net = make_model(args.model, len(vocab), args.hidden)
    history = train_ch8(net, train_iter, vocab, args.lr, args.epochs, None, args.sampling == "random",
                        clip=args.clip, val_iter=val_iter, progress=not args.no_progress, plot=False,
                        verbose=False)
    prefixes = sample_prefixes(args.corpus, vocab, val_iter.corpus)
    _report(args, net, vocab, history, baselines, prefixes)
    paths = _save_outputs(out, args, backend, net, vocab, history, baselines, prefixes)
    print(f"\nwall time {_duration(time.perf_counter() - start)}")
    for what, path in paths.items():
        print(f"{what:<11} {path}")
    return 0


def _duration(seconds):
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def run_train(args):
    """``d2lrnn train``: the backend is switched to first, before any tensor is made."""
    start = time.perf_counter()
    corpus_path(args.corpus)  # an unknown corpus fails before a framework is imported
    with use_backend(args.backend or backend_name()) as module:
        return _train_here(args, module.__name__.rsplit(".", 1)[-1], start)


def run_generate(args):
    """``d2lrnn generate``: load a checkpoint on the chosen backend and print the continuation."""
    with use_backend(args.backend or backend_name()):
        net, vocab, info = load_checkpoint(args.checkpoint)
        prefix = args.prefix
        if prefix is None:
            prefix = ((info.get("hparams") or {}).get("prefixes") or TIME_MACHINE_PREFIXES)[0]
        print(predict_ch8(prefix, args.num_chars, net, vocab, temperature=args.temperature, seed=args.seed))
    return 0


def _fail(message, code):
    print(f"d2lrnn: error: {message}", file=sys.stderr)
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
    except KeyboardInterrupt:
        print("\nd2lrnn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
