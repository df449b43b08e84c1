"""The book's translation budget on every backend, over several seeds; recorded in bench/RESULTS.md.

    python bench/seq2seq_quality.py                    # seeds 0-4 on every backend, ~15 minutes
    python bench/seq2seq_quality.py --seeds 0 --backends numpy torch

The book's settings (embedding 32, hidden 32, 2 GRU layers, dropout 0.1, batch 64, 10 steps, Adam
lr 0.005, 300 epochs on the first 600 pairs), trained once per (backend, seed) in a fresh process
of the backend's tox environment, two at a time (MXNet, the slowest, in a lane of its own). The
score is the book's check: the mean BLEU (k = 2, the book's weights) of the greedy translations of
its four sentences. Target (issue 14): at least 0.8 on every backend.

The all-pairs run (corpus BLEU-4 of greedy and beam search on a held-out split) is
``d2lrnn translate-train``'s own report; its command and numbers are in bench/RESULTS.md.
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.results import write_section  # noqa: E402

BACKENDS = ("numpy", "torch", "tensorflow", "mxnet")
BOOK = {"embed_size": 32, "num_hiddens": 32, "num_layers": 2, "dropout": 0.1, "batch_size": 64,
        "num_steps": 10, "lr": 0.005, "epochs": 300, "num_examples": 600}
TARGET = 0.8


#: The model's options beyond the book's (``d2l.make_seq2seq`` keywords) and their command-line flags.
MODEL_FLAGS = {"embed_dropout": 0.0, "output_dropout": 0.0, "attention": False, "bidirectional": False,
               "tie_embeddings": False}


def run_book(rnn, seed, label_smoothing=0.0, model=None):
    """One run on the active backend: train with the book's budget (and ``label_smoothing``, and ``model``:
    :data:`MODEL_FLAGS` keywords for the model), score the four sentences."""
    import d2lrnn as d2l
    from d2lrnn.seq2seq.train import book_bleu

    c = BOOK
    d2l.manual_seed(seed)
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(c["batch_size"], c["num_steps"], c["num_examples"])
    model = dict(MODEL_FLAGS, **(model or {}))
    net = d2l.make_seq2seq(len(src_vocab), len(tgt_vocab), c["embed_size"], c["num_hiddens"],
                           c["num_layers"], c["dropout"], rnn=rnn, **model)
    start = time.perf_counter()
    history = d2l.train_seq2seq(net, train_iter, c["lr"], c["epochs"], tgt_vocab, progress=False,
                                verbose=False, plot=False, return_history=True,
                                label_smoothing=label_smoothing)
    seconds = time.perf_counter() - start
    mean, preds = book_bleu(net, src_vocab, tgt_vocab, c["num_steps"])
    return {"backend": d2l.backend_name(), "rnn": rnn, "seed": seed, "label_smoothing": label_smoothing,
            **model, "loss": history["train_loss"][-1],
            "bleu": mean, "translations": preds, "seconds": seconds}


def in_env(backend, rnn, seed, label_smoothing=0.0, model=None):
    """:func:`run_book` in a fresh process of ``backend``'s tox environment (one thread); its result."""
    python = ROOT / ".tox" / backend / "bin" / "python"
    env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1",
               MXNET_CPU_WORKER_NTHREADS="1", TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    out = subprocess.run([str(python), __file__, "--child", "--rnn", rnn, "--seeds", str(seed),
                          "--label-smoothing", str(label_smoothing), "--model", json.dumps(model or {})],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_all(backends, seeds, rnn, label_smoothing=0.0, model=None):
    """Every (backend, seed), MXNet's runs in one lane and the others in a second."""
    lanes = [[(b, s) for b in backends if b == "mxnet" for s in seeds],
             [(b, s) for b in backends if b != "mxnet" for s in seeds]]

    def lane(jobs):
        results = []
        for backend, seed in jobs:
            results.append(in_env(backend, rnn, seed, label_smoothing, model))
            print(json.dumps(results[-1]), flush=True)
        return results

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lane, [jobs for jobs in lanes if jobs]))
    results = [r for lane_results in done for r in lane_results]
    order = {b: i for i, b in enumerate(backends)}
    return sorted(results, key=lambda r: (order[r["backend"]], r["seed"]))


