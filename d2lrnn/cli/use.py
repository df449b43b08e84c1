"""``d2lrnn generate`` and ``d2lrnn translate``: what a trained model does, loaded from its checkpoint on any
backend."""

from ..backends import backend_name, use_backend
from ..checks import MAX_ALPHA, MAX_BEAM, MAX_CHARS, MAX_PROMPT
from ..errors import CheckpointError, D2LRNNError
from ..lm import load_checkpoint, predict
from ..seq2seq import translate
from ..seq2seq.checkpoint import load_seq2seq_checkpoint
from ..seq2seq.decode import ALPHA
from .args import (
    HelpFormatter,
    add_device,
    at_most,
    backend_choice,
    beam_width,
    nonnegative_float,
    placement,
    positive_int,
    seed_value,
)
from .command import checkpoint_path
from .lm import TIME_MACHINE_PREFIXES


def add_generate_parser(commands):
    p = commands.add_parser(
        "generate", help="continue a prefix with a trained model",
        description="Load a checkpoint written by 'd2lrnn train' (on any backend) and continue a prefix: "
                    "greedy by default, sampled with --temperature.",
        formatter_class=HelpFormatter)
    p.add_argument("--checkpoint", required=True, metavar="FILE|DIR",
                   help="a model.npz written by 'd2lrnn train', or the run folder holding it")
    p.add_argument("--prefix", default=None, metavar="TEXT",
                   help="text to continue (default: the first sample prefix of the training run, "
                        "'time traveller' for the Time Machine)")
    p.add_argument("--num-chars", type=at_most(positive_int, MAX_CHARS), default=50, metavar="N",
                   help=f"characters to generate (at most {MAX_CHARS:,}, about a minute on a CPU)")
    p.add_argument("--temperature", type=nonnegative_float, default=0.0, metavar="T",
                   help="0: greedy; above 0: sample from softmax(logits / T)")
    p.add_argument("--seed", type=seed_value, default=None, metavar="S",
                   help="seed of the sampling (default: random)")
    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help="backend to run on (default: $D2LRNN_BACKEND, else numpy)")
    add_device(p)
    p.set_defaults(run=run_generate)


def run_generate(args):
    """``d2lrnn generate``: load a checkpoint on the chosen backend and print the continuation."""
    if args.prefix is not None and not args.prefix:
        raise D2LRNNError("--prefix is empty: give some text to continue, e.g. --prefix 'time traveller'")
    if args.prefix is not None and len(args.prefix) > MAX_PROMPT:
        raise D2LRNNError(f"--prefix has {len(args.prefix):,} characters, above the limit of {MAX_PROMPT:,}: "
                          "give a shorter prefix (its last characters set the state)")
    path = checkpoint_path(args.checkpoint)
    with use_backend(args.backend or backend_name()):
        net, vocab, info = load_checkpoint(path, placement(args.device))
        prefix = args.prefix if args.prefix is not None else saved_prefix(path, info["hparams"])
        print(predict(prefix, args.num_chars, net, vocab, temperature=args.temperature, seed=args.seed))
    return 0


def saved_prefix(path, hparams):
    """The first sample prefix a run recorded (the Time Machine's by default), checked: a checkpoint is not
    trusted to hold text where it should."""
    prefixes = hparams.get("prefixes", TIME_MACHINE_PREFIXES)
    if not isinstance(prefixes, list | tuple) or not prefixes or not isinstance(prefixes[0], str) or \
            not 0 < len(prefixes[0]) <= MAX_PROMPT:
        raise CheckpointError(f"checkpoint {path} is corrupt: its sample prefixes are not a list of texts: "
                              "pass --prefix TEXT, or save it again")
    return prefixes[0]


def add_translate_parser(commands):
    p = commands.add_parser(
        "translate", help="translate sentences with a trained model",
        description="Translate sentences with a model written by 'd2lrnn translate-train' (on any backend): "
                    "one translation a line, greedy by default, beam search with --beam. Words the model "
                    "has not seen read as <unk>.",
        formatter_class=HelpFormatter)
    p.add_argument("sentences", nargs="+", metavar="SENTENCE", help="a sentence to translate, quoted: 'go .'")
    p.add_argument("--checkpoint", required=True, metavar="FILE|DIR",
                   help="a model.npz written by 'd2lrnn translate-train', or the run folder holding it")
    p.add_argument("--beam", type=beam_width, default=1, metavar="K",
                   help=f"beam width (1: greedy search; at most {MAX_BEAM}, and as many as the decoder's "
                        "rows for the model's vocabulary fit in memory)")
    p.add_argument("--alpha", type=at_most(nonnegative_float, MAX_ALPHA), default=ALPHA, metavar="A",
                   help=f"beam search's length normalisation: a translation of L tokens scores log P / L^A "
                        f"(at most {MAX_ALPHA:g})")
    p.add_argument("--backend", type=backend_choice, default=None, metavar="NAME",
                   help="backend to run on (default: $D2LRNN_BACKEND, else numpy)")
    add_device(p)
    p.set_defaults(run=run_translate)


def run_translate(args):
    """``d2lrnn translate``: one translation a line, with a model loaded on the chosen backend."""
    for number, sentence in enumerate(args.sentences, 1):
        which = f"sentence {number}" if len(args.sentences) > 1 else "the sentence"
        if not sentence.strip():
            raise D2LRNNError(f"{which} to translate is empty: give at least one word, e.g. d2lrnn translate "
                              "'go .' --checkpoint FILE")
        if len(sentence) > MAX_PROMPT:
            raise D2LRNNError(f"{which} to translate has {len(sentence):,} characters, above the limit of "
                              f"{MAX_PROMPT:,}: split it into sentences")
    path = checkpoint_path(args.checkpoint)
    with use_backend(args.backend or backend_name()):
        net, src_vocab, tgt_vocab, info = load_seq2seq_checkpoint(path, placement(args.device))
        lines = translate(net, args.sentences, src_vocab, tgt_vocab, info["num_steps"], args.beam, args.alpha)
    for line in lines:
        print(line)
    return 0
