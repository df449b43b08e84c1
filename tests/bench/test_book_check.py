"""bench/book_check.py and bench/book_runner.py: the checker's own logic, on small hand-written markdown.

- cells and their frameworks: d2l-zh's ``#@tab`` (an untagged cell is MXNet's), d2l-en's d2lbook
  ``%%tab`` (d2lbook's setup cell dropped, an untagged cell PyTorch's), other fences ignored;
- a cell as run: the import line swapped (or kept for the book's own package), IPython lines
  dropped, the epoch counts shrunk (d2l-zh: the listed counts on a ``num_epochs`` line; d2l-en: only
  the count after ``max_epochs=``, an unlisted count kept);
- which cells a column runs, in order; d2lbook's ``tab.selected``; what the runner records of each
  fit from the progress board's ``draw`` calls; the offline ``download``; the corpora placed for the
  book's package; the fidelity rows and their ratios; the command line's aliases.
No subprocess and no framework: the runner's functions are called in this process on stand-in classes.
"""

import hashlib
import json
import os
import zipfile

import pytest

from bench import book_check, book_runner
from bench.book_check import EDITIONS, adapt, cells_of, plan

pytestmark = pytest.mark.once

EN, ZH = EDITIONS["d2l-en"], EDITIONS["d2l-zh"]
COLUMN = {c.env: c for c in EN.columns}

EN_SECTION = """# A section

```{.python .input}
%load_ext d2lbook.tab
tab.interact_select('mxnet', 'pytorch')
```

```{.python .input  n=2}
%%tab pytorch
%matplotlib inline
from d2l import torch as d2l
import torch
```

```{.python .input}
%%tab mxnet
from d2l import mxnet as d2l
```

Some prose, and a fence that is not a cell:

```python
x = 'not run'
```

```{.python .input}
%%tab all
if tab.selected('mxnet', 'pytorch'):
    trainer = d2l.Trainer(max_epochs=100, gradient_clip_val=1, num_gpus=1)
```

```{.python .input}
%%tab pytorch, mxnet
answer = 42
```

```{.python .input}
print('untagged')
```
"""

ZH_SECTION = """```{.python .input}
from d2l import mxnet as d2l
```

```{.python .input}
#@tab pytorch
from d2l import torch as d2l
```

```{.python .input}
#@tab all
num_epochs, lr = 500, 1
```
"""


def test_en_cells_carry_their_tabs_and_drop_the_d2lbook_setup_cell():
    cells = cells_of(EN_SECTION, EN)
    assert [tabs for tabs, _ in cells] == [{"pytorch"}, {"mxnet"}, {"all"}, {"pytorch", "mxnet"}, {"pytorch"}]
    assert not any("load_ext" in source for _, source in cells)
    assert not any("not run" in source for _, source in cells)


def test_zh_untagged_cells_are_mxnet_and_tags_are_read_from_the_first_line():
    assert [tabs for tabs, _ in cells_of(ZH_SECTION, ZH)] == [{"mxnet"}, {"pytorch"}, {"all"}]


def test_the_import_line_becomes_d2lrnn_s_with_its_framework_or_stays_for_the_book():
    source = "%%tab pytorch\n%matplotlib inline\nfrom d2l import torch as d2l\nimport torch\n"
    assert adapt(source, EN) == "from d2lrnn.en import torch as d2l\nimport torch\n"
    assert adapt(source, EN, keep_import=True) == "from d2l import torch as d2l\nimport torch\n"
    assert adapt("from d2l import mxnet as d2l\n", ZH) == "from d2lrnn.zh import mxnet as d2l\n"
    assert adapt("    from d2l import jax as d2l\n", EN) == "    from d2lrnn.en import jax as d2l\n"


@pytest.mark.parametrize("line, shrunk", [
    ("t = d2l.Trainer(max_epochs=100, gradient_clip_val=1, num_gpus=1)",
     "t = d2l.Trainer(max_epochs=20, gradient_clip_val=1, num_gpus=1)"),
    ("t = d2l.Trainer(max_epochs = 50)", "t = d2l.Trainer(max_epochs = 10)"),
    ("t = d2l.Trainer(max_epochs=30, gradient_clip_val=1)",
     "t = d2l.Trainer(max_epochs=15, gradient_clip_val=1)"),
    ("t = d2l.Trainer(max_epochs=5)", "t = d2l.Trainer(max_epochs=5)"),  # not listed: as the book has it
    ("t = d2l.Trainer(max_epochs=1000)", "t = d2l.Trainer(max_epochs=1000)"),
    ("lr, steps = 100, 50", "lr, steps = 100, 50"),  # no max_epochs: untouched
])
def test_en_shrinks_only_the_count_after_max_epochs(line, shrunk):
    assert adapt(line, EN) == shrunk + "\n"


