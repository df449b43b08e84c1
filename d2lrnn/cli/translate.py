"""``d2lrnn translate-train`` and ``d2lrnn translate``: the chapter's English-French encoder-decoder
trained with a held-out validation split, saved after every epoch in a run folder of its own (the
epoch with the best validation BLEU as ``model.npz``), and sentences translated with it."""

import argparse
import hashlib
import math
import pathlib
import time

import numpy as np

from .. import ops
from ..backends import available_backends, backend_name, set_generator_state, use_backend
from ..bleu import bleu
from ..checkpoint import load_optimizer_state
from ..data import load_data_nmt_split
from ..data.translation import PAIRS_FILE
from ..errors import CheckpointError, D2LRNNError, DataError, TrainingError
from ..runs import open_run_folder
from ..seq2seq import evaluate_bleu, make_seq2seq, make_seq2seq_updater, train_seq2seq, translate
from ..seq2seq.checkpoint import (
    load_seq2seq_checkpoint,
    parameter_shapes,
    seq2seq_checkpoint_info,
    seq2seq_checkpoint_writer,
)
from ..seq2seq.decode import ALPHA
from ..seq2seq.train import book_bleu, book_sentences
from ..train import quiet_numerics
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
    beam_width,
    file_name,
    folder,
    metrics_csv_writer,
    nonnegative_float,
    positive_float,
    positive_int,
)

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

#: The type of each translation setting: checks the command line, and the settings a resumed run saved.
TRANSLATE_TYPES = {**SHARED_SETTING_TYPES,
                   "pairs": file_name, "embed_size": positive_int, "num_examples": positive_int,
                   "min_freq": positive_int, "minutes": positive_float}
TRANSLATE_CHOICES = {"model": ("scratch", "concise"), "optimizer": ("adam", "sgd")}
#: How the help shows the settings whose default is None.
_TRANSLATE_SHOWN = {"pairs": "the bundled English-French pairs", "num_examples": "all pairs",
                    "minutes": "no limit"}

#: The plot of a translation run (the language model's is perplexity.png).
LOSS_PLOT = "loss.png"


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


def pairs_name(pairs):
    """A short name for the pairs: the bundled file's, or the file name without its suffix."""
    return f"{PAIRS_FILE.parent.name} (bundled)" if pairs is None else pathlib.Path(pairs).stem


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
