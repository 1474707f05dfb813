"""tf.estimator itself as the oracle (tensorflow-estimator 2.15, the last release): the
logistic regression of examples/logistic_regression.c written as a tf.estimator model_fn,
trained by TF's train_and_evaluate on the same TFRecords from the same initial values with
the same RunConfig, next to est's build/example_logistic_regression.

Compared: which checkpoints exist at the end (save_checkpoints_steps, keep_checkpoint_max),
the `checkpoint` file, the variables of the final checkpoint (names, dtypes, shapes),
global_step, the eval metric names and the steps they were computed at, the event tags and
the steps of the train scalars, and the metric values (to a tolerance: the two shuffle the
training data with different generators, so the runs are not step-for-step equal).

Deliberate differences (the README lists them too): est's checkpoints hold two more int64
tensors, est/seed and est/input_state (exact resume); TF additionally writes graph.pbtxt,
model.ckpt-N.meta files and a graph/metadata in its events, which have no meaning without
a TF graph."""
import glob
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from conftest import ROOT, est_ckpt_ls

v1 = tf.compat.v1
F, STEPS, SAVE, KEEP, BATCH, LR, SEED = 8, 250, 100, 2, 32, 0.05, 42


def example_bin():
    build = os.path.dirname(os.environ.get("EST_BIN") or os.path.join(ROOT, "build", "est"))
    return os.path.join(build, "example_logistic_regression")


def run_example(*args):
    p = subprocess.run([example_bin(), *map(str, args)], capture_output=True)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stderr.decode(errors="replace") + p.stdout.decode(errors="replace")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("estimator")
    data, init, est_dir, tf_dir = (str(base / d) for d in ("data", "init", "est", "tf"))
    common = [f"--data_dir={data}", f"--num_features={F}", f"--seed={SEED}", f"--batch_size={BATCH}",
              f"--learning_rate={LR}"]
    run_example("make_data", f"--data_dir={data}", f"--num_features={F}")
    # est's initial values: the model.ckpt-0 of a one-step run
    run_example("train", *common, f"--model_dir={init}", "--max_steps=1", "--keep_checkpoint_max=0")
    run_example("train_and_evaluate", *common, f"--model_dir={est_dir}", f"--max_steps={STEPS}",
                f"--save_checkpoints_steps={SAVE}", f"--keep_checkpoint_max={KEEP}", "--log_step_count_steps=100")
    tf_train_and_evaluate(data, os.path.join(init, "model.ckpt-0"), tf_dir)
    return {"est": est_dir, "tf": tf_dir}


def tf_train_and_evaluate(data, init_ckpt, model_dir):
    specs = {"x": tf.io.FixedLenFeature([F], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}

    def input_fn(path, train):
        def fn():
            ds = tf.data.TFRecordDataset(path)
            if train:
                ds = ds.repeat().shuffle(100, seed=SEED)
            ds = ds.batch(BATCH, drop_remainder=train).map(lambda s: tf.io.parse_example(s, specs))
            return ds.map(lambda f: ({"x": f["x"]}, tf.cast(f["label"], tf.int32)))
        return fn

    def model_fn(features, labels, mode):
        w = v1.get_variable("dense/kernel", [F, 1])
        b = v1.get_variable("dense/bias", [1])
        v1.train.init_from_checkpoint(init_ckpt, {"dense/kernel": "dense/kernel", "dense/bias": "dense/bias"})
        logits = tf.squeeze(tf.matmul(features["x"], w) + b, 1)
        y = tf.cast(labels, tf.float32)
        per_example = tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)
        loss = tf.reduce_mean(per_example)
        if mode == tf.estimator.ModeKeys.TRAIN:
            opt = v1.train.AdamOptimizer(LR)
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=opt.minimize(loss, v1.train.get_global_step()))
        classes = tf.cast(logits > 0, tf.int32)
        probs = tf.sigmoid(logits)
        metrics = {"accuracy": v1.metrics.accuracy(labels, classes), "auc": v1.metrics.auc(labels, probs),
                   "precision": v1.metrics.precision(labels, classes), "recall": v1.metrics.recall(labels, classes),
                   "eval_loss": v1.metrics.mean(per_example)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)

    config = tf.estimator.RunConfig(model_dir=model_dir, tf_random_seed=SEED, save_checkpoints_steps=SAVE,
                                    keep_checkpoint_max=KEEP, log_step_count_steps=100, save_summary_steps=100)
    est = tf.estimator.Estimator(model_fn, config=config)
    tf.estimator.train_and_evaluate(
        est, tf.estimator.TrainSpec(input_fn(os.path.join(data, "train.tf_record"), True), max_steps=STEPS),
        tf.estimator.EvalSpec(input_fn(os.path.join(data, "eval.tf_record"), False), steps=None, throttle_secs=0))


