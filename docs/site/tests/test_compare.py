"""compare.py: which printed outputs agree across backends, and render.py's marks built on it."""

import compare
import nbformat
import render

# One 2x2 float32 tensor as each framework prints it (copied from each framework's repr).
EYE = {
    "numpy": "array([[1., 0.],\n       [0., 1.]], dtype=float32)",
    "torch": "tensor([[1., 0.],\n        [0., 1.]])",
    "tensorflow": "<tf.Tensor: shape=(2, 2), dtype=float32, numpy=\narray([[1., 0.],\n       [0., 1.]], "
                  "dtype=float32)>",
    "mxnet": "\n[[1. 0.]\n [0. 1.]]\n<NDArray 2x2 @cpu(0)>",
    "jax": "Array([[1., 0.],\n       [0., 1.]], dtype=float32)",
    "paddle": "Tensor(shape=[2, 2], dtype=float32, place=Place(cpu), stop_gradient=True,\n       [[1., 0.],\n"
              "        [0., 1.]])",
}


def test_the_same_tensor_printed_by_six_frameworks_agrees():
    assert compare.agree(EYE)
    assert {tuple(compare.tokens(t)) for t in EYE.values()} == {("1.", "0.", "0.", "1.")}


def test_a_changed_entry_is_a_difference():
    assert not compare.agree({**EYE, "jax": EYE["jax"].replace("[0., 1.]]", "[0., 2.]]")})


def test_numbers_agree_within_one_unit_of_the_coarser_last_digit():
    assert compare.same_token("0.12345678", "0.1235")  # numpy's 8 digits, torch's 4
    assert compare.same_token("13.7", "13.70") and compare.same_token("6.33", "6.34")
    assert not compare.same_token("13.70", "13.73")
    assert not compare.same_token("0.0e+00", "2.4e-07")  # a unit of 2.4e-07 is 1e-08, of 0.0e+00 none
    assert compare.same_token("1.0e-05", "1.1e-05") and not compare.same_token("1.0e-05", "1.2e-05")
    assert compare.same_token("9,000", "9000") and not compare.same_token("nan", "1.0")
    assert compare.same_token("1.", "1.0001") and not compare.same_token("1.", "2.")  # NumPy prints 1.0 as 1.
    assert not compare.same_token("13", "14") and not compare.same_token("time", "tame")


def test_timings_and_the_backends_name_are_not_compared():
    texts = {"numpy": "backend: numpy\nperplexity 13.7, 169,613 tokens/sec on cpu\ntrain: 3.7 s, tok/s 9,001",
             "torch": "backend: torch\nperplexity 13.7, 15,061 tokens/sec on cpu\ntrain: 13.0 s, tok/s 15"}
    assert compare.agree(texts)
    worse = {**texts, "torch": texts["torch"].replace("13.7", "13.9", 1)}
    assert not compare.agree(worse)
    assert compare.differing_lines(worse) == [{"numpy": "perplexity 13.7, 169,613 tokens/sec on cpu",
                                               "torch": "perplexity 13.9, 15,061 tokens/sec on cpu"}]


def test_devices_and_the_frameworks_module_names_are_not_compared():
    devices = {"numpy": "on cpu", "torch": "on cpu", "tensorflow": "on /CPU:0", "mxnet": "on cpu(0)",
               "jax": "on cpu:0", "paddle": "on Place(cpu)"}
    assert compare.agree({b: f"perplexity 13.7, 9,000 tokens/sec {d}" for b, d in devices.items()})
    modules = {"numpy": "numpy", "tensorflow": "tensorflow.python.framework.ops", "jax": "jaxlib._jax"}
    assert compare.agree({b: f"{m} (4, 10)" for b, m in modules.items()})
    assert not compare.agree({b: f"{m} (4, {b == 'jax' and 11 or 10})" for b, m in modules.items()})


def _stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def test_a_differing_cell_is_marked_with_its_lines_side_by_side():
    outputs = {"numpy": [_stream("loss 3.332\nsame line\n")], "torch": [_stream("loss 3.301\nsame line\n")]}
    text, images = render.code_cell("print(loss)", outputs, 4, "rnn", "RNN")
    assert "{bdg-warning}`differs between backends`" in text and images == {}
    assert "| numpy | `loss 3.332` |" in text and "| torch | `loss 3.301` |" in text
    assert "same line |" not in text  # only the differing lines are listed
    assert text.count(":::{tab-item}") == 2 and ":sync: torch" in text


def test_an_agreeing_cell_has_tabs_but_no_mark_and_plots_get_alt_text():
    png = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    outputs = {"numpy": [_stream("ppl 5.00\n"), png], "torch": [_stream("ppl 5.001\n"), png]}
    text, images = render.code_cell("train()", outputs, 7, "gru", "GRU")
    assert "differs" not in text
    assert sorted(images) == ["outputs/gru/gru-numpy-cell7-0.png", "outputs/gru/gru-torch-cell7-0.png"]
    assert images["outputs/gru/gru-numpy-cell7-0.png"] == b"\x89PNG\r\n\x1a\n"
    assert ":alt: GRU: plot made by code cell 7 on the torch backend" in text


def test_a_cell_without_outputs_is_just_its_code():
    text, _ = render.code_cell("x = 1", {"numpy": [], "torch": []}, 1, "rnn", "RNN")
    assert text == "```python\nx = 1\n```\n"


def test_streams_split_by_the_kernel_are_joined():
    outputs = [_stream("a"), _stream("b\n"), nbformat.v4.new_output("stream", name="stderr", text="w\n")]
    assert render.printed_text(outputs) == "ab\nw"
