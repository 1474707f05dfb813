/* The Estimator's object, sessions, and checkpoint contents (see est/estimator.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "est/ckpt.h"
#include "est/dist.h"
#include "est/file.h"
#include "est/log.h"
#include "est/optimizer.h"
#include "est/threads.h"
#include "train/estimator_internal.h"

const char *est_mode_name(est_mode mode) {
  switch (mode) {
    case EST_MODE_TRAIN: return "train";
    case EST_MODE_EVAL: return "eval";
    case EST_MODE_PREDICT: return "infer";
  }
  return "?";
}

double est_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int est_is_chief(const est_estimator *e) { return est_run_config_is_chief(&e->config); }
int est_world_size(const est_estimator *e) { return e->config.distribution->world_size; }
int est_rank(const est_estimator *e) { return e->config.distribution->rank; }

/* ---- the estimator ------------------------------------------------------------------ */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

est_status est_estimator_create(est_estimator **out, const est_model_fn *fn, const est_run_config *config) {
  *out = NULL;
  if (!fn || !fn->build || !fn->call)
    return est_error(EST_ERR_INVALID_ARGUMENT, "model_fn needs at least build and call");
  if (est_run_config_validate(config) != EST_OK) return est_error_code();
  est_estimator *e = calloc(1, sizeof *e);
  if (!e) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  e->fn = *fn;
  e->config = *config;
  e->model_dir = strdup(config->model_dir);
  e->warm_start_from = dup_or_null(config->warm_start_from);
  e->warm_start_vars = dup_or_null(config->warm_start_vars);
  if (!e->model_dir || (config->warm_start_from && !e->warm_start_from) ||
      (config->warm_start_vars && !e->warm_start_vars)) {
    est_estimator_free(e);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  e->config.model_dir = e->model_dir;
  e->config.warm_start_from = e->warm_start_from;
  e->config.warm_start_vars = e->warm_start_vars;
  /* The estimator runs on a distribution whatever the config says, so one process takes
   * the same code path as N ranks: the caller's, or one rank's. A one-rank distribution
   * may leave collectives out (each is the identity): est_dist_one_rank's fill them in. */
  const est_distribution *one = est_dist_one_rank();
  e->dist = config->distribution ? *config->distribution : *one;
  if (e->dist.world_size == 1) {
    if (!e->dist.allreduce_mean) e->dist.allreduce_mean = one->allreduce_mean;
    if (!e->dist.allreduce_sum) e->dist.allreduce_sum = one->allreduce_sum;
    if (!e->dist.broadcast) e->dist.broadcast = one->broadcast;
    if (!e->dist.allgather_i64) e->dist.allgather_i64 = one->allgather_i64;
    if (!e->dist.barrier) e->dist.barrier = one->barrier;
    if (!e->dist.gather_rows) e->dist.gather_rows = one->gather_rows;
    if (!e->dist.abort) e->dist.abort = one->abort;
    if (!e->dist.grads_begin) {
      e->dist.grads_begin = one->grads_begin;
      e->dist.grads_ready = one->grads_ready;
      e->dist.grads_finish = one->grads_finish;
    }
  }
  e->config.distribution = &e->dist;
  if (est_is_chief(e) && est_mkdirs(e->model_dir) != EST_OK) {
    est_estimator_free(e);
    return est_error_prefix("model_dir: ");
  }
  if (config->num_threads > 0) est_set_num_threads(config->num_threads);
  est_summaries_init(&e->train_summaries, e->model_dir, est_is_chief(e));
  EST_LOG_INFO("Using config: model_dir = %s, save_checkpoints_steps = %lld, save_checkpoints_secs = %g, "
               "keep_checkpoint_max = %d, log_step_count_steps = %lld, save_summary_steps = %lld, "
               "tf_random_seed = %llu",
               e->model_dir, (long long)config->save_checkpoints_steps, config->save_checkpoints_secs,
               config->keep_checkpoint_max, (long long)config->log_step_count_steps,
               (long long)config->save_summary_steps, (unsigned long long)config->seed);
  *out = e;
  return EST_OK;
}

void est_estimator_free(est_estimator *e) {
  if (!e) return;
  est_summaries_close(&e->train_summaries);
  for (size_t i = 0; i < e->num_eval_summaries; i++) est_summaries_close(&e->eval_summaries[i]);
  free(e->model_dir);
  free(e->warm_start_from);
  free(e->warm_start_vars);
  free(e);
}

const est_run_config *est_estimator_config(const est_estimator *e) { return &e->config; }

est_status est_estimator_latest_checkpoint(const est_estimator *e, char *prefix, size_t size) {
  return est_ckpt_latest(e->model_dir, prefix, size);
}

est_summaries *est_eval_summaries(est_estimator *e, const char *name) {
  char sub[512], dir[4096];
  if (name && *name) snprintf(sub, sizeof sub, "eval_%s", name);
  else snprintf(sub, sizeof sub, "eval");
  int fits = est_path_join(dir, sizeof dir, e->model_dir, sub) == EST_OK;
  if (!fits) EST_LOG_WARN("no evaluation events: %s", est_error_message());
  for (size_t i = 0; i < e->num_eval_summaries; i++)
    if (!strcmp(e->eval_summaries[i].dir, dir)) return &e->eval_summaries[i];
  if (e->num_eval_summaries == EST_MAX_EVAL_WRITERS) {
    /* Recycle the oldest writer; a later eval in its directory opens a new file. */
    est_summaries_close(&e->eval_summaries[0]);
    memmove(&e->eval_summaries[0], &e->eval_summaries[1], (EST_MAX_EVAL_WRITERS - 1) * sizeof e->eval_summaries[0]);
    e->num_eval_summaries--;
  }
  est_summaries *s = &e->eval_summaries[e->num_eval_summaries++];
  est_summaries_init(s, dir, fits && est_is_chief(e));
  return s;
}

est_status est_find_checkpoint(est_estimator *e, const char *given, char *prefix, size_t size) {
  prefix[0] = 0;
  if (given && *given) {
    char index[4200];
    snprintf(index, sizeof index, "%s.index", given);
    if (!est_file_exists(index))
      return est_error(EST_ERR_NOT_FOUND, "checkpoint %s not found (no %s)", given, index);
    snprintf(prefix, size, "%s", given);
    return EST_OK;
  }
  est_status s = est_ckpt_latest(e->model_dir, prefix, size);
  if (s == EST_OK) return EST_OK;
  if (s != EST_ERR_NOT_FOUND) return s;
  char why[1024];
  snprintf(why, sizeof why, "%s", est_error_message());
  /* A state file that names a checkpoint whose files are gone is not "no checkpoint":
   * starting over would silently discard training. */
  est_ckpt_state st;
  est_status rs = est_ckpt_state_read(e->model_dir, &st);
  if (rs == EST_OK) {
    est_ckpt_state_clear(&st);
    return est_error(EST_ERR_NOT_FOUND, "%s; refusing to start over (remove the checkpoint file to do so)", why);
  }
  est_error_clear();
  prefix[0] = 0;
  return EST_OK;
}

/* ---- sessions ----------------------------------------------------------------------- */

static int batch_size_for(const est_estimator *e, est_mode mode) {
  switch (mode) {
    case EST_MODE_TRAIN: return e->config.train_batch_size;
    case EST_MODE_EVAL: return e->config.eval_batch_size;
    case EST_MODE_PREDICT: return e->config.predict_batch_size;
  }
  return 1;
}

est_status est_session_create(est_estimator *e, est_mode mode, uint64_t seed, est_session *s) {
  memset(s, 0, sizeof *s);
  s->mode = mode;
  s->ctx = (est_model_context){.mode = mode, .batch_size = batch_size_for(e, mode), .seed = seed,
                               .params = e->fn.params, .config = &e->config,
                               .grads = mode == EST_MODE_TRAIN ? &s->notifier : NULL,
                               .first_row = mode == EST_MODE_TRAIN
                                                ? (int64_t)est_rank(e) * batch_size_for(e, mode) : 0};
  if (est_vars_create(&s->vars) != EST_OK) return est_error_code();
  EST_LOG_INFO("Calling model_fn.");
  est_status st = e->fn.build(&s->ctx, s->vars, &s->model);
  if (st != EST_OK) {
    est_error_prefix("model_fn %s (%s): ", e->fn.name ? e->fn.name : "", est_mode_name(mode));
    est_session_free(e, s);
    return st;
  }
  EST_LOG_INFO("Done calling model_fn.");
  if (est_vars_count(s->vars) == 0 && mode == EST_MODE_TRAIN) {
    est_session_free(e, s);
    return est_error(EST_ERR_INVALID_ARGUMENT, "model_fn %s declared no variables", e->fn.name ? e->fn.name : "");
  }
  st = est_vars_finalize(s->vars, seed);
  if (st != EST_OK) {
    est_session_free(e, s);
    return st;
  }
  return EST_OK;
}

void est_session_free(est_estimator *e, est_session *s) {
  if (s->model && e->fn.destroy) e->fn.destroy(s->model);
  s->model = NULL;
  est_optimizer_free(s->opt);
  s->opt = NULL;
  est_vars_free(s->vars);
  s->vars = NULL;
}

void est_restored_clear(est_restored *r) {
  free(r->input_state);
  memset(r, 0, sizeof *r);
}

est_status est_read_train_state(const char *prefix, est_restored *out) {
  memset(out, 0, sizeof *out);
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, prefix) != EST_OK) return est_error_code();
  est_status s = EST_OK;
  if (est_ckpt_reader_has(r, EST_CKPT_GLOBAL_STEP)) {
    s = est_ckpt_reader_read_into(r, EST_CKPT_GLOBAL_STEP, EST_DT_INT64, &out->global_step, sizeof(int64_t));
    if (s != EST_OK) est_error_prefix("%s: global_step (int64 scalar): ", prefix);
  }
  if (s == EST_OK && est_ckpt_reader_has(r, EST_CKPT_SEED)) {
    int64_t seed;
    s = est_ckpt_reader_read_into(r, EST_CKPT_SEED, EST_DT_INT64, &seed, sizeof seed);
    if (s != EST_OK) est_error_prefix("%s: " EST_CKPT_SEED " (int64 scalar): ", prefix);
    out->has_seed = 1;
    out->seed = (uint64_t)seed;
  }
  if (s == EST_OK && est_ckpt_reader_has(r, EST_CKPT_INPUT_STATE)) {
    est_dtype dt;
    int rank;
    int64_t dims[EST_MAX_RANK];
    est_ckpt_reader_info(r, EST_CKPT_INPUT_STATE, &dt, &rank, dims);
    if (dt != EST_DT_INT64 || rank != 2 || dims[0] < 1 || dims[1] < 0 || dims[1] > EST_INPUT_STATE_MAX) {
      s = est_error(EST_ERR_DATA_LOSS, "%s: " EST_CKPT_INPUT_STATE " must be int64 [world_size, n<=%d]", prefix,
                    EST_INPUT_STATE_MAX);
    } else {
      size_t count = (size_t)(dims[0] * dims[1]);
      out->input_state = calloc(count ? count : 1, sizeof(int64_t));
      if (!out->input_state) s = est_error(EST_ERR_NO_MEMORY, "out of memory");
      else s = est_ckpt_reader_read_into(r, EST_CKPT_INPUT_STATE, EST_DT_INT64, out->input_state, count * sizeof(int64_t));
      out->input_world = dims[0];
      out->input_n = (size_t)dims[1];
    }
  }
  est_ckpt_reader_close(r);
  if (s != EST_OK) est_restored_clear(out);
  return s;
}