def steps_on_disk(d):
    return sorted(int(p.rsplit("-", 1)[1][:-len(".index")]) for p in glob.glob(os.path.join(d, "model.ckpt-*.index")))


def scalars(d):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util

    out = {}
    for path in glob.glob(os.path.join(d, "events.out.tfevents.*")):
        for ev in EventFileLoader(path).Load():
            for v in ev.summary.value:
                if v.metadata.plugin_data.plugin_name not in ("", "scalars"):
                    continue
                if v.HasField("tensor"):
                    arr = tensor_util.make_ndarray(v.tensor)
                    if arr.dtype.kind not in "fiu":  # TF's eval dir also logs checkpoint_path (a string)
                        continue
                    val = float(arr)
                else:
                    val = v.simple_value
                out.setdefault(v.tag, {})[ev.step] = val
    return out


def test_checkpoint_cadence_and_state_file(runs):
    assert steps_on_disk(runs["est"]) == steps_on_disk(runs["tf"]) == [200, 250]
    e, t = (tf.train.get_checkpoint_state(runs[k]) for k in ("est", "tf"))
    assert os.path.basename(e.model_checkpoint_path) == os.path.basename(t.model_checkpoint_path) == "model.ckpt-250"
    assert [os.path.basename(p) for p in e.all_model_checkpoint_paths] == \
           [os.path.basename(p) for p in t.all_model_checkpoint_paths]


def test_final_checkpoint_variables(runs):
    ours = est_ckpt_ls(runs["est"])
    theirs = tf.train.load_checkpoint(os.path.join(runs["tf"], "model.ckpt-250"))
    tf_vars = {n: (theirs.get_variable_to_dtype_map()[n].name, s) for n, s in theirs.get_variable_to_shape_map().items()}
    est_only = {n for n in ours if n.startswith("est/")}
    assert est_only == {"est/seed", "est/input_state"}
    assert {n: v for n, v in ours.items() if n not in est_only} == tf_vars
    assert theirs.get_tensor("global_step") == 250
    assert tf.train.load_checkpoint(runs["est"]).get_tensor("global_step") == 250


def test_eval_metrics_and_events(runs):
    ev_est, ev_tf = scalars(os.path.join(runs["est"], "eval")), scalars(os.path.join(runs["tf"], "eval"))
    names = {"accuracy", "auc", "precision", "recall", "eval_loss", "loss"}
    assert names <= set(ev_est) and names <= set(ev_tf), (sorted(ev_est), sorted(ev_tf))
    for name in names:
        # evaluated after every checkpoint but the first: the same steps
        assert sorted(ev_est[name]) == sorted(ev_tf[name]), name
        final_e, final_t = ev_est[name][STEPS], ev_tf[name][STEPS]
        tol = 0.03 if name in ("accuracy", "precision", "recall", "loss", "eval_loss") else 0.01
        assert abs(final_e - final_t) <= tol, (name, final_e, final_t)


def test_train_summaries_same_tags_same_steps(runs):
    """What est and TF log during training: the same tags, every save_summary_steps and
    log_step_count_steps, each value stamped with the global step *after* the update
    (1, 101, 201), as TF's SummarySaverHook and StepCounterHook do (est did 0, 100, 200
    until this suite found it)."""
    tr_est, tr_tf = scalars(runs["est"]), scalars(runs["tf"])
    for tag in ("loss", "global_step/sec"):
        assert tag in tr_est and tag in tr_tf, (sorted(tr_est), sorted(tr_tf))
        assert sorted(tr_est[tag]) == sorted(tr_tf[tag]), (tag, sorted(tr_est[tag]), sorted(tr_tf[tag]))
    # the first loss is computed before any update: the same initial values give nearly the
    # same value (the two shuffles put different examples in the first batch)
    assert abs(tr_est["loss"][1] - tr_tf["loss"][1]) < 0.05


def test_train_summary_steps_equal_tfs(runs):
    tr_est, tr_tf = scalars(runs["est"]), scalars(runs["tf"])
    assert sorted(tr_est["loss"]) == sorted(tr_tf["loss"])
