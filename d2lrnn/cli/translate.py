"""``d2lrnn translate-train`` and ``d2lrnn translate``: the chapter's English-French encoder-decoder
trained with a held-out validation split, saved after every epoch in a run folder of its own (the
epoch with the best validation BLEU as ``model.npz``), and sentences translated with it."""

import hashlib
import math
import pathlib
import types

import numpy as np

from .. import ops
from ..checks import MAX_HIDDEN
from ..data import load_data_nmt_split
from ..data.translation import PAIRS_FILE
from ..errors import CheckpointError, D2LRNNError, DataError
from ..seq2seq import (
    bleu,
    evaluate_bleu,
    make_seq2seq,
    make_seq2seq_updater,
    train_encoder_decoder,
)
from ..seq2seq.checkpoint import (
    load_seq2seq_checkpoint,
    parameter_shapes,
    seq2seq_checkpoint_info,
    seq2seq_checkpoint_writer,
)
from ..seq2seq.train import book_bleu, book_sentences
from ..training.memory import training_bytes
from ..training.step import PRECISIONS
from .args import (
    SHARED_SETTING_TYPES,
    at_most,
    decay_rate,
    dropout_rate,
    file_name,
    nonnegative_int,
    positive_float,
    positive_int,
    yes_no,
)
from .command import SCHEDULES, TrainingCommand, refuse_too_large, register
from .saving import png_writer

#: The settings of a translation run (``d2lrnn translate-train``), their defaults, and what ``--resume``
#: restores. ``pairs`` None: the bundled English-French pairs; ``num_examples`` None: all of them;
#: ``minutes`` None: no time budget. ``dropout`` acts between layers (none with one layer), ``embed_dropout``
#: on the embedded words, ``output_dropout`` on the decoder's states before its output layer; ``attention``
#: gives the decoder global attention over the source words; ``tie_embeddings`` makes the decoder's embedding
#: its output layer's weights; ``bidirectional`` runs the encoder's layers both ways.
TRANSLATE_DEFAULTS = {"pairs": None, "model": "scratch", "embed_size": 256, "hidden": 256, "num_layers": 2,
                      "dropout": 0.2, "embed_dropout": 0.0, "output_dropout": 0.0, "attention": False,
                      "tie_embeddings": False, "bidirectional": False,
                      "batch_size": 64, "num_steps": 10, "num_examples": None, "min_freq": 2,
                      "optimizer": "adam", "lr": 0.002, "schedule": "constant", "warmup": 0, "ema": 0.0,
                      "clip": 1.0, "label_smoothing": 0.0, "precision": "float32", "epochs": 30,
                      "minutes": None, "val_fraction": 0.1, "seed": 0}
TRANSLATE_CSV_FIELDS = ("epoch", "train_loss", "val_loss", "val_bleu", "tokens_per_sec", "seconds")
#: The beam width of the beam-search BLEU that ends a translation run.
REPORT_BEAM = 4

#: The type of each translation setting: checks the command line, and the settings a resumed run saved.
TRANSLATE_TYPES = {**SHARED_SETTING_TYPES,
                   "pairs": file_name, "embed_size": at_most(positive_int, MAX_HIDDEN),
                   "num_examples": positive_int,
                   "min_freq": positive_int, "minutes": positive_float, "label_smoothing": dropout_rate,
                   "embed_dropout": dropout_rate, "output_dropout": dropout_rate, "warmup": nonnegative_int,
                   "ema": decay_rate, "attention": yes_no, "tie_embeddings": yes_no, "bidirectional": yes_no}
TRANSLATE_CHOICES = {"model": ("scratch", "concise"), "optimizer": ("adam", "sgd"), "schedule": SCHEDULES,
                     "precision": PRECISIONS}
TRANSLATE_RENEWABLE = ("epochs", "minutes")
#: Settings added after runs were first saved, and the values a run saved without them used.
TRANSLATE_ADDED = {"label_smoothing": 0.0, "embed_dropout": 0.0, "output_dropout": 0.0,
                   "schedule": "constant", "warmup": 0, "ema": 0.0, "attention": False,
                   "tie_embeddings": False, "bidirectional": False, "precision": "float32"}
#: How the help shows the settings whose default is None.
_TRANSLATE_SHOWN = {"pairs": "the bundled English-French pairs", "num_examples": "all pairs",
                    "minutes": "no limit"}

#: The plot of a translation run (the language model's is perplexity.png).
LOSS_PLOT = "loss.png"


def pairs_name(pairs):
    """A short name for the pairs: the bundled file's, or the file name without its suffix."""
    return f"{PAIRS_FILE.parent.name} (bundled)" if pairs is None else pathlib.Path(pairs).stem


