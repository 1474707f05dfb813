/* run_pretraining.py as a task on the driver (est/bert_task.h): its own flags' checks,
 * input_fn_builder over the record files, the masked-LM + next-sentence heads
 * (est/bert_head.h). The shared flags, the Estimator and eval_results.txt are the driver's. */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_pretraining.h"
#include "est/run_pretraining.h"
#include "est/dataset.h"
#include "est/dist.h"
#include "est/estimator.h"
#include "est/example.h"
#include "est/file.h"
#include "est/log.h"
#include "est/bert_task.h"

est_run_pretraining_config est_run_pretraining_config_default(void) {
  est_run_pretraining_config c = {.common = est_task_flags_default()};
  c.max_predictions_per_seq = 20;
  c.num_train_steps = 100000;
  c.num_warmup_steps = 10000;
  c.max_eval_steps = 100;
  return c; /* seed 0: drawn from the clock and recorded in the checkpoint, as before */
}

/* ---- --input_file: comma-separated globs (tf.gfile.Glob each) ------------------------- */

typedef struct file_list {
  char **paths;
  size_t n;
} file_list;

static void file_list_free(file_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->paths[i]);
  free(l->paths);
  l->paths = NULL;
  l->n = 0;
}

static est_status expand_input_files(const char *spec, file_list *out) {
  char *copy = strdup(spec);
  if (!copy) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  est_status st = EST_OK;
  char *save = NULL;
  for (char *pat = strtok_r(copy, ",", &save); pat && !st; pat = strtok_r(NULL, ",", &save)) {
    if (!*pat) continue;
    glob_t g;
    int rc = glob(pat, 0, NULL, &g);
    if (rc == GLOB_NOMATCH) {
      st = est_error(EST_ERR_NOT_FOUND, "--input_file: %s matches no file", pat);
    } else if (rc != 0) {
      st = est_error(EST_ERR_INTERNAL, "--input_file: cannot expand %s", pat);
    } else {
      char **grown = realloc(out->paths, (out->n + g.gl_pathc) * sizeof *grown);
      if (!grown) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
      for (size_t i = 0; !st && i < g.gl_pathc; i++) {
        out->paths = grown;
        if (!(out->paths[out->n] = strdup(g.gl_pathv[i]))) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
        else out->n++;
      }
      globfree(&g);
    }
  }
  free(copy);
  if (!st && out->n == 0) st = est_error(EST_ERR_INVALID_ARGUMENT, "--input_file names no file");
  return st;
}

/* ---- input_fn_builder ------------------------------------------------------------------ */

/* run_pretraining's input_fn_builder as est_tfrecord_input_fn's options (est/estimator.h).
 * Training: the file list repeated and shuffled, min(4, files) files read at a time, a
 * record from each in turn (the reference's num_cpu_threads = 4 cycle; its interleave is
 * sloppy, est's the deterministic order of est_dataset_interleave) -> shuffle(100) ->
 * parse -> batch(drop_remainder). Eval: the files in order, repeated (max_eval_steps
 * bounds it) -> parse -> batch(drop_remainder). Every int64 feature arrives as int32. */
static est_input_fn pt_input_fn(const file_list *files, int64_t S, int64_t P) {
  const est_feature_spec specs[7] = {
    {.key = "input_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "input_mask", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "segment_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {S}},
    {.key = "masked_lm_positions", .dtype = EST_DT_INT64, .rank = 1, .shape = {P}},
    {.key = "masked_lm_ids", .dtype = EST_DT_INT64, .rank = 1, .shape = {P}},
    {.key = "masked_lm_weights", .dtype = EST_DT_FLOAT, .rank = 1, .shape = {P}},
    {.key = "next_sentence_labels", .dtype = EST_DT_INT64, .rank = 1, .shape = {1}},
  };
  const est_tfrecord_input config = {.paths = (const char *const *)files->paths, .num_paths = files->n,
                                     .compression = EST_COMPRESSION_NONE, .specs = specs, .num_specs = 7,
                                     .cast = EST_DATASET_CAST_INT32, .shuffle_buffer = 100, .drop_remainder = 1,
                                     .prefetch = 2, .interleave_cycle_length = files->n < 4 ? (int)files->n : 4,
                                     .eval_repeat = 1};
  return est_tfrecord_input_fn(&config); /* a copy of the file names and specs */
}

/* A record whose fixed-length features disagree with the flags fails in the parser with
 * TF's text, naming the file, record and key; say which flags it is about. */
