"""How ``d2lrnn train`` grows with the corpus: peak memory per character, time to the progress bar.

    python bench/bench_memory.py                 # 16 MB and 64 MB texts, about 6 minutes
    python bench/bench_memory.py --sizes 16 64 100

Each size is a text of that many MB (tiny Shakespeare repeated), trained for one epoch of a small
model (16 hidden units) by the command line in a fresh process on the active backend, with the
progress bar on. The same command on the bundled Time Machine (0.17 MB) gives the footprint of the
framework, the model and the plotting libraries; memory per character is the peak RSS above it,
divided by the characters read. Timings come from when each line of output arrives: the progress
bar's first line on stderr, the baselines' and the final table's lines on stdout.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = ROOT / "d2lrnn" / "data" / "tinyshakespeare.txt"


def make_text(folder, megabytes):
    """A text of ``megabytes`` MB: tiny Shakespeare repeated (cut at a line end)."""
    path = folder / f"text{megabytes}mb.txt"
    data = SOURCE.read_bytes()
    size = int(megabytes * 2**20)
    with open(path, "wb") as f:
        for _ in range(size // len(data)):
            f.write(data)
        rest = data[:size % len(data)]
        f.write(rest[:rest.rfind(b"\n") + 1])
    return path


def _watch(stream, marks, start, patterns):
    """Read ``stream`` to its end, noting the first time each pattern of ``patterns`` appears."""
    buffer = b""
    for chunk in iter(lambda: stream.read1(65536), b""):
        buffer = (buffer + chunk)[-4096:]
        for name, pattern in patterns.items():
            if name not in marks and pattern in buffer:
                marks[name] = time.perf_counter() - start


def run_train(corpus, out, backend, hidden=16):
    """One ``d2lrnn train`` in a fresh process: its peak RSS (MB) and when its stages were reached."""
    env = dict(os.environ, D2LRNN_BACKEND=backend, PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    cmd = [sys.executable, "-m", "d2lrnn", "train", "--corpus", str(corpus), "--epochs", "1",
           "--hidden", str(hidden), "--out", str(out), "--overwrite"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    marks = {}
    watchers = [threading.Thread(target=_watch, args=(proc.stdout, marks, start, {
                    "summary": b"characters, vocabulary", "baselines": b"n-gram validation perplexity",
                    "done": b"wall time"})),
                threading.Thread(target=_watch, args=(proc.stderr, marks, start, {"bar": b"train:"}))]
    for w in watchers:
        w.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for w in watchers:
        w.join()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed with exit code {os.waitstatus_to_exitcode(status)}")
    marks["exit"] = time.perf_counter() - start
    return usage.ru_maxrss / 1024, marks


def corpus_chars(corpus):
    import d2lrnn as d2l  # in this process only to count the characters the run read

    indices, _ = d2l.load_corpus(corpus)
    return len(indices)


def measure(sizes, backend):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        footprint, marks = run_train("timemachine", tmp / "run-small", backend)
        rows.append({"corpus": "timemachine", "megabytes": 0.17, "chars": corpus_chars("timemachine"),
                     "peak_rss_mb": footprint, **marks})
        for mb in sizes:
            print(f"{mb} MB ...", file=sys.stderr, flush=True)
            text = make_text(tmp, mb)
            peak, marks = run_train(text, tmp / f"run-{mb}", backend)
            rows.append({"corpus": f"{mb} MB text", "megabytes": mb, "chars": corpus_chars(text),
                         "peak_rss_mb": peak, **marks})
            text.unlink()
    for r in rows:
        above = (r["peak_rss_mb"] - footprint) * 2**20
        r["bytes_per_char"] = above / r["chars"] if r is not rows[0] else None
    return rows


def table(rows):
    lines = ["| corpus | characters | peak RSS (MB) | above footprint, bytes per character "
             "| start to corpus read (s) | n-gram baselines (s) | progress bar after (s) "
             "| epoch + validation (s) | total (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        per_char = "footprint" if r["bytes_per_char"] is None else f"{r['bytes_per_char']:.1f}"
        lines.append(f"| {r['corpus']} | {r['chars']:,} | {r['peak_rss_mb']:.0f} | {per_char} | "
                     f"{r['summary']:.1f} | {r['baselines'] - r['summary']:.1f} | {r['bar']:.1f} | "
                     f"{r['done'] - r['bar']:.0f} | {r['exit']:.0f} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="*", default=[16, 64], help="text sizes in MB")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON, not a table")
    args = parser.parse_args(argv)
    rows = measure([int(s) if float(s).is_integer() else s for s in args.sizes],
                   os.environ.get("D2LRNN_BACKEND", "numpy"))
    print(json.dumps(rows) if args.json else table(rows))
    return rows


if __name__ == "__main__":
    main()
