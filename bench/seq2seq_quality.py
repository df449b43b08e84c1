"""Translation quality of the seq2seq model, recorded in bench/RESULTS.md.

    python bench/seq2seq_quality.py book     # the book's budget on every backend (~1-3 min each)
    python bench/seq2seq_quality.py full     # all pairs, a 15-minute budget, greedy vs beam 4

``book``: the book's settings (embedding 32, hidden 32, 2 layers, dropout 0.1, batch 64, 10 steps,
Adam lr 0.005, 300 epochs on the first 600 pairs) on each backend, each in a fresh process of its
tox environment; the score is the mean BLEU (k = 2, the book's weights) of the four sentences
the book translates. Target: at least 0.8 on every backend.

``full``: all pairs with 10% held out (seed 0), trained for at most ``--minutes`` on one backend,
then the corpus BLEU-4 (uniform weights) of greedy search and of beam search (k = 4) on the
held-out pairs. Target: beam search no lower than greedy.
"""

import argparse
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
FULL = {"embed_size": 256, "num_hiddens": 256, "num_layers": 2, "dropout": 0.2, "batch_size": 64,
        "num_steps": 10, "lr": 0.002, "minutes": 15.0, "epochs": 1000}


def _model(d2l, src_vocab, tgt_vocab, c, rnn):
    return d2l.make_seq2seq(len(src_vocab), len(tgt_vocab), c["embed_size"], c["num_hiddens"],
                            c["num_layers"], c["dropout"], rnn=rnn)


def run_book(rnn, seed):
    """One backend (the active one): train with the book's budget, score the four sentences."""
    import d2lrnn as d2l
    from d2lrnn.seq2seq.train import book_bleu

    c = BOOK
    d2l.manual_seed(seed)
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(c["batch_size"], c["num_steps"], c["num_examples"])
    net = _model(d2l, src_vocab, tgt_vocab, c, rnn)
    start = time.perf_counter()
    history = d2l.train_seq2seq(net, train_iter, c["lr"], c["epochs"], tgt_vocab, progress=False,
                                verbose=False, plot=False)
    seconds = time.perf_counter() - start
    mean, preds = book_bleu(net, src_vocab, tgt_vocab, c["num_steps"])
    return {"backend": d2l.backend_name(), "rnn": rnn, "loss": history["train_loss"][-1], "bleu": mean,
            "translations": preds, "seconds": seconds}


def run_full(rnn, seed, minutes):
    """The active backend: all pairs, at most ``minutes`` of training, greedy and beam-4 BLEU-4."""
    import d2lrnn as d2l
    from d2lrnn.data.translation import load_data_nmt_split
    from d2lrnn.seq2seq.train import book_bleu, evaluate_bleu

    c = FULL
    d2l.manual_seed(seed)
    train_iter, val_iter, src_vocab, tgt_vocab = load_data_nmt_split(c["batch_size"], c["num_steps"],
                                                                     seed=seed)
    net = _model(d2l, src_vocab, tgt_vocab, c, rnn)
    history = d2l.train_seq2seq(net, train_iter, c["lr"], c["epochs"], tgt_vocab, val_iter=val_iter,
                                bleu_every=5, progress=False, verbose=False, plot=False,
                                time_budget=60 * minutes)
    scores = {f"beam{k}": evaluate_bleu(net, val_iter, tgt_vocab, beam_size=k) for k in (1, 2, 4)}
    book_mean, preds = book_bleu(net, src_vocab, tgt_vocab, c["num_steps"], beam_size=4)
    return {"backend": d2l.backend_name(), "rnn": rnn, "epochs": history["epoch"][-1],
            "seconds": history["seconds"][-1], "train_loss": history["train_loss"][-1],
            "val_loss": history["val_loss"][-1], "tokens_per_sec": history["tokens_per_sec"][-1],
            "train_pairs": train_iter.num_pairs, "val_pairs": val_iter.num_pairs,
            "src_vocab": len(src_vocab), "tgt_vocab": len(tgt_vocab), **scores,
            "book_beam4": book_mean, "book_translations": preds,
            "val_bleu_curve": [(e, b) for e, b in zip(history["epoch"], history["val_bleu"])
                               if b is not None]}


