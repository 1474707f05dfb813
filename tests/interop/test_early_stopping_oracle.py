"""tf.estimator's own early stopping and BestExporter as the oracle of est's (docs/hooks.md §4, §6).

est run_classifier trains the 1-layer BERT of conftest.py on glue_mini/MRPC (10 train rows, so
the 408-row dev loss soon stops falling) with --eval_every_steps, --early_stopping_metric=loss,
--early_stopping_patience_steps and --export_best. TF and est shuffle differently, so rather than
train twice this test hands est's evaluations -- the event files est wrote under
<output_dir>/eval/ -- to tensorflow_estimator's own code and compares the decisions:

- `early_stopping.read_eval_metrics` reads est's events: the steps and values of
  eval/results.txt;
- the predicate of `stop_if_no_decrease_hook` (the hook's `_should_stop_fn`, built by TF with
  the same metric, max_steps_without_decrease and min_steps, run_every_steps=1) is asked at each
  evaluation with the evaluations written by then, as TF's hook is in local train_and_evaluate
  (the chief's checkpoint saver, whose listener evaluates, runs before the caller's hooks): the
  first step it says stop is the step est's training ended at (its last checkpoint), and if it
  never says stop est trained to max_steps;
- `BestExporter` (default `_loss_smaller`, its `_get_best_eval_result` over `eval/*.tfevents.*`)
  is run on each evaluation in order with its SavedModel writer replaced by a recorder: the
  steps it exports are exactly the versions est kept under export/best (--exports_to_keep=0),
  and `_get_best_eval_result` over est's files is the newest version's eval_result.txt."""
import os
from unittest import mock

import pytest
import tensorflow as tf
from tensorflow_estimator.python.estimator import early_stopping

from conftest import CONFIG, MRPC_DIR, SEQ, VOCAB, est

EVERY, EPOCHS, BATCH, TRAIN_ROWS = 5, 30, 2, 10
MAX_STEPS = EPOCHS * TRAIN_ROWS // BATCH


def run_est(out, patience):
    log = est("run_classifier", "--task_name=mrpc", "--do_train", "--do_eval", f"--data_dir={MRPC_DIR}",
              f"--vocab_file={VOCAB}", f"--bert_config_file={CONFIG}", f"--output_dir={out}",
              f"--max_seq_length={SEQ}", f"--train_batch_size={BATCH}", "--eval_batch_size=64",
              f"--num_train_epochs={EPOCHS}", "--learning_rate=1e-3", f"--eval_every_steps={EVERY}",
              "--early_stopping_metric=loss", f"--early_stopping_patience_steps={patience}",
              "--export_best", "--exports_to_keep=0", "--num_threads=2", check=False)
    text = log.stderr.decode(errors="replace") + log.stdout.decode(errors="replace")
    assert log.returncode == 0, text
    return text


def results_txt(out):
    """{step: {name: value}} from est's eval/results.txt (`global_step = N, name = v, ...` lines)."""
    rows = {}
    with open(os.path.join(out, "eval", "results.txt")) as f:
        for line in f:
            kv = dict(part.split(" = ") for part in line.strip().split(", "))
            step = int(kv.pop("global_step"))
            rows[step] = {k: float(v) for k, v in kv.items()}
    return rows


def tf_first_stop_step(out, patience, min_steps=0):
    """The first evaluation step at which TF's stop_if_no_decrease_hook predicate says stop, shown
    only the evaluations written up to that step; None if it never does."""
    estimator = tf.estimator.Estimator(lambda features, labels, mode: None, model_dir=os.path.join(out, "tf_unused"))
    hook = early_stopping.stop_if_no_decrease_hook(estimator, "loss", patience, eval_dir=os.path.join(out, "eval"),
                                                   min_steps=min_steps, run_every_secs=None, run_every_steps=1)
    assert isinstance(hook, early_stopping._StopOnPredicateHook)
    evals = early_stopping.read_eval_metrics(os.path.join(out, "eval"))
    for step in evals:
        written = type(evals)((s, m) for s, m in evals.items() if s <= step)
        with mock.patch.object(early_stopping, "read_eval_metrics", lambda eval_dir: written):
            if hook._should_stop_fn():
                return step
    return None