/* Reads variable-shaped float32 data called `name` into dst (the variable's count). */
static est_status restore_float(est_ckpt_reader *r, const char *prefix, const char *name, const est_variable *v,
                                float *dst) {
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  if (est_ckpt_reader_info(r, name, &dt, &rank, dims) != EST_OK)
    return est_error(EST_ERR_NOT_FOUND, "Key %s not found in checkpoint %s", name, prefix);
  int same = rank == v->rank;
  for (int i = 0; same && i < rank; i++) same = dims[i] == v->dims[i];
  if (!same || dt != EST_DT_FLOAT) {
    est_tensor have = {.rank = rank}, want = {.rank = v->rank};
    memcpy(have.dims, dims, sizeof have.dims);
    memcpy(want.dims, v->dims, sizeof want.dims);
    char a[128], b[128];
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "restoring %s: the model has float32 %s but checkpoint %s has %s %s", name,
                     est_shape_string(&want, a, sizeof a), prefix, est_dtype_name(dt) ? est_dtype_name(dt) : "?",
                     est_shape_string(&have, b, sizeof b));
  }
  if (est_ckpt_reader_read_into(r, name, EST_DT_FLOAT, dst, v->count * sizeof(float)) != EST_OK)
    return est_error_prefix("restoring %s from %s: ", name, prefix);
  return EST_OK;
}

