"""Every chapter notebook runs top to bottom in quick mode on the active backend.

Each ``chapters/*.md`` (Jupytext markdown) is converted to a notebook and executed by nbclient in
a fresh ``python3`` kernel with ``D2LRNN_QUICK=1``, the current ``D2LRNN_BACKEND`` and the working
tree on ``PYTHONPATH``. The test then appends one cell that prints, as JSON, the values a
notebook stored in its variables (``PROBES`` below), and checks them here, so the reader's
notebook carries no test code. A notebook without an entry in ``PROBES`` is still executed and
must still name its backend in its first output: adding a chapter is adding a file.
"""

import json
import math
import os
import pathlib
import sys

import jupytext
import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient

import d2lrnn

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
PACKAGE_DIR = pathlib.Path(d2lrnn.__file__).resolve().parent  # the d2lrnn under test
NOTEBOOKS = sorted(CHAPTERS.glob("*.md"))
EXPECTED = ("language-models-and-dataset", "rnn", "rnn-scratch", "rnn-concise")
MARKER = "@@d2lrnn-probe@@"
CELL_TIMEOUT = 300
MAX_OUTPUT_CHARS = 100_000  # text a quick-mode run may print in all: no progress-bar spam

# name -> {key: Python expression evaluated in the notebook's kernel after the last cell}
PROBES = {
    "language-models-and-dataset": {
        "num_chars": "len(char_vocab)",
        "ngram_ppl": "{str(n): p for n, p in ngram_ppl.items()}",
        "random_batches": "[[d2l.to_numpy(a).tolist() for a in b] for b in random_batches]",
        "sequential_batches": "[[d2l.to_numpy(a).tolist() for a in b] for b in sequential_batches]",
        "batch_type": "type(X).__module__",
    },
    "rnn": {
        "two_products": "d2l.to_numpy(two_products).tolist()",
        "one_product": "d2l.to_numpy(one_product).tolist()",
        "concat_diff": "concat_diff",
        "ppl_examples": "list(ppl_examples.values())",
        "uniform_ppl": "uniform_ppl",
        "vocab_size": "len(vocab)",
    },
    "rnn-scratch": {
        "forward_diff": "forward_diff",
        "grad_norms": "list(grad_norms)",
        # the largest difference between each clipped gradient and the gradient times theta / norm
        "clip_scaling_error": "max(float(np.abs(d2l.to_numpy(c) - d2l.to_numpy(g) * theta / grad_norms[0])"
                              ".max()) for c, g in zip(clipped, grads))",
        "history_seq": "history_seq",
        "history_random": "history_random",
        "prefix": "prefix",
        "num_preds": "num_preds",
        "generated": "[generated, generated_random, sampled]",
        "vocab_size": "len(vocab)",
    },
    "rnn-concise": {
        "same_function_diff": "same_function_diff",
        "history_concise": "history_concise",
        "history_scratch": "history_scratch",
        "prefix": "prefix",
        "num_preds": "num_preds",
        "generated": "[generated_concise, generated_scratch]",
        "comparison": "comparison",
    },
}


def _probe_cell(probes):
    items = ", ".join(f"{key!r}: {expr}" for key, expr in probes.items())
    return ("import json as _json, pathlib as _pathlib, sys as _sys\n"
            "_where = {'prefix_dir': _sys.prefix,\n"
            "          'package_dir': str(_pathlib.Path(d2l.__file__).resolve().parent)}\n"
            f"print({MARKER!r} + _json.dumps({{**_where, {items}}}))")


def _text(outputs):
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append(out["text"])
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
    return "".join(parts)


def _stderr(cells):
    """What each code cell wrote to stderr, one quoted entry per cell that did."""
    found = []
    for number, cell in enumerate(cells, 1):
        text = "".join(o["text"] for o in cell.outputs if o.get("output_type") == "stream"
                       and o.get("name") == "stderr")
        if text:
            found.append(f"code cell {number}: {text[:2000]!r}")
    return found


@pytest.fixture(scope="module")
def kernel_env():
    """The environment the kernels inherit: quick mode, this backend, and this d2lrnn first on the path."""
    env = dict(os.environ)
    env["D2LRNN_QUICK"] = "1"
    env["D2LRNN_BACKEND"] = os.environ.get("D2LRNN_BACKEND", "numpy")
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_DIR.parent)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def test_every_section_has_a_notebook():
    assert set(EXPECTED) <= {p.stem for p in NOTEBOOKS}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_in_quick_mode(path, kernel_env, monkeypatch):
    for key, value in kernel_env.items():
        monkeypatch.setenv(key, value)
    nb = jupytext.read(path)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", "jupytext header needs kernelspec"
    probes = PROBES.get(path.stem, {})
    nb.cells.append(nbformat.v4.new_code_cell(_probe_cell(probes)))
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(CHAPTERS)}})
    client.execute()  # a failing cell raises CellExecutionError: a broken notebook fails here

    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    first = _text(code_cells[0].outputs)
    assert f"backend: {kernel_env['D2LRNN_BACKEND']}" in first, first
    assert "quick mode: True" in first, first
    printed = sum(len(_text(c.outputs)) for c in code_cells[:-1])
    assert printed < MAX_OUTPUT_CHARS, f"{path.name} printed {printed} characters in quick mode"
    stderr = _stderr(code_cells)
    assert not stderr, f"{path.name} wrote to stderr (a saved notebook keeps it):\n" + "\n".join(stderr)

    line = next(s for s in _text(code_cells[-1].outputs).splitlines() if s.startswith(MARKER))
    values = json.loads(line[len(MARKER):])
    # The kernel ran in this environment, not in some other python3 on the machine.
    assert pathlib.Path(values.pop("prefix_dir")).resolve() == pathlib.Path(sys.prefix).resolve()
    assert values.pop("package_dir") == str(PACKAGE_DIR)  # and imported the d2lrnn under test
    check = CHECKS.get(path.stem)
    if check is not None:
        check(values)


