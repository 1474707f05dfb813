/* The one BERT model_fn (est/bert_head.h): the encoder plus any head, plugged into the
 * Estimator. What run_classifier.py's and run_pretraining.py's model_fn_builders share is
 * here once; what differs is the head (src/bert/heads/head_*.c).
 *
 *   build   encoder variables, then the head's; activations for the mode's batch (forward
 *           only outside TRAIN); recompute, gradient-ready reports and the rank's first row
 *           in TRAIN.
 *   init    init_checkpoint on a fresh start, BERT's assignment map (docs/heads.md §3).
 *   call    input_ids / input_mask / segment_ids [B, S] -> encoder -> head; backward in
 *           TRAIN, metrics in EVAL, predictions in PREDICT. The first call logs
 *           "*** Features ***" and, outside TRAIN (where the Estimator does it), the variable
 *           table, as the reference model_fns log both in every mode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/bert_head.h"
#include "est/bert_classifier.h"
#include "est/ckpt.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/optimizer.h"

typedef struct bert_model {
  const est_bert_model_params *p;
  est_bert_encoder *enc;
  void *head;
  uint64_t seed;
  int logged; /* the first call's logs */
} bert_model;

static void bert_destroy(void *model) {
  bert_model *m = model;
  if (!m) return;
  if (m->head) m->p->head->free(m->head);
  est_bert_encoder_free(m->enc);
  free(m);
}

/* The encoder's and heads' per-group "gradients final" calls, passed on to the Estimator,
 * which starts that part's all-reduce while backward goes on (a no-op in one process). */
static void forward_grads_ready(void *grads, size_t offset, size_t count) {
  (void)est_grads_ready(grads, offset, count); /* a failure is kept by the notifier and fails the step */
}

static est_status bert_build(const est_model_context *ctx, est_var_store *vars, void **out) {
  const est_bert_model_params *p = ctx->params;
  const est_bert_head_type *h = p->head;
  if (!h || !h->create || !h->reserve || !h->forward || !h->free)
    return est_error(EST_ERR_INVALID_ARGUMENT, "BERT model_fn: the head needs create, reserve, forward and free");
  bert_model *m = calloc(1, sizeof *m);
  if (!m) return est_error(EST_ERR_NO_MEMORY, "BERT model_fn: out of memory");
  *out = m;
  m->p = p;
  m->seed = ctx->seed;
  const int train = ctx->mode == EST_MODE_TRAIN;
  if (train && !h->backward)
    return est_error(EST_ERR_INVALID_ARGUMENT, "BERT model_fn: the %s head cannot train (no backward)", h->name);
  est_status st = est_bert_encoder_create(&m->enc, &p->bert_config, vars);
  if (!st) est_bert_encoder_set_precision(m->enc, p->precision); /* before the head reads it */
  est_bert_head_context hc = {.mode = ctx->mode, .max_batch = ctx->batch_size, .max_seq_length = p->max_seq_length,
                              .encoder = m->enc, .vars = vars, .params = p->head_params};
  if (!st) st = h->create(&m->head, &hc);
  if (!st && train) est_bert_encoder_set_recompute(m->enc, p->recompute);
  /* EVAL and PREDICT never run backward: their activations need far less memory. */
  if (!st) st = est_bert_encoder_reserve(m->enc, ctx->batch_size, p->max_seq_length, train);
  if (!st && train) est_bert_encoder_log_activations(m->enc, "training", ctx->batch_size, p->max_seq_length);
  if (!st) st = h->reserve(m->head, &hc);
  /* dropout at this rank's rows of the global batch: N ranks train what one process does */
  if (!st) {
    est_bert_encoder_set_first_row(m->enc, ctx->first_row);
    if (h->set_first_row) h->set_first_row(m->head, ctx->first_row);
  }
  if (!st && train && ctx->grads) {
    if (h->set_grads_ready) h->set_grads_ready(m->head, forward_grads_ready, ctx->grads);
    est_bert_encoder_set_grads_ready(m->enc, forward_grads_ready, ctx->grads);
  }
  return st;
}

/* ---- init_checkpoint ------------------------------------------------------------------ */

/* Up to `max` names, comma-separated, into buf: the model's encoder variables the
 * checkpoint did not initialise, or the checkpoint's tensors no variable took. */