est_status est_session_restore(est_estimator *e, est_session *s, const char *prefix, int with_optimizer) {
  (void)e;
  EST_LOG_INFO("Restoring parameters from %s", prefix);
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, prefix) != EST_OK) return est_error_code();
  est_status st = EST_OK;
  for (size_t i = 0; i < est_vars_count(s->vars) && st == EST_OK; i++) {
    const est_variable *v = est_vars_at(s->vars, i);
    st = restore_float(r, prefix, v->name, v, est_vars_value(s->vars, i));
  }
  if (st == EST_OK && with_optimizer && s->opt) {
    for (int k = 0; k < est_optimizer_num_slots(s->opt) && st == EST_OK; k++) {
      float *slot = est_optimizer_slot(s->opt, k);
      for (size_t i = 0; i < est_vars_count(s->vars) && st == EST_OK; i++) {
        const est_variable *v = est_vars_at(s->vars, i);
        if (!v->trainable) continue;
        char name[EST_VAR_NAME_MAX + 64];
        snprintf(name, sizeof name, "%s/%s", v->name, est_optimizer_slot_suffix(s->opt, k));
        st = restore_float(r, prefix, name, v, slot + v->offset);
      }
    }
    for (int k = 0; k < est_optimizer_num_scalars(s->opt) && st == EST_OK; k++) {
      const char *name = est_optimizer_scalar_name(s->opt, k);
      est_variable scalar = {.rank = 0, .count = 1};
      st = restore_float(r, prefix, name, &scalar, est_optimizer_scalar(s->opt, k));
    }
  }
  /* A diverged checkpoint (written by another program, or by est before it refused to
   * save one) would evaluate to NaN metrics, predict NaN probabilities and train on NaN:
   * say so, naming the first bad variable, instead of running on it. */
  size_t bad_var, bad_elem;
  float bad_value;
  if (st == EST_OK && est_first_nonfinite(s->vars, &bad_var, &bad_elem, &bad_value)) {
    char vb[32];
    st = est_error(EST_ERR_INVALID_ARGUMENT,
                   "%s holds non-finite values: variable '%s' element %zu is %s (the model had diverged when "
                   "it was saved); use an earlier checkpoint",
                   prefix, est_vars_at(s->vars, bad_var)->name, bad_elem,
                   est_format_float32(bad_value, vb, sizeof vb));
  }
  s->global_step = 0;
  if (st == EST_OK) {
    if (est_ckpt_reader_has(r, EST_CKPT_GLOBAL_STEP)) {
      st = est_ckpt_reader_read_into(r, EST_CKPT_GLOBAL_STEP, EST_DT_INT64, &s->global_step, sizeof(int64_t));
      if (st != EST_OK) est_error_prefix("%s: global_step (int64 scalar): ", prefix);
    } else {
      EST_LOG_WARN("%s has no global_step; counting from 0", prefix);
    }
  }
  est_ckpt_reader_close(r);
  return st;
}

