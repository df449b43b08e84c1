"""Loading a backend and using it prints nothing: no framework log lines on stdout or stderr."""

import os
import subprocess
import sys

import pytest

import d2lrnn as d2l
from d2lrnn.backends import _common, _tflog
from tests.conftest import HANG_GUARD_SECONDS, ROOT

# Import, tensors, integer indices transposed and one-hot encoded, a matmul, the framework's RNN
# layer, and a compiled training step with value_and_grad: what a notebook's first cells do.
SCRIPT = """
import d2lrnn as d2l
d2l.set_backend(d2l.backend_name())
X = d2l.reshape(d2l.arange(10), (2, 5))
inputs = d2l.one_hot(d2l.transpose(X), 28)
d2l.one_hot(d2l.tensor([0, 2]), 5)
W = d2l.normal(0, 0.1, (28, 28))
d2l.matmul(d2l.reshape(inputs, (-1, 28)), W)
layer = d2l.rnn_layer(28, 4)
params = list(d2l.get_params(28, 4, d2l.cpu()))


def loss_fn(params, X, Y):
    state = d2l.init_rnn_state(d2l.shape(X)[0], 4, d2l.cpu())
    Y_hat, _ = d2l.rnn(d2l.transpose(X), state, params)
    return d2l.mean(d2l.softmax_cross_entropy(Y_hat, d2l.reshape(d2l.transpose(Y), (-1,))))


grad_fn = d2l.value_and_grad(loss_fn)


def step(params, X, Y):
    loss, grads = grad_fn(params, X, Y)
    return loss, [p - 0.1 * g for p, g in zip(params, grads)]


step = d2l.compile(step)
for _ in range(3):
    loss, params = step(params, X, (X + 1) % 28)
float(d2l.to_numpy(loss))
"""


def _clean_env():
    """This process's environment without the log settings a user may add (the defaults are tested)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env["D2LRNN_BACKEND"] = d2l.backend_name()
    return env


def test_import_and_ordinary_use_print_nothing():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=_clean_env(),
                       cwd=ROOT, timeout=HANG_GUARD_SECONDS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert r.stderr == "", f"{d2l.backend_name()} printed to stderr:\n{r.stderr}"


def test_native_stderr_filtered_drops_rejected_lines_only(capfd):
    with _common.native_stderr_filtered(lambda text: text.replace("noise\n", "")):
        os.write(2, b"noise\nkept\nnoise\n")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "kept\nafter\n"


def test_native_stderr_filtered_restores_the_descriptor_on_error(capfd):
    with pytest.raises(ImportError), _common.native_stderr_filtered(lambda text: text):
        os.write(2, b"context\n")
        raise ImportError("no such framework")
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "context\nafter\n"


LOADING = (
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "I0000 00:00:1.5 1 port.cc:153] oneDNN custom operations are on.\n"
    "a Python warning\n"
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    "E0000 00:00:1.6 1 util.cc:131] an error\n"
)


@pytest.mark.parametrize("level, expected", [
    (0, LOADING),  # the user asked for every log line
    (1, "a Python warning\n" + "".join(LOADING.splitlines(keepends=True)[3:])),
    (2, "a Python warning\n" + "".join(LOADING.splitlines(keepends=True)[3:])),
    (3, "a Python warning\n"),
])
def test_tensorflow_loading_lines_follow_the_log_level(level, expected):
    assert _tflog.at_level(LOADING, level) == expected


def test_tensorflow_log_level_defaults_to_errors_only_and_keeps_the_users(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    assert _tflog.log_level() == 2
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert _tflog.log_level() == 0


def test_integer_transpose_is_exact(backend):
    X = d2l.reshape(d2l.arange(24), (2, 3, 4))
    for axes in (None, (1, 0, 2), (2, 0, 1)):
        expected = d2l.to_numpy(X).transpose(axes)
        got = d2l.to_numpy(d2l.transpose(X, axes))
        assert got.dtype == expected.dtype and (got == expected).all()