static void list_unmatched_variables(const est_var_store *vars, size_t first, size_t last, char *buf, size_t size,
                                     size_t max) {
  size_t len = 0, shown = 0, missing = 0;
  buf[0] = 0;
  for (size_t i = first; i <= last; i++) {
    const est_variable *v = est_vars_at(vars, i);
    if (v->from_checkpoint) continue;
    if (shown < max && len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s%s", shown ? ", " : "", v->name), shown++;
    missing++;
  }
  if (missing > shown && len < size) snprintf(buf + len, size - len, ", ... (%zu more)", missing - shown);
}

/* The checkpoint's tensors no variable took. A HuggingFace model's are named by their TF
 * names (their HF names when the table has none). */
static void list_unused_tensors(const char *checkpoint, const est_var_store *vars, size_t *count, size_t *used,
                                char *buf, size_t size, size_t max) {
  *count = *used = 0;
  buf[0] = 0;
  est_ckpt_reader *r = NULL;
  est_hf_checkpoint *h = NULL;
  /* already read once: cannot fail here */
  if (est_hf_is_checkpoint(checkpoint) ? est_hf_checkpoint_open(&h, checkpoint) : est_ckpt_reader_open(&r, checkpoint))
    return;
  size_t len = 0, shown = 0;
  *count = h ? est_hf_checkpoint_count(h) : est_ckpt_reader_count(r);
  for (size_t i = 0; i < *count; i++) {
    const char *name = h ? est_hf_checkpoint_tf_name(h, i) : est_ckpt_reader_name(r, i);
    if (h && !*name) name = est_hf_checkpoint_hf_name(h, i);
    int v = est_vars_find(vars, name);
    if (v >= 0 && est_vars_at(vars, (size_t)v)->from_checkpoint) {
      (*used)++;
      continue;
    }
    if (shown < max && len < size)
      len += (size_t)snprintf(buf + len, size - len, "%s%s", shown ? ", " : "", name), shown++;
  }
  if (*count - *used > shown && len < size)
    snprintf(buf + len, size - len, ", ... (%zu more)", *count - *used - shown);
  est_ckpt_reader_close(r);
  est_hf_checkpoint_close(h);
}

/* The reference's Scaffold: init_from_checkpoint with get_assignment_map_from_checkpoint.
 * A checkpoint that leaves encoder variables uninitialised is an error unless the user
 * accepted it (est_bert_model_params.init_checkpoint_partial). */
static est_status bert_init(void *model, est_var_store *vars) {
  bert_model *m = model;
  const char *ckpt = m->p->init_checkpoint;
  if (!ckpt || !*ckpt) return EST_OK;
  size_t loaded = 0;
  const int hf = est_hf_is_checkpoint(ckpt); /* a HuggingFace model (docs/hf.md) */
  est_status st = hf ? est_hf_load_vars(vars, ckpt, &loaded) : est_init_from_checkpoint(vars, ckpt, NULL, 0, &loaded);
  if (st != EST_OK) return est_error_prefix("--init_checkpoint=%s: ", ckpt);
  const size_t first = est_bert_encoder_first_variable(m->enc), last = est_bert_encoder_last_variable(m->enc);
  if (hf && !m->p->init_checkpoint_partial && est_hf_require_vars(vars, first, last, ckpt) != EST_OK)
    return est_error_prefix("--init_checkpoint=%s: ", ckpt);
  size_t encoder_loaded = 0;
  for (size_t i = first; i <= last; i++) encoder_loaded += est_vars_at(vars, i)->from_checkpoint != 0;
  const size_t encoder_vars = last - first + 1;
  EST_LOG_INFO("Initialized %zu of %zu variables from %s", loaded, est_vars_count(vars), ckpt);
  /* a HuggingFace model passed est_hf_require_vars: all but a pooler it may lack (the
   * *ForSequenceClassification of RoBERTa, DistilBERT, ELECTRA; BertForQuestionAnswering) */
  if (encoder_loaded == encoder_vars || (hf && !m->p->init_checkpoint_partial)) return EST_OK;
  char missing[1024], unused[1024];
  size_t count, used;
  list_unmatched_variables(vars, first, last, missing, sizeof missing, 4);
  list_unused_tensors(ckpt, vars, &count, &used, unused, sizeof unused, 4);
  if (m->p->init_checkpoint_partial) {
    EST_LOG_WARN("--init_checkpoint=%s initialised %zu of the %zu encoder variables (accepted by "
                 "--init_checkpoint_partial); random: %s", ckpt, encoder_loaded, encoder_vars, missing);
    return EST_OK;
  }
  return est_error(EST_ERR_INVALID_ARGUMENT,
                   "--init_checkpoint=%s initialises %zu of the model's %zu encoder variables (%zu of %zu variables "
                   "in all); %zu of its %zu tensors matched a variable by name. Not initialised: %s. Checkpoint "
                   "tensors no variable took: %s. A BERT checkpoint names its tensors as Google's "
                   "(bert/embeddings/word_embeddings, ...); pass --init_checkpoint_partial to train with the rest "
                   "random",
                   ckpt, encoder_loaded, encoder_vars, loaded, est_vars_count(vars), used, count, missing,
                   count > used ? unused : "none");
}

static est_status bert_create_optimizer(void *model, est_var_store *vars, est_optimizer **out) {
  bert_model *m = model;
  /* optimization.create_optimizer: AdamWeightDecay(weight_decay_rate 0.01, b1 0.9, b2 0.999,
   * eps 1e-6, exclude LayerNorm/layer_norm/bias), clip_by_global_norm(1.0). */
  est_adam_weight_decay_config c = est_adam_weight_decay_config_default();
  c.init_lr = m->p->learning_rate;
  c.schedule = est_lr_schedule_bert(m->p->num_train_steps, m->p->num_warmup_steps);
  c.exclude_from_weight_decay = est_bert_exclude_from_weight_decay;
  c.num_exclude = EST_BERT_NUM_EXCLUDE_FROM_WEIGHT_DECAY;
  return est_optimizer_create_adam_weight_decay(out, vars, &c);
}

/* model_fn's "*** Features ***", sorted by name as the reference iterates sorted keys. */
static void log_features(const est_features *f) {
  EST_LOG_INFO("*** Features ***");
  size_t order[32];
  size_t n = f->count < 32 ? f->count : 32;
  for (size_t i = 0; i < n; i++) order[i] = i;
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && strcmp(f->names[order[j - 1]], f->names[order[j]]) > 0; j--) {
      size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  for (size_t i = 0; i < n; i++) { /* shapes as Python prints a tuple: (32, 128), (32,) */
    const est_tensor *t = &f->tensors[order[i]];
    char shape[64] = "(";
    size_t len = 1;
    for (int d = 0; d < t->rank; d++)
      len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
    snprintf(shape + len, sizeof shape - len, t->rank == 1 ? ",)" : ")");
    EST_LOG_INFO("  name = %s, shape = %s", f->names[order[i]], shape);
  }
}

/* A [B, S] int32 encoder input of the model's sequence length. */
static est_status encoder_input(const est_features *f, const char *name, int S, const est_tensor **t) {
  est_status st = est_features_get(f, name, EST_DT_INT32, 2, t);
  if (st == EST_OK && (*t)->dims[1] != S)
    st = est_error(EST_ERR_INVALID_ARGUMENT,
                   "feature %s has length %lld, expected --max_seq_length=%d (records written with another "
                   "--max_seq_length?)", name, (long long)(*t)->dims[1], S);
  return st;
}

static est_status bert_call(void *model, est_var_store *vars, const est_features *f, est_mode mode,
                            int64_t global_step, est_estimator_spec *spec) {
  bert_model *m = model;
  const est_bert_head_type *h = m->p->head;
  const int B = f->batch_size, S = m->p->max_seq_length;
  if (!m->logged) {
    log_features(f);
    if (mode != EST_MODE_TRAIN) est_log_variables(vars); /* the Estimator logs it for training */
    m->logged = 1;
  }
  if (mode == EST_MODE_PREDICT && !h->predictions)
    return est_error(EST_ERR_UNIMPLEMENTED, "the %s head has no predict mode (TRAIN and EVAL only)", h->name);
  const est_tensor *ids, *mask, *segs;
  est_status st = encoder_input(f, "input_ids", S, &ids);
  if (!st) st = encoder_input(f, "input_mask", S, &mask);
  if (!st) st = encoder_input(f, "segment_ids", S, &segs);
  if (st != EST_OK) return st;
  const int train = mode == EST_MODE_TRAIN, dropout = train && !m->p->no_dropout;
  st = est_bert_encoder_forward(m->enc, ids->data, mask->data, segs->data, B, S, dropout, m->seed,
                                (uint64_t)global_step);
  if (st != EST_OK) return st;
  const est_bert_head_batch b = {.mode = mode, .features = f, .batch = B, .seq_len = S, .training = dropout,
                                 .seed = m->seed, .step = (uint64_t)global_step};
  st = h->forward(m->head, &b, mode == EST_MODE_PREDICT ? NULL : &spec->loss);
  if (st != EST_OK) return st;
  if (train) {
    st = h->backward(m->head);
    return st ? st : est_bert_encoder_backward(m->enc);
  }
  if (mode == EST_MODE_EVAL) return h->update_metrics ? h->update_metrics(m->head, &b) : EST_OK;
  return h->predictions(m->head, &b, spec);
}

static est_status bert_metrics(void *model, est_metric *const **metrics, size_t *n) {
  bert_model *m = model;
  *metrics = NULL;
  *n = 0;
  return m->p->head->metrics ? m->p->head->metrics(m->head, metrics, n) : EST_OK;
}

est_bert_encoder *est_bert_model_encoder(void *model) { return ((bert_model *)model)->enc; }

est_model_fn est_bert_model_fn(const est_bert_model_params *params) {
  est_model_fn fn = {
    .name = params->head ? params->head->name : "bert",
    .params = (void *)params,
    .build = bert_build,
    .init = bert_init,
    .create_optimizer = bert_create_optimizer,
    .call = bert_call,
    .metrics = bert_metrics,
    .destroy = bert_destroy,
  };
  return fn;
}