class _Recorder:
    """Stands in for BestExporter's SavedModel writer: records the step of each export."""

    name = "best"

    def __init__(self):
        self.steps = []

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        self.steps.append(int(eval_result["global_step"]))
        return export_path


class _ModelDir:
    def __init__(self, model_dir):
        self.model_dir = model_dir


def tf_best_exports(out):
    """The steps TF's BestExporter exports, run on est's evaluations in step order; and its
    _get_best_eval_result over est's event files."""
    exporter = tf.estimator.BestExporter(name="best", serving_input_receiver_fn=lambda: None, exports_to_keep=None)
    recorder = _Recorder()
    exporter._saved_model_exporter = recorder
    evals = early_stopping.read_eval_metrics(os.path.join(out, "eval"))
    for step, metrics in evals.items():
        eval_result = dict(metrics, global_step=step)
        exporter.export(_ModelDir(out), os.path.join(out, "tf_export"), f"{out}/model.ckpt-{step}", eval_result,
                        is_the_final_export=step >= MAX_STEPS)
    best = exporter._get_best_eval_result(os.path.join(out, "eval/*.tfevents.*"))
    return recorder.steps, best


def est_best_versions(out):
    """[(version, {name: value})] of est's export/best, oldest first, from each eval_result.txt."""
    base = os.path.join(out, "export", "best")
    versions = []
    for d in sorted(os.listdir(base), key=int):
        with open(os.path.join(base, d, "eval_result.txt")) as f:
            versions.append((int(d), {k: float(v) for k, v in (line.strip().split(" = ") for line in f)}))
    return versions


@pytest.mark.parametrize("patience", [10, 15, 1000])
def test_tf_hook_and_best_exporter_decide_as_est(tmp_path, patience):
    out = str(tmp_path / "out")
    log = run_est(out, patience)

    # TF reads est's eval events as est's results.txt says
    evals = early_stopping.read_eval_metrics(os.path.join(out, "eval"))
    written = results_txt(out)
    assert list(evals) == list(written)
    for step, metrics in written.items():
        assert set(evals[step]) >= set(metrics)
        for name, value in metrics.items():
            assert evals[step][name] == pytest.approx(value, rel=1e-6), (step, name)

    last_step = int(os.path.basename(tf.train.latest_checkpoint(out)).rsplit("-", 1)[1])
    assert last_step == max(evals), "est's last checkpoint is its last evaluation"
    stop = tf_first_stop_step(out, patience)
    if stop is None:
        assert last_step == MAX_STEPS and "Requesting early stopping" not in log
    else:
        assert stop == last_step < MAX_STEPS
        # TF's log names the step before (its hook's global step is read before the update);
        # est's names the step it stops at (docs/hooks.md §4)
        assert f"Requesting early stopping at global step {stop}\n" in log

    tf_steps, tf_best = tf_best_exports(out)
    versions = est_best_versions(out)
    assert [int(m["global_step"]) for _, m in versions] == tf_steps
    assert tf_best == evals[tf_steps[-1]]  # the events hold no global_step (TF's eval events neither)
    assert tf_best["loss"] == pytest.approx(versions[-1][1]["loss"], rel=1e-6)


def test_the_runs_above_cover_both_outcomes(tmp_path):
    """The patiences above are chosen so that one run stops early with an export skipped; this
    fails (rather than the comparison passing vacuously) if training ever changes so that the
    dev loss only falls."""
    out = str(tmp_path / "out")
    run_est(out, 10)
    steps = list(results_txt(out))
    tf_steps, _ = tf_best_exports(out)
    assert steps[-1] < MAX_STEPS and len(tf_steps) < len(steps)
