"""d2lrnn's figures against the book's package over several seeds on both sides (d2l-en 1.0).

``bench/book_check.py --save`` keeps one run (one seed) of either package. One seed per side cannot
decide a 5% bar where the book's own package moves by 8 to 30% from one seed to the next (the sequence
section's noisy data, seq2seq's 640 sentence pairs): this compares the means over seeds instead, and
gives the ratio of means with its uncertainty (two standard errors, from the spread of each side):

    python bench/book_check.py --edition en --face book --reference /work/ref --columns torch mxnet \\
        --sections sequence deep-rnn seq2seq --seed 2 --save /tmp/book_seed2.json     # ... seeds 0 to 3
    python bench/book_check.py --edition en --columns torch mxnet --sections sequence deep-rnn seq2seq \\
        --seed 0 --save /tmp/d2lrnn_seed0.json                                         # ... seeds 0 to 3
    python bench/book_fidelity.py --book /tmp/book_seed*.json --ours /tmp/d2lrnn_seed*.json [--write]

``--write`` puts the table into bench/RESULTS.md as section ``book-fidelity-d2l-en``.
"""

import argparse
import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.book_check import TOLERANCE, fidelity, number  # noqa: E402
from bench.results import write_section  # noqa: E402


def load(paths, face):
    """The saved runs in ``paths`` (each ``{section: {env: ...}}``), refusing one of the other package."""
    runs = []
    for path in paths:
        saved = json.loads(pathlib.Path(path).read_text())
        if saved.get("face") != face or saved.get("edition") != "d2l-en":
            raise SystemExit(f"{path} is a run of face {saved.get('face')!r}, edition "
                             f"{saved.get('edition')!r}: expected {face!r}, 'd2l-en'")
        runs.append((saved.get("seed"), saved["runs"]))
    return runs


def compare(book, ours):
    """``[(section, env, fit, label, book values, our values)]`` for every figure both sides have."""
    rows = {}
    for _, run in ours:
        for section, env, fit, label, values, this in fidelity(run, [r for _, r in book]):
            key = (section, env, fit, label)
            rows.setdefault(key, (values, []))[1].append(this)
    return [(*key, values, [v for v in these if v is not None]) for key, (values, these) in rows.items()]


def mean_and_relative_error(values):
    """The mean and its standard error over the mean (0 for one value)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values)) / abs(mean)


def table(rows, book_seeds, our_seeds):
    lines = [f"Seeds: the book's d2l 1.0.3 {spans(book_seeds)}; d2lrnn {spans(our_seeds)}. Each side's mean "
             "over its seeds (range in brackets); the "
             "ratio of the means with two standard errors (from both sides' spreads); *within 5%* when the "
             "ratio is, *consistent* when the 5% band overlaps the ratio's two-standard-error interval; "
             "*runs*: how many seeds each side has for the row (book / d2lrnn).", "",
             "| section | env | fit | figure | runs | book's d2l | d2lrnn | ratio of means | within 5% |",
             "|---" * 9 + "|"]
    for section, env, fit, label, book_values, our_values in rows:
        if not book_values or not our_values:
            continue
        b, b_err = mean_and_relative_error(book_values)
        o, o_err = mean_and_relative_error(our_values)
        ratio, err = o / b, 2 * math.sqrt(b_err ** 2 + o_err ** 2) * o / b
        if abs(ratio - 1) <= TOLERANCE:
            verdict = "yes"
        elif abs(ratio - 1) - err <= TOLERANCE:
            verdict = "consistent"
        else:
            verdict = "**no**"
        lines.append(f"| {section} | {env} | {fit} | {label} | {len(book_values)} / {len(our_values)} "
                     f"| {span(book_values)} | {span(our_values)} "
                     f"| {ratio:.3f} ± {err:.3f} | {verdict} |")
    return "\n".join(lines)


def span(values):
    mean = sum(values) / len(values)
    return number(mean) + (f" ({number(min(values))} to {number(max(values))})" if len(values) > 1 else "")


def spans(seeds):
    """``[0, 1, 2, 5]`` as ``0 to 2, 5``: runs of consecutive integer seeds written by their ends."""
    runs = []
    for seed in seeds:
        last = runs[-1][-1] if runs else None
        if isinstance(seed, int) and isinstance(last, int) and seed == last + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(str(run[0]) if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs)


def seeds_of(runs):
    """The seeds of saved runs, each once, in order."""
    return sorted({seed for seed, _ in runs}, key=lambda seed: (seed is None, seed))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book", nargs="+", required=True, type=pathlib.Path,
                        help="saved runs of the book's package (book_check.py --face book --save)")
    parser.add_argument("--ours", nargs="+", required=True, type=pathlib.Path,
                        help="saved runs of d2lrnn (book_check.py --save)")
    parser.add_argument("--write", action="store_true", help="write the table into bench/RESULTS.md")
    args = parser.parse_args(argv)
    book, ours = load(args.book, "book"), load(args.ours, "d2lrnn")
    text = table(compare(book, ours), seeds_of(book), seeds_of(ours))
    print(text)
    if args.write:
        write_section("book-fidelity-d2l-en", "## d2l-en 1.0: d2lrnn against the book's package over seeds "
                      "(`bench/book_fidelity.py`)\n\n" + text + "\n")


if __name__ == "__main__":
    main()