def in_env(backend, args, threads=1):
    """Run this script's ``--child`` mode in ``backend``'s tox environment with ``threads`` threads; its
    JSON result."""
    python = ROOT / ".tox" / backend / "bin" / "python"
    n = str(threads)
    env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=n, MKL_NUM_THREADS=n,
               TF_NUM_INTRAOP_THREADS=n, TF_NUM_INTEROP_THREADS=n, MXNET_CPU_WORKER_NTHREADS=n,
               TF_CPP_MIN_LOG_LEVEL="3", MPLBACKEND="Agg")
    out = subprocess.run([str(python), __file__, "--child", *args], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def book_table(results):
    lines = ["| backend | model | mean BLEU (k=2, book weights) | >= 0.8 | go . | i lost . | he's calm . | "
             "i'm home . | final loss per token | training time |", "|" + "---|" * 10]
    for r in results:
        t = r["translations"]
        met = "yes" if r["bleu"] >= 0.8 else "**no**"
        lines.append(f"| {r['backend']} | {r['rnn']} | {r['bleu']:.3f} | {met} | {' | '.join(t)} | "
                     f"{r['loss']:.3f} | {r['seconds']:.0f} s |")
    return "\n".join(lines)


def full_text(r, command):
    better = r["beam4"] >= r["beam1"]
    curve = ", ".join(f"{e}: {b:.3f}" for e, b in r["val_bleu_curve"])
    return "\n".join([
        f"## Translation on all pairs (issue 14): {r['backend']}, {r['rnn']}, "
        f"{FULL['minutes']:g}-minute budget",
        "",
        f"`{command}`: {r['train_pairs']:,} training and {r['val_pairs']:,} held-out pairs (seed 0), "
        f"vocabularies {r['src_vocab']:,} English / {r['tgt_vocab']:,} French words (min_freq 2); embedding "
        f"{FULL['embed_size']}, {FULL['num_layers']} GRU layers of {FULL['num_hiddens']}, "
        f"dropout {FULL['dropout']}, "
        f"batch {FULL['batch_size']}, {FULL['num_steps']} steps, Adam lr {FULL['lr']}. {r['epochs']} epochs "
        f"in {r['seconds'] / 60:.1f} minutes ({r['tokens_per_sec']:,.0f} target tokens/s in the last); "
        "final loss "
        f"per token {r['train_loss']:.3f} (training), {r['val_loss']:.3f} (held out).",
        "",
        "| decoding | corpus BLEU-4 on the held-out pairs |",
        "|---|---|",
        f"| greedy | {r['beam1']:.4f} |",
        f"| beam search, k = 2 | {r['beam2']:.4f} |",
        f"| beam search, k = 4 | {r['beam4']:.4f} |",
        "",
        f"Target: beam search (k = 4) scores no lower than greedy: {'met' if better else '**not met**'} "
        f"({r['beam4']:.4f} vs {r['beam1']:.4f}). Greedy BLEU-4 on the held-out pairs during training "
        f"(epoch: BLEU): {curve}. The book's four sentences with beam 4: "
        + "; ".join(r["book_translations"]) + f" (mean BLEU {r['book_beam4']:.3f}).",
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("book", "full"))
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    parser.add_argument("--rnn", default="scratch", choices=("scratch", "concise"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, default=FULL["minutes"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    args = parser.parse_args()
    if args.child:
        result = run_book(args.rnn, args.seed) if args.what == "book" else run_full(args.rnn, args.seed,
                                                                                   args.minutes)
        print(json.dumps(result))
        return
    common = ["--rnn", args.rnn, "--seed", str(args.seed), "--minutes", str(args.minutes)]
    if args.what == "book":
        results = []
        for backend in args.backends:
            results.append(in_env(backend, ["book", *common]))
            print(json.dumps(results[-1]), flush=True)
        body = ("## The book's budget on every backend (issue 14)\n\n`python bench/seq2seq_quality.py book`: "
                "embedding 32, hidden 32, 2 GRU layers, dropout 0.1, batch 64, 10 steps, Adam lr 0.005, "
                f"300 epochs over the first 600 pairs, seed {args.seed}, greedy decoding.\n\n"
                + book_table(results))
        name = "seq2seq-book"
    else:
        FULL["minutes"] = args.minutes
        result = in_env(args.backends[0], ["full", *common], threads=2)  # the whole 2-core machine
        print(json.dumps(result), flush=True)
        command = f"python bench/seq2seq_quality.py full --backends {args.backends[0]} --rnn {args.rnn}"
        body, name = full_text(result, command), "seq2seq-full"
    print(body)
    if not args.no_write:
        write_section(name, body)


if __name__ == "__main__":
    main()
