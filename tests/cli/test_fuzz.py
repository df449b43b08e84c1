"""The command line under random flags, values and corpora, as a careless or hostile user would type them.

Every run must end with exit 0, or with one line on stderr and exit 2 (a run that diverged too), and
never with a traceback or a warning. The corpora are random bytes: empty, binary,
one character, one huge line, mixed scripts. Sizes stay small so that a run that is accepted
trains in a moment.

What the fuzzer explores (parsing, checking and refusing what a user typed) is backend-free code, so its
150 examples run once, in the numpy env. What its accepted runs hand to a backend is pinned on every backend
by :func:`test_the_edge_values_end_as_on_numpy_on_every_backend`: the extremes of each drawn value, with the
exit code and the error each ends in.
"""

import contextlib
import gc
import io
import pathlib
import tempfile
import warnings

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import d2lrnn as d2l
from d2lrnn import cli

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: Values no option should accept, and some that only some options accept.
ODD = st.sampled_from(["", " ", "-1", "0", "-0", "nan", "inf", "-inf", "1e999", "x", "½", "١٢", "0x10", "--",
                       "-5.5", "1_0", " 3 ", "3\n", "\x00", "10000000", "99999999999999999999", "4294967296"])
ODD_TEXT = st.one_of(ODD, st.text(max_size=6))


def _is_count_above(text, limit):
    try:
        return int(text) > limit
    except ValueError:
        return False


def _odd_for(flag):
    """Odd values for ``flag``; a huge but valid count of epochs or characters would just run for hours."""
    if flag in ("--epochs", "--num-chars"):
        return ODD_TEXT.filter(lambda text: not _is_count_above(text, 100))
    return ODD_TEXT


def _small(low, high):
    return st.integers(low, high).map(str)


TRAIN_VALUES = {
    "--hidden": _small(1, 24),
    "--batch-size": _small(1, 8),
    "--num-steps": _small(1, 12),
    "--lr": st.sampled_from(["0.001", "0.5", "1", "30", "1e6", "1e38", "1e300"]),
    "--clip": st.sampled_from(["0.01", "1", "1e38"]),
    "--epochs": _small(1, 2),
    "--sampling": st.sampled_from(["random", "sequential"]),
    "--model": st.sampled_from(["scratch", "concise"]),
    "--max-tokens": st.sampled_from(["-1", "1", "50", "400", "3000"]),
    "--val-fraction": st.sampled_from(["0.01", "0.1", "0.5", "0.99"]),
    "--seed": st.sampled_from(["0", "7", "4294967295"]),
}
GENERATE_VALUES = {
    "--prefix": st.text(max_size=12),
    "--num-chars": _small(1, 40),
    "--temperature": st.sampled_from(["0", "0.5", "1e-30", "1e30"]),
    "--seed": st.sampled_from(["0", "3"]),
}

