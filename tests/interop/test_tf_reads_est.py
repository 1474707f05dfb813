"""TensorFlow, TensorBoard, safetensors and HuggingFace read what est writes, value for value."""
import glob
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from conftest import DATA, MRPC_DIR, VOCAB, est, est_ckpt_get, est_ckpt_ls, est_json_lines

COMPRESSIONS = ["", "GZIP", "ZLIB"]


def run_classifier_specs(seq):
    """run_classifier.py's file_based_input_fn_builder name_to_features."""
    return {
        "input_ids": tf.io.FixedLenFeature([seq], tf.int64),
        "input_mask": tf.io.FixedLenFeature([seq], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([seq], tf.int64),
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def tf_parse_records(path, compression, seq):
    ds = tf.data.TFRecordDataset(path, compression_type=compression)
    specs = run_classifier_specs(seq)
    return [{k: np.atleast_1d(v.numpy()).tolist() for k, v in tf.io.parse_single_example(r, specs).items()} for r in ds]


def tf_raw_records(path, compression):
    return [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("convert")
    est("convert", "--task_name=MRPC", f"--data_dir={MRPC_DIR}", f"--vocab_file={VOCAB}", "--max_seq_length=48",
        f"--output_dir={out}", "--pad_to_batch_size=8")
    return str(out)


def record_files(converted, bert_run):
    files = [(os.path.join(converted, f"{s}.tf_record"), 48) for s in ("train", "eval", "predict")]
    files += [(os.path.join(bert_run["dir"], f"{s}.tf_record"), bert_run["seq"]) for s in ("train", "eval", "predict")]
    return files


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_records_parse_in_tf_as_est_dumps(converted, bert_run, tmp_path, compression):
    n_checked = 0
    for path, seq in record_files(converted, bert_run):
        src = path
        if compression:  # est's writer compresses; TF must inflate it to the same records
            src = str(tmp_path / (os.path.basename(path) + "." + compression.lower()))
            est("tfrecord", "copy", path, src, f"--output_compression={compression}")
            assert tf_raw_records(src, compression) == tf_raw_records(path, "")
        ours = [{k: v["int64"] for k, v in rec.items()} for rec in est_json_lines("tfrecord", "dump", src, f"--compression={compression}")]
        theirs = tf_parse_records(src, compression, seq)
        assert len(ours) == len(theirs) > 0
        assert ours == theirs, path
        n_checked += len(ours)
    assert n_checked > 800  # 408 dev rows in each eval file, among others


def test_padding_examples_are_tfs_zeros(converted):
    """--pad_to_batch_size appends PaddingInputExamples: all zeros, is_real_example 0."""
    recs = tf_parse_records(os.path.join(converted, "predict.tf_record"), "", 48)
    assert len(recs) % 8 == 0
    pads = [r for r in recs if r["is_real_example"] == [0]]
    assert len(recs) - len(pads) == 10 and pads
    assert all(set(sum(r.values(), [])) == {0} for r in pads)


def ckpt_prefixes(bert_run):
    return sorted(p[:-len(".index")] for p in glob.glob(os.path.join(bert_run["dir"], "model.ckpt-*.index")))


def test_checkpoint_state_file(bert_run):
    state = tf.train.get_checkpoint_state(bert_run["dir"])
    on_disk = ckpt_prefixes(bert_run)
    steps = sorted(int(p.rsplit("-", 1)[1]) for p in on_disk)
    assert steps == [8, 12, 15]  # every 4 steps + the last, keep_checkpoint_max=3
    assert state.model_checkpoint_path == os.path.join(bert_run["dir"], "model.ckpt-15")
    assert list(state.all_model_checkpoint_paths) == [os.path.join(bert_run["dir"], f"model.ckpt-{s}") for s in steps]
    assert tf.train.latest_checkpoint(bert_run["dir"]) == state.model_checkpoint_path


def test_every_checkpoint_loads_in_tf_as_est_reads_it(bert_run):
    prefixes = ckpt_prefixes(bert_run)
    assert len(prefixes) == 3
    for prefix in prefixes:
        reader = tf.train.load_checkpoint(prefix)
        dtypes = reader.get_variable_to_dtype_map()
        shapes = reader.get_variable_to_shape_map()
        ours = est_ckpt_ls(prefix)
        assert set(ours) == set(dtypes)
        names = set(dtypes)
        # the reference's names: 1 layer = 5 embedding + 16 encoder + 2 pooler + 2 head
        # variables, each with adam_m/adam_v, plus global_step and est's two int64s
        assert len([n for n in names if not n.endswith(("adam_m", "adam_v"))]) == 25 + 3
        assert {"global_step", "output_weights", "output_bias", "est/seed", "est/input_state"} <= names
        assert reader.get_tensor("global_step") == int(prefix.rsplit("-", 1)[1])
        for name in sorted(names):
            dtype, shape = ours[name]
            assert dtype == dtypes[name].name, name
            assert shape == shapes[name], name
            theirs = np.asarray(reader.get_tensor(name)).ravel()
            mine = np.asarray(est_ckpt_get(prefix, name), dtype=theirs.dtype)
            assert mine.shape == theirs.shape, name
            assert np.array_equal(mine, theirs), name


def test_tf_bert_graph_restored_from_est_checkpoint_gives_est_probabilities(bert_run):
    import tf_bert

    recs = tf_parse_records(os.path.join(bert_run["dir"], "predict.tf_record"), "", bert_run["seq"])
    ids, mask, seg = (np.array([r[k] for r in recs]) for k in ("input_ids", "input_mask", "segment_ids"))
    probs = tf_bert.predict(bert_run["config"], os.path.join(bert_run["dir"], "model.ckpt-15"), ids, mask, seg, 2)
    with open(os.path.join(bert_run["dir"], "test_results.tsv")) as f:
        ours = np.array([[float(x) for x in line.split("\t")] for line in f.read().splitlines()])
    assert ours.shape == probs.shape == (10, 2)
    np.testing.assert_allclose(probs, ours, atol=1e-5, rtol=0)
    # the checkpoint's weights (stddev 0.3) make the rows differ well beyond the tolerance
    assert np.ptp(ours[:, 0]) > 1e-2


def read_events(path):
    """(step, tag, value) of every scalar in an event file, through TensorBoard's loader."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out = []
    for ev in EventFileLoader(path).Load():
        for v in ev.summary.value:
            # TensorBoard's loader migrates simple_value into a tensor (data_compat)
            out.append((ev.step, v.tag, float(tensor_util.make_ndarray(v.tensor)) if v.HasField("tensor") else v.simple_value))
    return out


def test_events_read_by_tensorboard_match_the_log(bert_run):
    train = glob.glob(os.path.join(bert_run["dir"], "events.out.tfevents.*"))
    evals = glob.glob(os.path.join(bert_run["dir"], "eval", "events.out.tfevents.*"))
    assert len(train) == 1 and len(evals) == 1
    scalars = read_events(train[0])
    log = bert_run["log"]
    logged_loss = {int(s): float(v) for v, s in re.findall(r"loss = ([-0-9.e]+), step = (\d+)", log)}
    logged_rate = [float(v) for v in re.findall(r"global_step/sec: ([-0-9.e]+)", log)]
    loss = {s: v for s, t, v in scalars if t == "loss"}
    rate = [(s, v) for s, t, v in scalars if t == "global_step/sec"]
    assert loss, scalars
    # summaries carry the global step after the update (as tf.estimator's hooks stamp them),
    # the log line the step the loss was computed at: summary step s is log step s - 1
    for step, v in loss.items():
        if step - 1 in logged_loss:  # the log prints every log_step_count_steps, summaries every save_summary_steps
            assert v == pytest.approx(logged_loss[step - 1], rel=1e-6), step
    assert {s - 1 for s in loss} & set(logged_loss), (loss, logged_loss)
    assert [s for s, _ in rate] == [6, 11] or len(rate) == len(logged_rate)
    for (_, v), w in zip(rate, logged_rate):
        assert v == pytest.approx(w, rel=1e-2, abs=0.01)  # the log prints 2 decimals
    ev = {t: (s, v) for s, t, v in read_events(evals[0])}
    with open(os.path.join(bert_run["dir"], "eval_results.txt")) as f:
        results = dict(line.split(" = ") for line in f.read().splitlines())
    for key, value in results.items():
        if key == "global_step":
            continue
        assert key in ev, (key, ev)  # run_classifier's metric_fn names them eval_*, and so the tags
        step, v = ev[key]
        assert step == 15
        assert v == pytest.approx(float(value), rel=1e-6), key


def test_safetensors_package_reads_est_convert(bert_run, tmp_path):
    from safetensors import safe_open
    from safetensors.numpy import load_file

    prefix = os.path.join(bert_run["dir"], "model.ckpt-15")
    out = str(tmp_path / "model.safetensors")
    est("ckpt", "convert", prefix, out)
    tensors = load_file(out)
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    assert set(tensors) == set(dtypes)
    for name, arr in tensors.items():
        ref = reader.get_tensor(name)
        assert arr.dtype == np.dtype(dtypes[name].as_numpy_dtype), name
        assert arr.shape == np.shape(ref), name
        assert np.array_equal(arr, ref), name
    with safe_open(out, "np") as f:
        assert sorted(f.keys()) == sorted(tensors)
    # and back: est reads the safetensors file into a TF checkpoint that TF loads unchanged
    back = str(tmp_path / "back" / "model.ckpt")
    os.makedirs(os.path.dirname(back))
    est("ckpt", "convert", out, back)
    r2 = tf.train.load_checkpoint(back)
    for name in tensors:
        assert np.array_equal(r2.get_tensor(name), reader.get_tensor(name)), name


def hf_model(config):
    from transformers import BertConfig

    cfg = dict(config)
    # Google's gelu is the tanh approximation; HF calls that "gelu_new" ("gelu" is erf)
    cfg["hidden_act"] = "gelu_new"
    return BertConfig(**cfg, num_labels=2, layer_norm_eps=1e-12)


def test_huggingface_loader_refuses_run_classifier_heads_of_tf_and_est_alike(bert_run, tmp_path):
    """transformers' load_tf_weights_in_bert (4.x) resolves each top-level name as an
    attribute of the model: `output_weights`/`output_bias` (run_classifier.py's head) and
    est's `est/*` tensors have none on BertForSequenceClassification, and it raises instead
    of skipping them. A checkpoint TensorFlow's Saver writes with the reference's names fails
    the same way, so this is HF's limit, not a difference of est's files."""
    import tf_bert
    from transformers import BertForSequenceClassification

    tf_prefix = str(tmp_path / "tf" / "model.ckpt")
    tf_bert.write_random_checkpoint(bert_run["config"], tf_prefix, stddev=0.02, seed=3, with_head=True)
    for prefix in (tf_prefix, os.path.join(bert_run["dir"], "model.ckpt-15")):
        with pytest.raises(AttributeError):
            BertForSequenceClassification.from_pretrained(prefix, from_tf=True, config=hf_model(bert_run["config"]))


def test_huggingface_bert_loads_est_checkpoint_and_gives_est_probabilities(bert_run, monkeypatch):
    """HF's TF-checkpoint loader reads est's fine-tuned checkpoint (Adam slots and
    global_step present: it skips those itself); only the names it cannot place (above)
    are hidden from it, and the head is set from TensorFlow's reading of the same file."""
    import torch
    from transformers import BertForSequenceClassification

    prefix = os.path.join(bert_run["dir"], "model.ckpt-15")
    real_list = tf.train.list_variables
    hidden = []

    def placeable(path):  # every name but the four HF cannot place
        out = []
        for name, shape in real_list(path):
            parts = name.split("/")
            if parts[0] == "bert" or "adam_m" in parts or "adam_v" in parts or name == "global_step":
                out.append((name, shape))
            else:
                hidden.append(name)
        return out

    monkeypatch.setattr(tf.train, "list_variables", placeable)
    model = BertForSequenceClassification.from_pretrained(prefix, from_tf=True, config=hf_model(bert_run["config"]))
    monkeypatch.undo()
    assert sorted(hidden) == ["est/input_state", "est/seed", "output_bias", "output_weights"]
    reader = tf.train.load_checkpoint(prefix)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.from_numpy(reader.get_tensor("output_weights")))
        model.classifier.bias.copy_(torch.from_numpy(reader.get_tensor("output_bias")))
    model.eval()
    # HF's loader placed every encoder weight: each parameter equals TF's reading
    hf = dict(model.named_parameters())
    np.testing.assert_array_equal(hf["bert.embeddings.word_embeddings.weight"].detach().numpy(),
                                  reader.get_tensor("bert/embeddings/word_embeddings"))
    np.testing.assert_array_equal(hf["bert.encoder.layer.0.attention.self.query.weight"].detach().numpy(),
                                  reader.get_tensor("bert/encoder/layer_0/attention/self/query/kernel").T)
    np.testing.assert_array_equal(hf["bert.pooler.dense.bias"].detach().numpy(), reader.get_tensor("bert/pooler/dense/bias"))
    recs = tf_parse_records(os.path.join(bert_run["dir"], "predict.tf_record"), "", bert_run["seq"])
    ids, mask, seg = (torch.tensor([r[k] for r in recs]) for k in ("input_ids", "input_mask", "segment_ids"))
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=ids, attention_mask=mask, token_type_ids=seg).logits, -1).numpy()
    with open(os.path.join(bert_run["dir"], "test_results.tsv")) as f:
        ours = np.array([[float(x) for x in line.split("\t")] for line in f.read().splitlines()])
    np.testing.assert_allclose(probs, ours, atol=1e-5, rtol=0)
