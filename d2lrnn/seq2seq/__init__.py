"""Sequence to sequence learning: the encoder-decoder, its masked loss, training, decoding and BLEU."""

from .bleu import bleu, corpus_bleu
from .checkpoint import load_seq2seq_checkpoint, save_seq2seq_checkpoint, seq2seq_checkpoint_info
from .decode import beam_search, greedy_search, predict_seq2seq, translate
from .loss import MaskedSoftmaxCELoss, masked_token_loss, sequence_mask
from .model import Decoder, Encoder, EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder, make_seq2seq
from .train import (
    evaluate_bleu,
    evaluate_loss,
    make_seq2seq_updater,
    teacher_forcing,
    train_encoder_decoder,
)

__all__ = ["bleu", "corpus_bleu", "sequence_mask", "MaskedSoftmaxCELoss", "masked_token_loss", "Encoder",
           "Decoder", "EncoderDecoder", "Seq2SeqEncoder", "Seq2SeqDecoder", "make_seq2seq", "teacher_forcing",
           "make_seq2seq_updater", "train_encoder_decoder", "evaluate_loss", "evaluate_bleu", "greedy_search",
           "beam_search", "translate", "predict_seq2seq", "save_seq2seq_checkpoint",
           "load_seq2seq_checkpoint",
           "seq2seq_checkpoint_info"]