ODD_CORPORA = st.one_of(
    st.just(b""),
    st.binary(max_size=600),
    st.sampled_from("a é中\n").map(lambda c: c.encode() * 3),  # one character
    st.text(st.characters(codec="utf-8"), max_size=3000).map(str.encode),  # any scripts, any symbols
)
# Long enough for a training and a validation split at any accepted --num-steps and --batch-size
# (12 x 8 tokens), short enough that a run trains in a fraction of a second.
TEXT_CORPORA = st.one_of(
    st.integers(1, 8000).map(lambda n: b"abcdefghij klmnop " * (n // 18 + 1)),  # one huge line
    st.text("the quick brown fox\n", min_size=400, max_size=1500).map(str.encode),
    st.text("时间旅行者 the time traveller Путешественник\n", min_size=400, max_size=1500).map(str.encode),
)
CORPUS_BYTES = st.one_of(ODD_CORPORA, TEXT_CORPORA, TEXT_CORPORA)


#: A small training run; flags that follow override these. The book's 30 epochs of 512 units would take
#: minutes per example.
SMALL_TRAIN = ["train", "--epochs", "1", "--hidden", "8", "--batch-size", "4", "--num-steps", "8"]
#: What each generated command line gets wrong, if anything: half of them are meant to run.
SCENARIOS = ("valid", "valid", "valid", "odd value", "odd corpus", "odd path")


@st.composite
def command_lines(draw, folder):
    """A random ``d2lrnn`` command line over files in ``folder`` and the bytes of its corpus file."""
    scenario = draw(st.sampled_from(SCENARIOS), label="scenario")
    command = draw(st.sampled_from(["train", "train", "train", "generate"]))
    values = TRAIN_VALUES if command == "train" else GENERATE_VALUES
    flags = draw(st.lists(st.sampled_from(sorted(values)), min_size=scenario == "odd value", max_size=6,
                          unique=True))
    odd = draw(st.sampled_from(flags)) if flags and scenario == "odd value" else None
    argv = list(SMALL_TRAIN) if command == "train" else [command]
    for flag in flags:
        argv += [flag, draw(_odd_for(flag) if flag == odd else values[flag])]
    corpus = draw(ODD_CORPORA if scenario == "odd corpus" else TEXT_CORPORA)
    bad_path = scenario == "odd path"
    if command == "train":
        argv += ["--corpus", str(folder / "corpus.txt") if not bad_path else draw(st.sampled_from([
            str(folder / "missing.txt"), str(folder), "timemachine\n", "/dev/zero", ""]))]
        argv += draw(st.sampled_from([[], ["--out", str(folder / "run")],
                                      ["--out", str(folder / "run"), "--overwrite"]] if not bad_path else [
            ["--resume", str(folder / "run")], ["--out", str(folder / "corpus.txt")], ["--out", "/dev/null"],
            ["--resume", str(folder)], ["--out", str(folder), "--resume", str(folder)]]))
        argv.append("--no-progress")
    else:
        argv += ["--checkpoint", str(folder / "model.npz") if not bad_path else draw(st.sampled_from([
            str(folder / "corpus.txt"), str(folder), str(folder / "nothing.npz"), "/dev/zero"]))]
    return argv, corpus


@contextlib.contextmanager
def _inside(folder):
    import os

    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


@pytest.fixture(scope="module", autouse=True)
def _heap_frozen():
    """The heap of the earlier tests collected once, then frozen (``gc.freeze``) for this module's tests: the
    collection before each command line (``_run``) then scans only what this module made since. A full
    collection of the suite's heap before each of the fuzzer's 150 examples took a quarter of its time."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def _run(argv):
    # Garbage of earlier tests (the notebook tests' kernel client leaves sockets to the collector) and of
    # earlier command lines must not be collected while warnings are recorded: only warnings of this
    # command line count.
    gc.collect()
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        code = cli.main(argv)
    shown = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    return code, out.getvalue(), err.getvalue(), shown


def _run_in(folder, argv, corpus):
    """``argv`` run in ``folder``, beside ``corpus.txt`` holding ``corpus`` and a small ``model.npz``."""
    (folder / "corpus.txt").write_bytes(corpus)
    vocab = d2l.Vocab(list("abcdefghijklmnopqrstuvwxyz "))
    d2l.save_checkpoint(folder / "model.npz", d2l.RNNModelScratch(len(vocab), 4), vocab)
    with _inside(folder):  # default run folders go to a throw-away runs/
        return _run(argv)


@pytest.mark.once
@FUZZ
@given(data=st.data())
def test_any_command_line_ends_in_exit_0_or_one_error_line(data):
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        argv, corpus = data.draw(command_lines(folder), label="argv, corpus")
        code, out, err, shown = _run_in(folder, argv, corpus)
    event(f"exit {code}: {err.split(':')[2].strip()[:40] if code else argv[0]}")
    assert not shown, [str(w.message) for w in shown]
    if code == 0:
        assert err == "", err
        return
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith("d2lrnn"), err
    assert "Traceback" not in err


ENGLISH = b"the quick brown fox\n" * 60
MIXED = "时间旅行者 the time traveller Путешественник\n".encode() * 20
#: The fuzzer's extremes, each with how it ends on numpy: (settings, corpus, exit code, start of the error).
EDGES = [
    (["--hidden", "1", "--batch-size", "1", "--num-steps", "1", "--max-tokens", "50"], ENGLISH, 0, ""),
    (["--hidden", "1", "--batch-size", "1", "--num-steps", "1", "--max-tokens", "50"], MIXED, 0, ""),
    (["--hidden", "24", "--batch-size", "8", "--num-steps", "12", "--epochs", "2", "--model", "concise",
      "--sampling", "sequential", "--val-fraction", "0.5"], MIXED, 0, ""),
    (["--val-fraction", "0.01", "--max-tokens", "3000", "--seed", "4294967295", "--model", "concise"],
     ENGLISH, 0, ""),
    (["--lr", "1e300", "--clip", "1e38"], ENGLISH, 2,
     "the update at epoch 1, step 1 made parameters NaN or inf"),
    (["--lr", "1e38", "--clip", "0.01"], ENGLISH, 2, "training perplexity inf in epoch 1 is above 2 x the"),
    (["--val-fraction", "0.99"], ENGLISH, 2, "the training split of corpus"),
    (["generate", "--prefix", "x", "--num-chars", "1", "--temperature", "0"], ENGLISH, 0, ""),
    (["generate", "--prefix", "é中 x", "--num-chars", "40", "--temperature", "1e-30", "--seed", "0"],
     ENGLISH, 0, ""),
    (["generate", "--prefix", "the", "--num-chars", "40", "--temperature", "1e30", "--seed", "3"],
     ENGLISH, 0, ""),
]


@pytest.mark.parametrize("settings, corpus, code, error", EDGES)
def test_the_edge_values_end_as_on_numpy_on_every_backend(settings, corpus, code, error, tmp_path):
    if settings[0] == "generate":
        argv = settings + ["--checkpoint", str(tmp_path / "model.npz")]
    else:
        argv = SMALL_TRAIN + settings + ["--corpus", str(tmp_path / "corpus.txt"), "--no-progress"]
    got, out, err, shown = _run_in(tmp_path, argv, corpus)
    assert not shown, [str(w.message) for w in shown]
    assert got == code, (got, err)
    if code == 0:
        assert err == "" and out, err
    else:
        assert err.startswith("d2lrnn: error: " + error) and err.count("\n") == 1, err
