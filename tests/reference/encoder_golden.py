"""Tiny RoBERTa, XLM-RoBERTa, DistilBERT and ELECTRA directories with transformers' outputs
and gradients, for tests/test_encoder_golden.c (docs/bert.md §11).

Run from the repository root in a venv with the interop pins (tests/interop/requirements.txt:
torch 2.4.1 and transformers 4.44.2 from PyPI, safetensors 0.4.5, numpy 1.26.4); CPU, one
thread:

    python3 -m venv /tmp/venv-enc
    /tmp/venv-enc/bin/pip install torch==2.4.1 transformers==4.44.2 safetensors==0.4.5 numpy==1.26.4
    /tmp/venv-enc/bin/python tests/reference/encoder_golden.py tests/data/encoders

Writes one directory per model, each a randomly initialised *Model saved by save_pretrained
(safetensors) with a WordPiece vocab.txt (the maths does not depend on the tokenizer):
  roberta/      RobertaModel, H 21 = 3 heads of 7, layer_norm_eps 1e-5, pad_token_id 1
  xlm_roberta/  XLMRobertaModel, H 30 = 2 heads of 15, layer_norm_eps 1e-5, "gelu_new"
  distilbert/   DistilBertModel, dim 21 = 3 heads of 7, sinusoidal_pos_embds
  electra/      ElectraModel, embedding_size 13, hidden 21 = 3 heads of 7 (embeddings_project)
and golden.safetensors beside the model: input_ids / input_mask / segment_ids (I32 [2,10],
the second example padded with pad_token_id after 6 tokens; segment ids 1 on the second
half, which RoBERTa's models ignore: est gives them to every model, transformers gets
them only where type_vocab_size > 1), hidden_states.<i> for i = 0 (the embeddings, after
ELECTRA's projection) .. num_layers, pooled_output where the model has a pooler, and a
training step's gradients: loss = sum(last_hidden_state * probe_sequence)
+ sum(pooled_output * probe_pooled), with probe_* saved, every parameter's gradient saved
as grad.<its name in model.safetensors>. Dropout is 0 so the step is deterministic.

Then one *ForSequenceClassification per family, num_labels 3, the same shapes with room for
32 tokens (run_classifier's CLI test fine-tunes them on tests/data/glue_mini):
  roberta_cls/ xlm_roberta_cls/ distilbert_cls/ electra_cls/
each with golden.safetensors: the inputs as above, label_ids (I32 [2]), logits [2,3], loss
(the mean cross-entropy, transformers' single_label_classification) and grad.<name> of every
parameter after loss.backward() (head and encoder).

And one layer's *ForQuestionAnswering for three of the name tables: roberta_qa/ distilbert_qa/
electra_qa, golden.safetensors with the inputs, start_positions / end_positions (I32 [2]),
start_logits / end_logits [2,10], loss and grad.<name> of every parameter.
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import (DistilBertConfig, DistilBertForQuestionAnswering, DistilBertForSequenceClassification,
                          DistilBertModel, ElectraConfig, ElectraForQuestionAnswering,
                          ElectraForSequenceClassification, ElectraModel, RobertaConfig, RobertaForQuestionAnswering,
                          RobertaForSequenceClassification, RobertaModel, XLMRobertaConfig,
                          XLMRobertaForSequenceClassification, XLMRobertaModel)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefghijklmnopqrstuvwxyz") + [
    "the", "movie", "good", "bad", "##s", "##ing", "##ed", "not", "fun"]
B, S, CUT = 2, 10, 6


def inputs(g, pad):
    ids = torch.randint(5, len(VOCAB), (B, S), generator=g, dtype=torch.int32)
    ids[:, 0] = 2
    mask = torch.ones(B, S, dtype=torch.int32)
    mask[1, CUT:] = 0
    ids[1, CUT:] = pad
    segs = torch.zeros(B, S, dtype=torch.int32)
    segs[:, S // 2:] = 1
    segs[1, CUT:] = 0
    return ids, mask, segs


def save_model(dirname, model):
    os.makedirs(dirname, exist_ok=True)
    model.eval()
    with torch.no_grad():  # non-trivial biases and norms, so a mapping mistake shows
        for name, p in model.named_parameters():
            if p.requires_grad:  # not DistilBERT's fixed sinusoidal table
                p.add_(torch.randn_like(p) * 0.05)
    model.save_pretrained(dirname, safe_serialization=True)
    with open(os.path.join(dirname, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in VOCAB))


def write(dirname, model, pad, uses_types):
    save_model(dirname, model)
    g = torch.Generator().manual_seed(7)
    ids, mask, segs = inputs(g, pad)
    kwargs = {"input_ids": ids.long(), "attention_mask": mask.long(), "output_hidden_states": True}
    if uses_types:
        kwargs["token_type_ids"] = segs.long()
    out = model(**kwargs)
    golden = {"input_ids": ids, "input_mask": mask, "segment_ids": segs}
    for i, h in enumerate(out.hidden_states):
        golden["hidden_states.%d" % i] = h.detach().contiguous()
    pooled = getattr(out, "pooler_output", None)
    probe_seq = torch.randn(out.last_hidden_state.shape, generator=g)
    loss = (out.last_hidden_state * probe_seq).sum()
    golden["probe_sequence"] = probe_seq
    if pooled is not None:
        golden["pooled_output"] = pooled.detach().contiguous()
        probe_pool = torch.randn(pooled.shape, generator=g)
        loss = loss + (pooled * probe_pool).sum()
        golden["probe_pooled"] = probe_pool
    model.zero_grad()
    loss.backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            golden["grad." + name] = p.grad.detach().contiguous()
    save_file(golden, os.path.join(dirname, "golden.safetensors"))


def write_cls(dirname, model, pad, uses_types):
    save_model(dirname, model)
    g = torch.Generator().manual_seed(11)
    ids, mask, segs = inputs(g, pad)
    labels = torch.tensor([2, 0], dtype=torch.int32)
    kwargs = {"input_ids": ids.long(), "attention_mask": mask.long(), "labels": labels.long()}
    if uses_types:
        kwargs["token_type_ids"] = segs.long()
    model.zero_grad()
    out = model(**kwargs)
    out.loss.backward()
    golden = {"input_ids": ids, "input_mask": mask, "segment_ids": segs, "label_ids": labels,
              "logits": out.logits.detach().contiguous(), "loss": out.loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        if p.grad is not None:
            golden["grad." + name] = p.grad.detach().contiguous()
    save_file(golden, os.path.join(dirname, "golden.safetensors"))


def write_qa(dirname, model, pad, uses_types):
    save_model(dirname, model)
    g = torch.Generator().manual_seed(13)
    ids, mask, segs = inputs(g, pad)
    start, end = torch.tensor([3, 1], dtype=torch.int32), torch.tensor([7, 4], dtype=torch.int32)
    kwargs = {"input_ids": ids.long(), "attention_mask": mask.long(), "start_positions": start.long(),
              "end_positions": end.long()}
    if uses_types:
        kwargs["token_type_ids"] = segs.long()
    model.zero_grad()
    out = model(**kwargs)
    out.loss.backward()
    golden = {"input_ids": ids, "input_mask": mask, "segment_ids": segs, "start_positions": start,
              "end_positions": end, "start_logits": out.start_logits.detach().contiguous(),
              "end_logits": out.end_logits.detach().contiguous(), "loss": out.loss.detach().reshape(1)}
    for name, p in model.named_parameters():
        if p.grad is not None:
            golden["grad." + name] = p.grad.detach().contiguous()
    save_file(golden, os.path.join(dirname, "golden.safetensors"))


def main():
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    root = sys.argv[1]
    common = dict(vocab_size=len(VOCAB), num_hidden_layers=2, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, attn_implementation="eager")
    write(os.path.join(root, "roberta"),
          RobertaModel(RobertaConfig(hidden_size=21, num_attention_heads=3, intermediate_size=37,
                                     max_position_embeddings=S + 2, type_vocab_size=1, layer_norm_eps=1e-5,
                                     pad_token_id=1, bos_token_id=0, eos_token_id=2, **common)), 1, False)
    write(os.path.join(root, "xlm_roberta"),
          XLMRobertaModel(XLMRobertaConfig(hidden_size=30, num_attention_heads=2, intermediate_size=41,
                                           max_position_embeddings=S + 4, type_vocab_size=1, layer_norm_eps=1e-5,
                                           hidden_act="gelu_new", pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                           **common)), 1, False)
    write(os.path.join(root, "distilbert"),
          DistilBertModel(DistilBertConfig(vocab_size=len(VOCAB), n_layers=2, n_heads=3, dim=21, hidden_dim=37,
                                           max_position_embeddings=S + 3, sinusoidal_pos_embds=True, dropout=0.0,
                                           attention_dropout=0.0, pad_token_id=0, attn_implementation="eager")),
          0, False)
    write(os.path.join(root, "electra"),
          ElectraModel(ElectraConfig(embedding_size=13, hidden_size=21, num_attention_heads=3, intermediate_size=37,
                                     max_position_embeddings=S + 1, type_vocab_size=2, pad_token_id=0, **common)),
          0, True)

    cls = dict(common, num_labels=3, classifier_dropout=0.0)
    write_cls(os.path.join(root, "roberta_cls"),
              RobertaForSequenceClassification(RobertaConfig(
                  hidden_size=21, num_attention_heads=3, intermediate_size=37, max_position_embeddings=34,
                  type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, **cls)),
              1, False)
    write_cls(os.path.join(root, "xlm_roberta_cls"),
              XLMRobertaForSequenceClassification(XLMRobertaConfig(
                  hidden_size=30, num_attention_heads=2, intermediate_size=41, max_position_embeddings=34,
                  type_vocab_size=1, layer_norm_eps=1e-5, hidden_act="gelu_new", pad_token_id=1, bos_token_id=0,
                  eos_token_id=2, **cls)), 1, False)
    write_cls(os.path.join(root, "distilbert_cls"),
              DistilBertForSequenceClassification(DistilBertConfig(
                  vocab_size=len(VOCAB), n_layers=2, n_heads=3, dim=21, hidden_dim=37, max_position_embeddings=32,
                  sinusoidal_pos_embds=True, dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0,
                  pad_token_id=0, num_labels=3, attn_implementation="eager")), 0, False)
    write_cls(os.path.join(root, "electra_cls"),
              ElectraForSequenceClassification(ElectraConfig(
                  embedding_size=13, hidden_size=21, num_attention_heads=3, intermediate_size=37,
                  max_position_embeddings=32, type_vocab_size=2, pad_token_id=0, **cls)), 0, True)

    qa = dict(common, num_hidden_layers=1)
    write_qa(os.path.join(root, "roberta_qa"),
             RobertaForQuestionAnswering(RobertaConfig(
                 hidden_size=21, num_attention_heads=3, intermediate_size=37, max_position_embeddings=34,
                 type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2, **qa)),
             1, False)
    write_qa(os.path.join(root, "distilbert_qa"),
             DistilBertForQuestionAnswering(DistilBertConfig(
                 vocab_size=len(VOCAB), n_layers=1, n_heads=3, dim=21, hidden_dim=37, max_position_embeddings=32,
                 sinusoidal_pos_embds=False, dropout=0.0, attention_dropout=0.0, qa_dropout=0.0, pad_token_id=0,
                 attn_implementation="eager")), 0, False)
    write_qa(os.path.join(root, "electra_qa"),
             ElectraForQuestionAnswering(ElectraConfig(
                 embedding_size=13, hidden_size=21, num_attention_heads=3, intermediate_size=37,
                 max_position_embeddings=32, type_vocab_size=2, pad_token_id=0, **qa)), 0, True)


if __name__ == "__main__":
    main()