static est_status explain_length_mismatch(est_status st, const est_run_pretraining_config *c) {
  if (st == EST_OK || !strstr(est_error_message(), "Can't parse serialized Example")) return st;
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", est_error_message());
  return est_error(st, "%s (a feature of another length than the flags give: input_ids/input_mask/segment_ids "
                   "must have --max_seq_length=%lld values and masked_lm_positions/ids/weights "
                   "--max_predictions_per_seq=%lld; the records were written with other flags?)",
                   msg, (long long)c->common.max_seq_length, (long long)c->max_predictions_per_seq);
}

/* ---- the task on the driver (est/bert_task.h) ------------------------------------------ */

typedef struct pretraining_task {
  const est_run_pretraining_config *c;
  est_bert_pretraining_head_params head;
  file_list files;
} pretraining_task;

/* run_pretraining.py's own flags (the shared ones: est_task_flags_validate). */
static est_status task_validate(void *self, const est_task_flags *f) {
  const est_run_pretraining_config *c = ((pretraining_task *)self)->c;
  if (!c->input_file || !*c->input_file) return est_error(EST_ERR_INVALID_ARGUMENT, "flag --input_file must be specified");
  if (f->do_predict)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--do_predict: run_pretraining has no predict mode (TRAIN and EVAL only)");
  const struct {
    const char *name;
    int64_t value;
    bool used;
  } positive[] = {{"max_predictions_per_seq", c->max_predictions_per_seq, true},
                  {"num_train_steps", c->num_train_steps, f->do_train},
                  {"max_eval_steps", c->max_eval_steps, f->do_eval}};
  for (size_t i = 0; i < sizeof positive / sizeof *positive; i++)
    if (positive[i].used && positive[i].value < 1)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%lld: must be at least 1", positive[i].name,
                       (long long)positive[i].value);
  if (c->max_predictions_per_seq > f->max_seq_length)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_predictions_per_seq=%lld exceeds --max_seq_length=%lld",
                     (long long)c->max_predictions_per_seq, (long long)f->max_seq_length);
  if (c->num_warmup_steps < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--num_warmup_steps=%lld: must be >= 0", (long long)c->num_warmup_steps);
  return EST_OK;
}

static est_status task_prepare(void *self, const est_task_flags *f, const est_bert_config *cfg, est_task_model *m) {
  (void)cfg, (void)f;
  pretraining_task *t = self;
  est_status st = expand_input_files(t->c->input_file, &t->files);
  if (st != EST_OK) return st;
  EST_LOG_INFO("*** Input Files ***");
  for (size_t i = 0; i < t->files.n; i++) EST_LOG_INFO("  %s", t->files.paths[i]);
  t->head.max_predictions_per_seq = (int)t->c->max_predictions_per_seq;
  *m = (est_task_model){.head = &est_bert_pretraining_head_type, .head_params = &t->head,
                        .num_train_steps = t->c->num_train_steps, .num_warmup_steps = t->c->num_warmup_steps};
  return EST_OK;
}

/* The same files for training and evaluation, as run_pretraining.py's input_fn_builder. */
static est_status task_open_input(void *self, est_mode mode, est_input_fn *out, int64_t *eval_steps) {
  pretraining_task *t = self;
  const int train = mode == EST_MODE_TRAIN;
  EST_LOG_INFO(train ? "***** Running training *****" : "***** Running evaluation *****");
  EST_LOG_INFO("  Batch size = %lld", (long long)(train ? t->c->common.train_batch_size : t->c->common.eval_batch_size));
  *eval_steps = t->c->max_eval_steps;
  *out = pt_input_fn(&t->files, t->c->common.max_seq_length, t->c->max_predictions_per_seq);
  return EST_OK;
}

/* Validation alone (what the command line runs before MPI starts) or the whole run. */
static est_status run(const est_run_pretraining_config *c, int validate_only) {
  pretraining_task t = {.c = c};
  const est_task task = {.name = "run_pretraining",
                         .self = &t,
                         .do_flags_message = "At least one of `do_train` or `do_eval` must be True.",
                         .validate = task_validate,
                         .prepare = task_prepare,
                         .open_input = task_open_input};
  est_status st = validate_only ? est_task_validate(&task, &c->common)
                                : explain_length_mismatch(est_task_run(&task, &c->common), c);
  file_list_free(&t.files);
  return st;
}

est_status est_run_pretraining_validate(const est_run_pretraining_config *c) { return run(c, 1); }
est_status est_run_pretraining_main(const est_run_pretraining_config *c) { return run(c, 0); }