def translation_model_name(args):
    """``2-layer GRU encoder-decoder`` (``... with a bidirectional encoder and attention``)."""
    layers = f"{args.num_layers}-layer " if args.num_layers > 1 else ""
    extras = [what for key, what in (("bidirectional", "a bidirectional encoder"), ("attention", "attention"))
              if getattr(args, key, False)]
    return f"{layers}GRU encoder-decoder" + (f" with {' and '.join(extras)}" if extras else "")


def _pairs_digest(train_iter, val_iter):
    """A fingerprint of the split's index arrays: a resumed run must read the same pairs."""
    digest = hashlib.sha1()
    for array in (*train_iter.arrays, *val_iter.arrays):
        digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    return digest.hexdigest()


def translation_plot_writer(history, title="", best_epoch=None):
    """A writer of a PNG of the training and validation loss per token (left) and the validation BLEU-4
    (right) per epoch, with the best epoch (the one ``model.npz`` holds) marked."""
    epochs = list(history["epoch"])
    train, val = list(history["train_loss"]), list(history["val_loss"])
    bleu = [math.nan if b is None else b for b in history["val_bleu"]]

    def draw(fig):
        from matplotlib.ticker import MaxNLocator

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

    return png_writer(draw, (9, 3.6))


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




class TranslationCommand(TrainingCommand):
    """``d2lrnn translate-train``."""

    name, kind, what = "translate-train", "seq2seq", "a translation"
    example, out_pattern = "runs/translate-numpy-scratch-1", "runs/translate-<backend>-<model>-<N>"
    plot, csv_fields = LOSS_PLOT, TRANSLATE_CSV_FIELDS
    defaults, types, choices, added = TRANSLATE_DEFAULTS, TRANSLATE_TYPES, TRANSLATE_CHOICES, TRANSLATE_ADDED
    shown, renewable = _TRANSLATE_SHOWN, TRANSLATE_RENEWABLE
    model_settings = {"rnn": "model", "embed_size": "embed_size", "num_hiddens": "hidden",
                      "num_layers": "num_layers", "dropout": "dropout", "embed_dropout": "embed_dropout",
                      "output_dropout": "output_dropout", "attention": "attention",
                      "tie_embeddings": "tie_embeddings", "bidirectional": "bidirectional"}
    help = "train an English-French translation model (encoder-decoder)"
    description = ("Train the chapter's encoder-decoder (GRU layers; the encoder's final state starts the "
                   "decoder and is its context at every step) on sentence pairs with a held-out validation "
                   "split, and save, after every epoch, the model with the best validation BLEU so far, the "
                   "metrics, a loss and BLEU plot and the state to resume from, in a folder of the run's "
                   "own. Ends with the BLEU of greedy and beam search on the validation pairs and the "
                   "book's four sentences.")

    def add_settings(self, p, setting):
        setting("--pairs", "a UTF-8 file of sentence pairs, one 'source<TAB>target' a line", metavar="PATH")
        setting("--model", "the GRU from scratch, or the framework's own GRU layer",
                choices=self.choices["model"])
        setting("--embed-size", "embedding size of source and target words", metavar="N")
        setting("--hidden", "hidden units of the encoder's and decoder's GRU layers", metavar="N")
        setting("--num-layers", "GRU layers of the encoder and of the decoder", metavar="L")
        setting("--dropout", "dropout between GRU layers while training (none with --num-layers 1)",
                metavar="P")
        setting("--embed-dropout", "dropout of the embedded source and target words' units while training",
                metavar="P")
        setting("--output-dropout", "dropout of the decoder's states before its output layer while training",
                metavar="P")
        p.add_argument("--attention", action="store_true", default=None,
                       help="give the decoder global attention over the source words (Luong et al. 2015): "
                            "each output step also reads a weighted sum of the encoder's states")
        p.add_argument("--bidirectional", action="store_true", default=None,
                       help="run the encoder's GRU layers both ways, half of --hidden each (needs an even "
                            "--hidden)")
        p.add_argument("--tie-embeddings", action="store_true", default=None,
                       help="use the decoder's word embedding as its output layer's weights (needs "
                            "--embed-size equal to --hidden)")
        setting("--batch-size", "sentence pairs per minibatch", metavar="N")
        setting("--num-steps", "tokens per sentence: longer ones are cut, shorter ones padded", metavar="N")
        setting("--num-examples", "use only the first N pairs of the file", metavar="N")
        setting("--min-freq", "words seen fewer times in the training pairs read as <unk>", metavar="N")
        setting("--optimizer", "Adam, or the book's SGD", choices=self.choices["optimizer"])
        setting("--lr", "learning rate (the peak of the schedule)", metavar="RATE")
        self.add_schedule_settings(setting, "validate, save and translate with")
        setting("--clip", "gradient clipping: maximum global norm", metavar="NORM")
        setting("--label-smoothing", "train on each target word smoothed toward the uniform distribution by "
                                     "this weight (0: none)", metavar="EPS")
        setting("--precision", "the products' precision while training: float32, or bfloat16 with the "
                               "weights kept in float32 (torch; fast on CPUs with bfloat16 instructions)",
                choices=self.choices["precision"])
        setting("--epochs", "passes over the training pairs (with --resume: the new total)", metavar="N")
        setting("--minutes", "stop after the epoch that crosses this much training time (with --resume: the "
                             "new total)", metavar="M")
        setting("--val-fraction", "the share of the pairs held out for validation, drawn at random",
                metavar="F")
        setting("--seed", "seed of the initial weights, the split and the data order", metavar="S")

    def fill_settings(self, args):
        """A new run: every setting not given takes its default (dropout: none with one layer)."""
        if args.dropout and args.num_layers == 1:
            raise D2LRNNError(f"--dropout {args.dropout:g} acts between GRU layers, and one layer has none: "
                              "add --num-layers 2 (or more), or drop --dropout")
        super().fill_settings(args)
        if args.num_layers == 1:
            args.dropout = 0.0
        if args.bidirectional and args.hidden % 2:
            raise D2LRNNError(f"--bidirectional gives each direction half of --hidden, and {args.hidden} is "
                              "odd: give an even --hidden")
        if args.tie_embeddings and args.embed_size != args.hidden:
            raise D2LRNNError("--tie-embeddings makes the decoder's embedding its output layer's weights, "
                              f"so --embed-size ({args.embed_size}) must equal --hidden ({args.hidden}): "
                              "give them the same value")

    def names_a_file(self, key, value):
        return key == "pairs" and value is not None

    def info(self, path, follow_symlinks=True):
        return seq2seq_checkpoint_info(path, follow_symlinks)

    def check_resumed(self, args, path, info):
        seconds = (info["history"].get("seconds") or [0.0])[-1]
        if args.minutes and isinstance(seconds, (int, float)) and seconds >= args.minutes * 60:
            raise D2LRNNError(f"the run in {path} has already trained {seconds / 60:.3g} of its "
                              f"{args.minutes:g} minutes: pass --minutes M with M > {seconds / 60:.3g} to "
                              "train it further")

    def read(self, args):
        """The pairs, read (NumPy only, so bad pairs fail before a framework is imported)."""
        if args.pairs is not None and not pathlib.Path(args.pairs).is_file():
            what = "is a folder" if pathlib.Path(args.pairs).is_dir() else "does not exist"
            raise DataError(f"pairs file '{args.pairs}' {what}: pass a text file of 'source<TAB>target' "
                            "lines, or leave out --pairs for the bundled English-French pairs")
        try:
            return load_data_nmt_split(args.batch_size, args.num_steps, args.num_examples, args.val_fraction,
                                       args.min_freq, args.seed, args.pairs)
        except DataError as err:  # name the file the problem is in, if the message does not
            if args.pairs is None or str(args.pairs) in str(err):
                raise
            raise DataError(f"--pairs {args.pairs}: {err}") from None

    def data(self, args, early):
        train_iter, val_iter, src_vocab, tgt_vocab = early
        shapes = parameter_shapes({"cell": "gru", "src_vocab_size": len(src_vocab),
                                   "tgt_vocab_size": len(tgt_vocab), "embed_size": args.embed_size,
                                   "num_hiddens": args.hidden, "num_layers": args.num_layers,
                                   "dropout": args.dropout, "reset_after": True,
                                   "attention": bool(args.attention),
                                   "tie_embeddings": bool(args.tie_embeddings),
                                   "bidirectional": bool(args.bidirectional)})
        tokens = args.batch_size * args.num_steps  # per batch, in the encoder and in the decoder
        need = training_bytes(sum(math.prod(shape) for shape in shapes.values()), args.optimizer, "gru",
                              2 * tokens * args.hidden * args.num_layers, tokens * len(tgt_vocab))
        refuse_too_large(need, f"--hidden {args.hidden} with --embed-size {args.embed_size}, --batch-size "
                               f"{args.batch_size} and --num-steps {args.num_steps}",
                         "--hidden, --embed-size, --batch-size or --num-steps")
        ops.manual_seed(args.seed)
        return types.SimpleNamespace(train_iter=train_iter, val_iter=val_iter, src_vocab=src_vocab,
                                     tgt_vocab=tgt_vocab)

    def digest(self, data):
        return _pairs_digest(data.train_iter, data.val_iter)

    def stem(self, args, backend):
        return f"translate-{backend}-{args.model}"

    def summary(self, args, backend, data):
        epochs = f"{args.epochs} epoch{'s' * (args.epochs != 1)}"
        budget = f", at most {args.minutes:g} minutes" if args.minutes else ""
        rates = (("dropout", args.dropout), ("embedding dropout", args.embed_dropout),
                 ("output dropout", args.output_dropout))
        dropout = "".join(f", {what} {p:g}" for what, p in rates if p)
        smoothing = f", label smoothing {args.label_smoothing:g}" if args.label_smoothing else ""
        training = f"{self.optimizer_summary(args)}, clip {args.clip:g}{smoothing}"
        return (f"pairs {pairs_name(args.pairs)}: {data.train_iter.num_pairs:,} training / "
                f"{data.val_iter.num_pairs:,} validation pairs, vocabularies {len(data.src_vocab):,} source "
                f"/ {len(data.tgt_vocab):,} target words | backend {backend} | "
                f"{translation_model_name(args)} ({args.model}), "
                f"{'tied ' * bool(args.tie_embeddings)}embedding {args.embed_size}, {args.hidden} "
                f"hidden units{dropout} | {training} | batch "
                f"{args.batch_size} x {args.num_steps} steps, {epochs}{budget}")

    def build(self, args, data):
        return make_seq2seq(len(data.src_vocab), len(data.tgt_vocab), args.embed_size, args.hidden,
                            args.num_layers, args.dropout, rnn=args.model, device=args.placement,
                            embed_dropout=args.embed_dropout, output_dropout=args.output_dropout,
                            attention=bool(args.attention), tie_embeddings=bool(args.tie_embeddings),
                            bidirectional=bool(args.bidirectional))

    def load_run(self, path, args, data, digest):
        net, saved_src, saved_tgt, info = load_seq2seq_checkpoint(path, args.placement, follow_symlinks=False)
        if saved_src != data.src_vocab or saved_tgt != data.tgt_vocab or \
                info["hparams"].get("pairs_sha1") != digest:
            raise DataError(f"the pairs {args.pairs or pairs_name(None)} are not the pairs the run in "
                            f"{path.parent} was trained on (they changed since): resume needs the same "
                            "pairs; start a new run instead")
        history = info["history"]
        if any(len(history.get(key, ())) != len(history["epoch"]) for key in TRANSLATE_CSV_FIELDS):
            raise CheckpointError(f"{path} holds a damaged resume state (history and epoch disagree): start "
                                  "a new run")
        return net, history, info["resume"]

    def updater(self, args, net, data):
        return make_seq2seq_updater(net, data.tgt_vocab, args.lr, args.clip, args.optimizer,
                                    schedule=data.schedule, average=args.ema,
                                    label_smoothing=args.label_smoothing, precision=args.precision)

    def hparams(self, args, backend, digest, data):
        hparams = {key: getattr(args, key) for key in TRANSLATE_DEFAULTS}
        if args.pairs is not None:
            hparams["pairs"] = str(pathlib.Path(args.pairs).resolve())
        hparams.update(backend=backend, token="word", pairs_sha1=digest)
        return hparams

    def title(self, args, backend):
        return f"{pairs_name(args.pairs)}, {backend}, {translation_model_name(args)} ({args.model})"

    def writer(self, net, data, hparams, history, resume=None, opt_state=None):
        return seq2seq_checkpoint_writer(net, data.src_vocab, data.tgt_vocab, hparams["num_steps"], hparams,
                                         history, resume, opt_state)

    def best(self, history, i):
        """A higher validation BLEU; on a tie a lower validation loss (early on, or on short sentences,
        BLEU-4 is often 0 for several epochs)."""
        return history["val_bleu"][i], -history["val_loss"][i]

    def best_text(self, history, i):
        return f"validation BLEU-4 {history['val_bleu'][i]:.3f}"

    def plot_writer(self, history, data, title, best_epoch):
        return translation_plot_writer(history, title, best_epoch)

    def fit(self, args, net, data, history, on_epoch, updater):
        return train_encoder_decoder(net, data.train_iter, args.lr, args.epochs, data.tgt_vocab,
                                     clip=args.clip, label_smoothing=args.label_smoothing,
                                     val_iter=data.val_iter, progress=not args.no_progress,
                                     plot=False, history=history, on_epoch=on_epoch, updater=updater,
                                     time_budget=args.minutes * 60 if args.minutes else None)

    def stopped_early(self, args, history):
        return (f"stopped after epoch {history['epoch'][-1]} of {args.epochs}: the {args.minutes:g} "
                "minutes of --minutes are used")

    def report(self, args, out, data, epochs_done):
        """The best epoch's losses and validation BLEU (greedy and beam search, from the saved best model),
        and its translations of the book's four sentences."""
        net, src_vocab, tgt_vocab, info = load_seq2seq_checkpoint(out / "model.npz", args.placement)
        history, val_iter = info["history"], data.val_iter
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


TRANSLATE_TRAIN = register(TranslationCommand())