est_status est_session_initialize(est_estimator *e, est_session *s) {
  est_status st;
  if (e->config.warm_start_from) {
    st = est_warm_start(s->vars, e->config.warm_start_from, e->config.warm_start_vars, NULL);
    if (st != EST_OK) return st;
  }
  if (e->fn.init) {
    st = e->fn.init(s->model, s->vars);
    if (st != EST_OK) return est_error_prefix("model_fn %s init: ", e->fn.name ? e->fn.name : "");
  }
  return EST_OK;
}

est_status est_session_save(est_estimator *e, est_session *s, est_ckpt_manager *m, const int64_t *input_state,
                            int64_t world, size_t n, char *prefix, size_t size) {
  (void)e;
  size_t nvars = est_vars_count(s->vars);
  int nslots = s->opt ? est_optimizer_num_slots(s->opt) : 0;
  int nscalars = s->opt ? est_optimizer_num_scalars(s->opt) : 0;
  size_t cap = nvars * (size_t)(1 + nslots) + (size_t)nscalars + 3;
  const char **names = calloc(cap, sizeof *names);
  char **owned = calloc(cap, sizeof *owned);
  est_tensor *tensors = calloc(cap, sizeof *tensors);
  est_status st = EST_OK;
  if (!names || !owned || !tensors) st = est_error(EST_ERR_NO_MEMORY, "out of memory saving a checkpoint");
  size_t k = 0;
  for (size_t i = 0; st == EST_OK && i < nvars; i++) {
    names[k] = est_vars_at(s->vars, i)->name;
    tensors[k++] = est_vars_tensor(s->vars, i);
  }
  for (int j = 0; st == EST_OK && j < nslots; j++) {
    float *slot = est_optimizer_slot(s->opt, j);
    for (size_t i = 0; st == EST_OK && i < nvars; i++) {
      const est_variable *v = est_vars_at(s->vars, i);
      if (!v->trainable) continue;
      size_t len = strlen(v->name) + strlen(est_optimizer_slot_suffix(s->opt, j)) + 2;
      owned[k] = malloc(len);
      if (!owned[k]) {
        st = est_error(EST_ERR_NO_MEMORY, "out of memory saving a checkpoint");
        break;
      }
      snprintf(owned[k], len, "%s/%s", v->name, est_optimizer_slot_suffix(s->opt, j));
      names[k] = owned[k];
      tensors[k] = est_vars_tensor(s->vars, i);   /* the variable's shape ... */
      tensors[k++].data = slot + v->offset;       /* ... over the slot's data */
    }
  }
  for (int j = 0; st == EST_OK && j < nscalars; j++) {
    names[k] = est_optimizer_scalar_name(s->opt, j);
    tensors[k++] = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 0, .data = est_optimizer_scalar(s->opt, j)};
  }
  int64_t seed = (int64_t)s->ctx.seed;
  if (st == EST_OK) {
    names[k] = EST_CKPT_GLOBAL_STEP;
    tensors[k++] = (est_tensor){.dtype = EST_DT_INT64, .rank = 0, .data = &s->global_step};
    names[k] = EST_CKPT_SEED;
    tensors[k++] = (est_tensor){.dtype = EST_DT_INT64, .rank = 0, .data = &seed};
    if (n > 0 && input_state) {
      names[k] = EST_CKPT_INPUT_STATE;
      tensors[k++] = (est_tensor){.dtype = EST_DT_INT64, .rank = 2, .dims = {world, (int64_t)n},
                                  .data = (void *)input_state};
    }
    st = est_ckpt_manager_save(m, s->global_step, k, names, tensors, prefix, size);
  }
  for (size_t i = 0; owned && i < cap; i++) free(owned[i]);
  free(owned);
  free(names);
  free(tensors);
  return st;
}

/* ---- input ---------------------------------------------------------------------------- */

est_status est_open_input(est_estimator *e, const est_input_fn *fn, est_mode mode, uint64_t seed, est_input *in) {
  memset(in, 0, sizeof *in);
  if (!fn || !fn->open) return est_error(EST_ERR_INVALID_ARGUMENT, "input_fn has no open function");
  est_input_params p = {.mode = mode, .batch_size = batch_size_for(e, mode), .seed = seed,
                        .num_shards = est_world_size(e), .shard_index = est_rank(e),
                        .sharding = e->config.input_sharding};
  est_status st = fn->open(fn->ctx, &p, in);
  if (st != EST_OK) {
    memset(in, 0, sizeof *in);
    return est_error_prefix("input_fn (%s): ", est_mode_name(mode));
  }
  if (!in->next) {
    est_close_input(in);
    return est_error(EST_ERR_INVALID_ARGUMENT, "input_fn (%s) returned an input without next()", est_mode_name(mode));
  }
  return EST_OK;
}

void est_close_input(est_input *in) {
  if (in->close) in->close(in->self);
  memset(in, 0, sizeof *in);
}