# -- what each notebook must show --------------------------------------------------------------


def _rows_are_runs(batch, num_steps):
    X, Y = np.array(batch[0]), np.array(batch[1])
    assert X.shape == Y.shape == (2, num_steps)
    np.testing.assert_array_equal(Y, X + 1)  # labels: the inputs shifted by one token
    np.testing.assert_array_equal(np.diff(X, axis=1), 1)  # each row is a contiguous piece of 0..34
    return X


def check_language_models(v):
    assert v["num_chars"] == 28
    ppl = {int(n): p for n, p in v["ngram_ppl"].items()}
    assert ppl[1] < 28, "the unigram model must beat the uniform guess"
    assert ppl[1] > ppl[2] > ppl[3] > ppl[5] < ppl[8], ppl  # longer contexts help, up to a point
    assert 4 < ppl[5] < 7, ppl  # character 5-gram on the held-out tenth of the book
    assert v["batch_type"].split(".")[0] in {"numpy", "torch", "tensorflow", "mxnet"}

    starts = []
    for batch in v["random_batches"]:
        X = _rows_are_runs(batch, 5)
        starts += list(X[:, 0])
    offset = starts[0] % 5
    assert len(starts) == len(set(starts)) >= 4 and all(s % 5 == offset for s in starts)

    seq = [_rows_are_runs(b, 5) for b in v["sequential_batches"]]
    assert len(seq) >= 2
    for prev, nxt in zip(seq, seq[1:]):
        np.testing.assert_array_equal(nxt[:, 0], prev[:, -1] + 1)  # each row continues


def check_rnn(v):
    a, b = np.array(v["two_products"]), np.array(v["one_product"])
    assert a.shape == b.shape == (3, 4)
    # the same 5 float32 products summed in another order; entries may cancel to ~0: atol too
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert v["concat_diff"] < 1e-5
    V = v["vocab_size"]
    best, uniform, unigram, trigram, worst = v["ppl_examples"]
    assert best == pytest.approx(1.0)
    assert uniform == pytest.approx(V)
    assert 1 < trigram < unigram < V
    assert worst == math.inf
    assert v["uniform_ppl"] == pytest.approx(V, rel=1e-5)  # exp(log V) through float32 log-softmax


def _check_history(h):
    assert len(h["train_ppl"]) == len(h["val_ppl"]) == len(h["tokens_per_sec"]) >= 2
    assert all(math.isfinite(p) for p in h["train_ppl"] + h["val_ppl"])
    assert h["train_ppl"][-1] < h["train_ppl"][0], h["train_ppl"]
    assert h["val_ppl"][-1] < h["val_ppl"][0], h["val_ppl"]
    assert all(s > 0 for s in h["tokens_per_sec"])


def _check_generated(v, texts):
    """Each text is the prefix and then exactly num_preds generated characters, at least 5 of them
    letters (a model that learnt only the frequency of blanks writes nothing else)."""
    for text in texts:
        assert len(text) == len(v["prefix"]) + v["num_preds"], text
        assert text.startswith(v["prefix"])
        continuation = text[len(v["prefix"]):]
        letters = sum(c.isascii() and c.isalpha() for c in continuation)
        assert letters >= 5, f"{continuation!r} has {letters} letters: the model has learnt little but blanks"


def check_rnn_scratch(v):
    assert v["forward_diff"] < 1e-5
    before, after, theta = v["grad_norms"]
    # The notebook clips at half the norm: every gradient must shrink by exactly that factor (same
    # direction), to a global norm of theta. float32 norms of ~1e5 terms: rel 1e-4.
    assert after == pytest.approx(theta, rel=1e-4) and after < before
    assert v["clip_scaling_error"] < 1e-6 * before
    for h in (v["history_seq"], v["history_random"]):
        _check_history(h)
        assert h["train_ppl"][0] < v["vocab_size"]  # the first epoch already beats guessing
    _check_generated(v, v["generated"])


def check_rnn_concise(v):
    assert v["same_function_diff"] < 1e-5
    concise, scratch = v["history_concise"], v["history_scratch"]
    for h in (concise, scratch):
        _check_history(h)
    # Same function, same initial parameters, same minibatches: the same training run up to rounding.
    # Per-step float32 differences (~1e-6) compound over 15 epochs of updates: 1e-3 relative.
    np.testing.assert_allclose(concise["train_ppl"], scratch["train_ppl"], rtol=1e-3)
    np.testing.assert_allclose(concise["val_ppl"], scratch["val_ppl"], rtol=1e-3)
    assert set(v["comparison"]) == {"concise", "scratch"}
    for name, h in (("concise", concise), ("scratch", scratch)):
        row = v["comparison"][name]
        assert row["validation perplexity"] == h["val_ppl"][-1]
        assert row["tokens/s"] == pytest.approx(float(np.median(h["tokens_per_sec"])))  # the same numbers
    _check_generated(v, v["generated"])


CHECKS = {
    "language-models-and-dataset": check_language_models,
    "rnn": check_rnn,
    "rnn-scratch": check_rnn_scratch,
    "rnn-concise": check_rnn_concise,
}
