"""The training loop moves every minibatch to the device the model lives on, as the book's loops do with
``X.to(device)``: the data iterators make their tensors on the CPU, and a GPU's parameters need their
inputs beside them. On this CPU machine the device is the CPU, so the tests follow the tensors through
``ops.to_device`` (what puts them there) rather than through a second device."""

import pytest

import d2lrnn as d2l
from d2lrnn import ops
from d2lrnn.data.translation import load_data_nmt_split
from d2lrnn.seq2seq import make_seq2seq
from d2lrnn.training.loop import averaged_view


class Yielded:
    """An iterator's minibatches, remembered: ``tensors`` holds the id of every tensor it gave out."""

    def __init__(self, data_iter):
        self.data_iter, self.tensors = data_iter, set()

    def __iter__(self):
        for batch in self.data_iter:
            self.tensors.update(id(a) for a in batch)
            yield batch

    def __len__(self):
        return len(self.data_iter)


class Moved(set):
    """The ids of the tensors ``ops.to_device`` was asked to put on ``device`` (``ops.try_gpu()``)."""

    device = None


@pytest.fixture
def moved(monkeypatch):
    ids, real = Moved(), ops.to_device
    ids.device = ops.try_gpu()

    def to_device(x, where):
        if where is not None and where == ids.device:
            ids.add(id(x))
        return real(x, where)

    monkeypatch.setattr(ops, "to_device", to_device)
    return ids


def test_language_model_minibatches_go_to_the_models_device(moved):
    train_iter, val_iter, vocab = d2l.load_data_lm(batch_size=4, num_steps=5, max_tokens=400, seed=0)
    train, val = Yielded(train_iter), Yielded(val_iter)
    net = d2l.RNNModelScratch(len(vocab), 8, moved.device)
    d2l.train_ch8(net, train, vocab, 1.0, 2, moved.device, val_iter=val, verbose=False)
    assert train.tensors and val.tensors
    assert train.tensors <= moved, "a training minibatch was not moved to the device"
    assert val.tensors <= moved, "a validation minibatch was not moved to the device"


def test_encoder_decoder_minibatches_go_to_the_models_device(moved):
    train_iter, val_iter, src_vocab, tgt_vocab = load_data_nmt_split(8, 6, num_examples=48, val_fraction=0.25)
    train, val = Yielded(train_iter), Yielded(val_iter)
    val.arrays = val_iter.arrays  # BLEU reads the source sentences from the loader's arrays
    net = make_seq2seq(len(src_vocab), len(tgt_vocab), 4, 6, 1, 0.0, device=moved.device)
    d2l.train_seq2seq(net, train, 0.005, 1, tgt_vocab, moved.device, val_iter=val, verbose=False)
    assert train.tensors <= moved, "a training minibatch was not moved to the device"
    assert val.tensors <= moved, "a validation minibatch was not moved to the device"


def test_a_models_inputs_go_to_its_device(moved):
    # net(X, state) with X made on the CPU (as the iterators make it): the model puts X beside its
    # parameters; model.to(device), the book's PyTorch form, moves the parameters and sets the device
    net = d2l.RNNModelScratch(28, 8)
    before, ids = [ops.to_numpy(p) for p in net.params], {id(p) for p in net.params}
    assert net.to(moved.device) is net and net.device == moved.device
    assert ids <= moved
    for got, want in zip(net.params, before):
        assert (ops.to_numpy(got) == want).all()
    X = ops.tensor([[1, 2, 3]])
    net(X, net.begin_state(1, moved.device))
    assert id(X) in moved


def test_an_averaged_view_of_a_model_of_models_leaves_the_model_alone():
    class Part:
        def __init__(self, params):
            self.params = params

    class Whole:  # params read from and written into its parts, as an encoder-decoder's are
        def __init__(self):
            self.first, self.second = Part(["a"]), Part(["b"])
            self.first.owner = self  # a cycle back to the whole: copied once, not forever

        @property
        def params(self):
            return self.first.params + self.second.params

        @params.setter
        def params(self, params):
            self.first.params, self.second.params = params[:1], params[1:]

    class Step:
        def averaged_params(self):
            return ["A", "B"]

    net = Whole()
    view = averaged_view(net, Step())
    assert view.params == ["A", "B"] and net.params == ["a", "b"]
    assert view.first.owner is view and net.first.owner is net
    assert averaged_view(net, object()) is net  # no averages kept: the model itself