def test_zh_shrinks_the_listed_counts_on_a_num_epochs_line():
    assert adapt("num_epochs, lr = 500, 1", ZH) == "num_epochs, lr = 30, 1\n"
    assert adapt("x = 500", ZH) == "x = 500\n"


def test_a_column_runs_its_framework_s_cells_and_the_all_cells_in_order():
    cells = cells_of(EN_SECTION, EN)
    torch_sources, skipped = plan(cells, COLUMN["torch"], EN)
    assert skipped == 0
    assert [s.splitlines()[0] for s in torch_sources] == [
        "from d2lrnn.en import torch as d2l", "if tab.selected('mxnet', 'pytorch'):", "answer = 42",
        "print('untagged')"]
    mxnet_sources, _ = plan(cells, COLUMN["mxnet"], EN, keep_import=True)
    assert [s.splitlines()[0] for s in mxnet_sources] == [
        "from d2l import mxnet as d2l", "if tab.selected('mxnet', 'pytorch'):", "answer = 42"]
    assert plan(cells, COLUMN["jax"], EN) == ([], 0)  # no JAX cell: nothing runs


def test_tab_selected_answers_for_the_selected_framework():
    tab = book_runner.Tab("mxnet")
    assert tab.selected("mxnet") and tab.selected("pytorch", "mxnet") and tab.selected(["mxnet", "jax"])
    assert not tab.selected("pytorch") and not tab.selected("pytorch", "jax")
    namespace = {}
    result = book_runner.run(["x = 1 if tab.selected('pytorch') else 2\n"], {"tab": "mxnet"}, namespace)
    assert result == {"ran": 1} and namespace["x"] == 2


class Board:
    """A stand-in for the book's ProgressBoard: keeps what it is given."""

    def __init__(self):
        self.calls = []

    def draw(self, x, y, label, every_n=1):
        self.calls.append((x, y, label, every_n))


class Trainer:
    """A stand-in trainer: draws a fixed series on the model's board, as the book's Module.plot does."""

    def __init__(self, series):
        self.series = series

    def fit(self, model, data):
        for x, y, label, every_n in self.series:
            model.draw(x, y, label, every_n=every_n)
        return "fitted"


def fake_d2l():
    return type("d2l", (), {"Trainer": type("T", (Trainer,), {}), "ProgressBoard": type("B", (Board,), {})})


def test_the_recorder_keeps_each_fit_s_last_point_as_the_board_averages_them():
    d2l = fake_d2l()
    first = [(0.5, 10.0, "train_ppl", 2), (1.0, 8.0, "train_ppl", 2), (1.5, 7.0, "train_ppl", 2),
             (2.0, 5.0, "train_ppl", 2), (1, 9.0, "val_ppl", 1), (2, 6.5, "val_ppl", 1),
             (2.5, 4.0, "train_ppl", 2)]  # the last train call is half a point: not drawn
    second = [(1, 3.0, "train_loss", 3), (1, 6.0, "train_loss", 3), (1, 9.0, "train_loss", 3),
              (1, 2.0, "val_loss", 0)]  # every_n 0: the book's board draws nothing
    namespace = {"d2l": d2l, "series": [first, second]}
    cells = ["board = d2l.ProgressBoard()\n",
             "out = [d2l.Trainer(s).fit(board, None) for s in series]\n"]
    result = book_runner.run(cells, {"record": True}, namespace)
    assert result["fits"] == [{"train_ppl": [1.75, 6.0], "val_ppl": [2.0, 6.5]}, {"train_loss": [1.0, 6.0]}]
    assert namespace["out"] == ["fitted", "fitted"]  # the wrapped fit returns what fit returns
    assert len(namespace["board"].calls) == len(first) + len(second)  # and the board still draws