def report(results, seeds, rnn, label_smoothing=0.0, flags=""):
    """The section's text; ``flags`` are the command's model flags (``--attention``, the dropouts), if any."""
    first = seeds[0]
    smoothing = f" --label-smoothing {label_smoothing:g}" if label_smoothing else ""
    title = (f"## The book's translation budget with `{(smoothing + flags).strip()}` (issue 34)"
             if label_smoothing or flags else "## The book's translation budget on every backend (issue 14)")
    lines = [title, "",
             f"`python bench/seq2seq_quality.py --seeds {' '.join(map(str, seeds))}{smoothing}{flags}`: "
             f"embedding 32, hidden 32, 2 GRU layers ({rnn}, the reset-after form), dropout 0.1, batch 64, "
             "10 steps, "
             "Adam lr 0.005, 300 epochs over the first 600 pairs, greedy decoding; the score is the mean "
             "BLEU (k = 2, the book's weights) of the book's four sentences. One thread per run, two runs "
             "at a time.", "",
             f"Seed {first}:", "",
             "| backend | mean BLEU | >= 0.8 | go . | i lost . | he's calm . | i'm home . | final loss per "
             "token | training time |", "|" + "---|" * 9]
    for r in (r for r in results if r["seed"] == first):
        met = "yes" if r["bleu"] >= TARGET else "**no**"
        lines.append(f"| {r['backend']} | {r['bleu']:.3f} | {met} | {' | '.join(r['translations'])} | "
                     f"{r['loss']:.3f} | {r['seconds']:.0f} s |")
    if len(seeds) > 1:
        lines += ["", f"Every seed ({rnn}):", "",
                  "| backend | " + " | ".join(f"seed {s}" for s in seeds)
                  + " | runs >= 0.8 | mean over seeds |",
                  "|" + "---|" * (len(seeds) + 3)]
        for backend in dict.fromkeys(r["backend"] for r in results):
            runs = [r for r in results if r["backend"] == backend]
            scores = [r["bleu"] for r in runs]
            lines.append(f"| {backend} | " + " | ".join(f"{b:.3f}" for b in scores)
                         + f" | {sum(b >= TARGET for b in scores)} of {len(scores)} | "
                         f"{sum(scores) / len(scores):.3f} |")
        misses = [f"{r['backend']} seed {r['seed']}: {' / '.join(r['translations'])}" for r in results
                  if r["bleu"] < TARGET]
        if misses:
            lines += ["", "The runs below 0.8 translated the four sentences as: " + "; ".join(misses) + "."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--rnn", default="scratch", choices=("scratch", "concise"))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--label-smoothing", type=float, default=0.0,
                        help="train with this label smoothing (its own section in bench/RESULTS.md)")
    parser.add_argument("--embed-dropout", type=float, default=0.0,
                        help="the model's dropout on the embedded words (the book's: none)")
    parser.add_argument("--output-dropout", type=float, default=0.0,
                        help="the model's dropout before the decoder's output layer (the book's: none)")
    parser.add_argument("--attention", action="store_true",
                        help="the decoder with global attention over the source (the book's: none)")
    parser.add_argument("--bidirectional", action="store_true",
                        help="an encoder that reads the sentence both ways (the book's: one way)")
    parser.add_argument("--tie-embeddings", action="store_true",
                        help="the decoder's output layer tied to its embedding (the book's: its own)")
    parser.add_argument("--model", help=argparse.SUPPRESS)  # the child's model options, as JSON
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    if args.child:
        model = json.loads(args.model or "{}")
        print(json.dumps(run_book(args.rnn, args.seeds[0], args.label_smoothing, model)))
        return
    model = {name: getattr(args, name) for name in MODEL_FLAGS}
    results = run_all(args.backends, args.seeds, args.rnn, args.label_smoothing, model)
    flags = "".join(f" --{name.replace('_', '-')}" + ("" if value is True else f" {value:g}")
                    for name, value in model.items() if value)
    body = report(results, args.seeds, args.rnn, args.label_smoothing, flags)
    print(body)
    if not args.no_write:  # the hand-written sections of these settings (seq2seq-book-smoothing, ...) stay
        name = "seq2seq-book" if not (args.label_smoothing or flags) else "seq2seq-book-settings"
        write_section(name, body)


if __name__ == "__main__":
    main()
