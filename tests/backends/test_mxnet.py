"""What only the MXNet backend does: on MXNet's CPU build it starts MXNet's engine as ``NaiveEngine``
(operations on the caller's thread) unless the user chose an engine, and leaves the variable unset after.

Checked in fresh interpreters (MXNet reads the setting once, when its engine starts), where mxnet is
installed. Which engine runs shows in where a ``Function``'s backward is called: on the caller's thread
under the naive engine, on a worker thread under the threaded one.
"""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import HANG_GUARD_SECONDS, ROOT

pytest.importorskip("mxnet", reason="the mxnet backend's own behaviour; mxnet is installed in the mxnet env")

SCRIPT = """
import json, os, sys, threading
import d2lrnn as d2l
d2l.set_backend("mxnet")
d2l.ones((1,))  # loads the backend, which imports MXNet
import mxnet as mx

threads = []


class Double(mx.autograd.Function):
    def forward(self, x):
        return x * 2

    def backward(self, dy):
        threads.append(threading.get_ident())
        return dy * 2


x = mx.nd.ones((2,))
x.attach_grad()
with mx.autograd.record():
    y = Double()(x)
y.backward()
mx.nd.waitall()
print(json.dumps({"backward_on_caller_thread": threads == [threading.get_ident()],
                  "grad": x.grad.asnumpy().tolist(), "variable": os.environ.get("MXNET_ENGINE_TYPE")}))
"""


def run_fresh(**env):
    full_env = {k: v for k, v in os.environ.items() if k != "MXNET_ENGINE_TYPE"}
    full_env.update(PYTHONPATH=str(ROOT), D2LRNN_BACKEND="mxnet", **env)
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=full_env,
                       cwd=ROOT, timeout=HANG_GUARD_SECONDS)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stderr


def test_the_cpu_build_runs_operations_on_the_callers_thread_and_leaves_no_variable_behind():
    result, stderr = run_fresh()
    assert result == {"backward_on_caller_thread": True, "grad": [2.0, 2.0], "variable": None}
    assert "start using engine" not in stderr  # MXNet's notice of the engine d2lrnn chose is not shown


def test_an_engine_the_user_chose_is_kept():
    result, stderr = run_fresh(MXNET_ENGINE_TYPE="ThreadedEnginePerDevice")
    assert result == {"backward_on_caller_thread": False, "grad": [2.0, 2.0],
                      "variable": "ThreadedEnginePerDevice"}
    assert "start using engine: ThreadedEnginePerDevice" in stderr  # MXNet's own notice of the user's choice