def test_an_error_is_summed_up_in_one_line_with_the_cause_under_keras_s_wrapper():
    result = book_runner.run(["x = 1\n", "raise ValueError('first line\\n\\nsecond')\n", "y = 2\n"], {})
    assert result == {"ran": 1, "error": "cell 1: ValueError: first line"}
    wrapped = TypeError("Exception encountered when calling layer 'rnn' (type RNN).\n\n"
                        "forward() got 'training'\nCall arguments received by layer 'rnn'")
    assert book_runner.summary(wrapped) == ("Exception encountered when calling layer 'rnn' (type RNN). "
                                            "forward() got 'training'")


def test_the_recorder_leaves_a_d2l_without_board_or_trainer_alone():
    recorder = book_runner.Recorder()
    plain = type("d2l", (), {})
    recorder.watch(plain)
    recorder.watch(None)
    assert recorder.fits == [] and not hasattr(plain, "Trainer")


def test_offline_download_answers_the_placed_files_and_refuses_any_other():
    d2l = type("d2l", (), {"DATA_HUB": {"time_machine": ("http://host/timemachine.txt", "0" * 40)},
                           "download": staticmethod(lambda *a, **k: "the network")})
    book_runner.offline_download(d2l, {"timemachine.txt": "/tmp/x/timemachine.txt"})
    assert d2l.download("http://host/timemachine.txt", "../data", "abc") == "/tmp/x/timemachine.txt"
    assert d2l.download("time_machine", cache_dir="../data") == "/tmp/x/timemachine.txt"  # 2.x: a hub name
    with pytest.raises(RuntimeError, match="nothing is downloaded"):
        d2l.download("http://host/other.zip")


def test_the_corpora_are_placed_as_the_book_s_package_names_them(tmp_path):
    placed = book_check.place_corpora(tmp_path / "data")
    assert sorted(placed) == ["fra-eng.zip", "timemachine.txt"]
    text = (tmp_path / "data" / "timemachine.txt").read_bytes()
    assert hashlib.sha1(text).hexdigest() == "090b5e7e70c295757f55df93cb0a180b9691891a"  # the book's SHA-1
    with zipfile.ZipFile(placed["fra-eng.zip"]) as archive:
        assert archive.namelist() == ["fra-eng/fra.txt"]
        assert archive.read("fra-eng/fra.txt").count(b"\n") == 18066


def test_fidelity_rows_pair_each_fit_s_figures_with_the_saved_runs_and_their_mean():
    seed0 = {"gru": {"torch": {"fits": [{"val_ppl": [10, 8.0], "train_ppl": [10, 9.0]}]}},
             "seq2seq": {"torch": {"fits": [{"train_loss": [5, 0.5]}]}}}
    seed1 = {"gru": {"torch": {"fits": [{"val_ppl": [10, 8.4], "train_ppl": [10, 9.0]}]}}}
    runs = {"gru": {"torch": {"fits": [{"train_ppl": [10, 9.36], "val_ppl": [10, 8.2]}]}},
            "seq2seq": {"torch": {"status": "cell 3: ValueError: no", "fits": []}}}
    rows = book_check.fidelity(runs, [seed0, seed1])
    assert rows == [("gru", "torch", 1, "train_ppl", [9.0, 9.0], 9.36),
                    ("gru", "torch", 1, "val_ppl", [8.0, 8.4], 8.2),
                    ("seq2seq", "torch", 1, "train_loss", [0.5], None)]
    lines = book_check.fidelity_table(rows).splitlines()
    assert lines[2].endswith("| 9 (9 to 9) | 9.36 | 1.040 | 0.0% |")
    assert lines[3].endswith("| 8.2 (8 to 8.4) | 8.2 | 1.000 | 5.0% |")
    assert lines[4].endswith("| 0.5 | — | — | — |")
    outside = book_check.fidelity_table([("s", "mxnet", 1, "val_ppl", [10.0], 10.6)])
    assert outside.endswith("| 10 | 10.6 | 1.060 (outside 5%) | — |")


def test_the_command_line_takes_the_short_edition_names_and_the_book_face():
    args = book_check.parse_args(["--edition", "en", "--book-package", "--columns", "jax"])
    assert (args.edition, args.face) == ("d2l-en", "book")
    assert book_check.parse_args([]).edition == "d2l-zh"
    with pytest.raises(SystemExit):
        book_check.parse_args(["--edition", "en", "--columns", "paddle"])  # no paddle cells in d2l-en
    with pytest.raises(SystemExit):
        book_check.parse_args(["--face", "book", "--reference", "/work/ref"])  # d2l 1.0.3 is not d2l-zh's


def test_options_select_the_tab_seed_and_record_for_d2l_en_only():
    assert book_check.options(COLUMN["mxnet"], EN, book_face=True, seed=3) == {
        "tab": "mxnet", "seed": 3, "record": True, "offline": {}}
    assert book_check.options(book_check.ZH_COLUMNS[0], ZH, book_face=False) == {}
    assert json.loads(json.dumps(book_check.options(COLUMN["torch"], EN, False)))["tab"] == "pytorch"


def test_the_search_path_puts_the_checkout_then_extra_folders_then_the_book_s_package(tmp_path, monkeypatch):
    for folder in ("d2l103", "deps-mxnet", "deps-torch"):
        (tmp_path / folder).mkdir()
    monkeypatch.setenv("PYTHONPATH", "/callers")
    path = book_check.search_path(COLUMN["mxnet"], "/repo", tmp_path, ["/numpy23"]).split(os.pathsep)
    assert path == ["/repo", "/numpy23", str(tmp_path / "d2l103"), str(tmp_path / "deps-mxnet"), "/callers"]
    monkeypatch.delenv("PYTHONPATH")
    assert book_check.search_path(COLUMN["jax"], "/repo", None) == "/repo"  # no reference: d2lrnn alone


def test_fidelity_over_seeds_compares_the_means_of_both_sides_with_their_standard_errors():
    from bench import book_fidelity

    def run(loss):
        return {"seq2seq": {"torch": {"status": "ok", "fits": [{"train_loss": [10.0, loss]}]}}}

    book = [(0, run(1.0)), (1, run(1.2))]  # mean 1.1, standard error 0.1 (0.0909 of the mean)
    ours = [(0, run(1.1)), (1, run(1.3))]  # mean 1.2, standard error 0.1 (0.0833 of the mean)
    rows = book_fidelity.compare(book, ours)
    assert rows == [("seq2seq", "torch", 1, "train_loss", [1.0, 1.2], [1.1, 1.3])]
    assert book_fidelity.mean_and_relative_error([1.0, 1.2]) == pytest.approx((1.1, 0.1 / 1.1))
    line = book_fidelity.table(rows, [0, 1], [0, 1]).splitlines()[-1]
    ratio = 1.2 / 1.1  # 1.091: outside 5%, but two standard errors (0.269) reach back into the band
    two_se = 2 * ((0.1 / 1.1) ** 2 + (0.1 / 1.2) ** 2) ** 0.5 * ratio
    assert line == (f"| seq2seq | torch | 1 | train_loss | 2 / 2 | 1.1 (1 to 1.2) | 1.2 (1.1 to 1.3) "
                    f"| {ratio:.3f} ± {two_se:.3f} | consistent |")
    tight = book_fidelity.table(book_fidelity.compare([(0, run(1.0)), (1, run(1.0))], [(0, run(1.2))]),
                                [0, 1], [0])
    # no spread on either side
    assert tight.splitlines()[-1].endswith("| 2 / 1 | 1 (1 to 1) | 1.2 | 1.200 ± 0.000 | **no** |")
    assert book_fidelity.seeds_of([(10, {}), (2, {}), (10, {}), (None, {})]) == [2, 10, None]
    assert book_fidelity.spans([0, 1, 2, 5, 7, 8, None]) == "0 to 2, 5, 7 to 8, None"


def test_a_column_asked_for_without_its_python_is_one_line_saying_how_to_make_it(tmp_path, capsys):
    (tmp_path / "rnn.md").write_text("")
    with pytest.raises(SystemExit) as stop:
        book_check.main(["--book", str(tmp_path), "--columns", "torch",
                         "--python", f"torch={tmp_path / 'none'}"])
    message = str(stop.value.code)
    assert message.startswith("book_check: no Python for torch (looked for ") and "\n" not in message
    assert "tox -e torch --notest" in message and "--python torch=PATH" in message
