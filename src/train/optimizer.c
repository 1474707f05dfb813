/* Optimizers over the variable store: one flat, chunked loop per step.
 *
 * The store lays every variable out on a 64-byte boundary in one buffer; slots copy that
 * layout. At creation the trainable variables are cut into chunks (adjacent variables with
 * the same weight-decay flag merged, big ones split) and every step runs one OpenMP loop
 * over the chunks. Chunk boundaries never depend on the thread count, and the global norm
 * sums per-chunk partials in chunk order, so a step is bit-identical on 1 or 16 threads
 * (exact resume relies on that).
 *
 * TF evaluates each op separately in float32, so contraction into FMAs is turned off here
 * (gnu11 would otherwise fuse b1*m + c1*g); CMakeLists.txt adds -fno-math-errno for this
 * file so sqrtf vectorises. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "est/optimizer.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

enum { CHUNK_FLOATS = 1 << 15 }; /* 128 KiB of each buffer: fits L2 with 4 streams */

typedef enum { OPT_ADAM_WEIGHT_DECAY, OPT_ADAM, OPT_MOMENTUM } opt_kind;

typedef struct chunk {
  size_t offset, count; /* floats in the store's buffers */
  int decay;            /* AdamWeightDecay: add weight_decay_rate * theta */
} chunk;

struct est_optimizer {
  opt_kind kind;
  est_var_store *vs;
  double init_lr;
  est_lr_schedule schedule;
  double clip_norm;
  /* float32 constants exactly as the TF graph holds them */
  float b1, b2, one_minus_b1, one_minus_b2, eps, weight_decay, momentum;
  int nesterov;
  int nslots;
  float *slots[2];
  const char *suffix[2];
  int nscalars;
  float scalars[2]; /* Adam: beta1_power, beta2_power */
  unsigned char *decays; /* per variable */
  chunk *chunks;
  size_t nchunks;
  double *partials; /* per chunk, for the global norm */
  float last_norm;
};

est_adam_weight_decay_config est_adam_weight_decay_config_default(void) {
  return (est_adam_weight_decay_config){.init_lr = 5e-5, .schedule = est_lr_schedule_bert(0, 0),
                                        .weight_decay_rate = 0.01, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-6,
                                        .clip_norm = 1.0};
}

est_adam_config est_adam_config_default(void) {
  return (est_adam_config){.learning_rate = 0.001, .schedule = est_lr_schedule_constant(), .beta1 = 0.9,
                           .beta2 = 0.999, .epsilon = 1e-8};
}

est_momentum_config est_momentum_config_default(void) {
  return (est_momentum_config){.learning_rate = 0.01, .schedule = est_lr_schedule_constant(), .momentum = 0.9};
}

void est_optimizer_free(est_optimizer *opt) {
  if (!opt) return;
  for (int k = 0; k < opt->nslots; k++) est_free(opt->slots[k]);
  free(opt->decays);
  free(opt->chunks);
  free(opt->partials);
  free(opt);
}

/* Cuts the trainable variables into chunks; `decays` (per variable) may be NULL. */
static est_status build_chunks(est_optimizer *opt) {
  est_var_store *vs = opt->vs;
  size_t nv = est_vars_count(vs), cap = 16;
  opt->chunks = malloc(cap * sizeof *opt->chunks);
  if (!opt->chunks) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the optimizer");
  size_t end_of_last = (size_t)-1; /* end of the previous trainable variable */
  for (size_t i = 0; i < nv; i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (!v->trainable) continue;
    int decay = opt->decays ? opt->decays[i] : 0;
    /* Exactly the variable's elements: the store's padding is never touched, so it stays
     * zero even after a NaN step (it would otherwise poison every later global norm).
     * Neighbours merge when they touch, i.e. when a count is a multiple of 16. */
    size_t off = v->offset, left = v->count;
    chunk *last = opt->nchunks ? &opt->chunks[opt->nchunks - 1] : NULL;
    if (last && end_of_last == off && last->decay == decay && last->count < CHUNK_FLOATS) {
      size_t take = CHUNK_FLOATS - last->count < left ? CHUNK_FLOATS - last->count : left;
      last->count += take;
      off += take;
      left -= take;
    }
    while (left > 0) {
      if (opt->nchunks == cap) {
        cap *= 2;
        chunk *grown = realloc(opt->chunks, cap * sizeof *grown);
        if (!grown) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the optimizer");
        opt->chunks = grown;
      }
      size_t take = left < CHUNK_FLOATS ? left : CHUNK_FLOATS;
      opt->chunks[opt->nchunks++] = (chunk){off, take, decay};
      off += take;
      left -= take;
    }
    end_of_last = v->offset + v->count;
  }
  opt->partials = calloc(opt->nchunks ? opt->nchunks : 1, sizeof *opt->partials);
  if (!opt->partials) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the optimizer");
  return EST_OK;
}

static est_status create(est_optimizer **out, est_var_store *vs, opt_kind kind, int nslots, double lr,
                         const est_lr_schedule *schedule, double clip_norm) {
  *out = NULL;
  if (!vs || !est_vars_finalized(vs))
    return est_error(EST_ERR_FAILED_PRECONDITION, "optimizer: the variable store is not finalized");
  if (!(lr >= 0) || !isfinite(lr)) return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: learning rate %g", lr);
  if (!(clip_norm >= 0) || !isfinite(clip_norm))
    return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: clip_norm %g must be >= 0 (0 = off)", clip_norm);
  if (est_lr_schedule_validate(schedule) != EST_OK) return est_error_prefix("optimizer: ");
  est_optimizer *opt = calloc(1, sizeof *opt);
  if (!opt) return est_error(EST_ERR_NO_MEMORY, "out of memory creating the optimizer");
  opt->kind = kind;
  opt->vs = vs;
  opt->init_lr = lr;
  opt->schedule = *schedule;
  opt->clip_norm = clip_norm;
  opt->nslots = nslots;
  size_t bytes = est_vars_size(vs) * sizeof(float);
  for (int k = 0; k < nslots; k++) {
    opt->slots[k] = est_alloc(bytes ? bytes : 64);
    if (!opt->slots[k]) {
      est_optimizer_free(opt);
      return est_error(EST_ERR_NO_MEMORY, "out of memory allocating %zu bytes of optimizer slots", bytes);
    }
  }
  *out = opt;
  return EST_OK;
}

static est_status check_beta(const char *name, double b) {
  if (!(b >= 0 && b < 1)) return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: %s = %g outside [0, 1)", name, b);
  return EST_OK;
}

est_status est_optimizer_create_adam_weight_decay(est_optimizer **out, est_var_store *vs,
                                                  const est_adam_weight_decay_config *c) {
  est_status st;
  *out = NULL;
  if ((st = check_beta("beta1", c->beta1)) || (st = check_beta("beta2", c->beta2))) return st;
  if (!(c->epsilon >= 0) || !(c->weight_decay_rate >= 0))
    return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: epsilon %g and weight_decay_rate %g must be >= 0",
                     c->epsilon, c->weight_decay_rate);
  est_optimizer *opt;
  if ((st = create(&opt, vs, OPT_ADAM_WEIGHT_DECAY, 2, c->init_lr, &c->schedule, c->clip_norm)))
    return st;
  opt->suffix[0] = "adam_m";
  opt->suffix[1] = "adam_v";
  /* BERT passes Python floats: beta_1 * m is float32(0.9) * m, and (1.0 - beta_1) is
   * computed in double before the cast, which is not 1 - float32(0.9). */
  opt->b1 = (float)c->beta1;
  opt->b2 = (float)c->beta2;
  opt->one_minus_b1 = (float)(1.0 - c->beta1);
  opt->one_minus_b2 = (float)(1.0 - c->beta2);
  opt->eps = (float)c->epsilon;
  opt->weight_decay = (float)c->weight_decay_rate;

  size_t nv = est_vars_count(vs);
  opt->decays = calloc(nv ? nv : 1, 1);
  if (!opt->decays) {
    est_optimizer_free(opt);
    return est_error(EST_ERR_NO_MEMORY, "out of memory creating the optimizer");
  }
  /* _do_use_weight_decay: no decay at all when the rate is 0, else decay unless one of
   * the model's patterns re.search-matches the name. */
  const char *const *pats = c->exclude_from_weight_decay;
  const size_t npats = pats ? c->num_exclude : 0;
  for (size_t i = 0; i < nv; i++) opt->decays[i] = c->weight_decay_rate != 0;
  for (size_t p = 0; p < npats && c->weight_decay_rate != 0; p++) {
    if (!pats[p]) {
      est_optimizer_free(opt);
      return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: exclude_from_weight_decay pattern %zu is NULL", p);
    }
    regex_t re;
    int rc = regcomp(&re, pats[p], REG_EXTENDED | REG_NOSUB);
    if (rc) {
      char msg[128];
      regerror(rc, &re, msg, sizeof msg);
      est_optimizer_free(opt);
      return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: exclude_from_weight_decay pattern '%s': %s", pats[p], msg);
    }
    for (size_t i = 0; i < nv; i++)
      if (regexec(&re, est_vars_at(vs, i)->name, 0, NULL, 0) == 0) opt->decays[i] = 0;
    regfree(&re);
  }
  if ((st = build_chunks(opt))) {
    est_optimizer_free(opt);
    return st;
  }
  *out = opt;
  return EST_OK;
}

est_status est_optimizer_create_adam(est_optimizer **out, est_var_store *vs, const est_adam_config *c) {
  est_status st;
  *out = NULL;
  if ((st = check_beta("beta1", c->beta1)) || (st = check_beta("beta2", c->beta2))) return st;
  if (!(c->epsilon >= 0)) return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: epsilon %g must be >= 0", c->epsilon);
  est_optimizer *opt;
  if ((st = create(&opt, vs, OPT_ADAM, 2, c->learning_rate, &c->schedule, c->clip_norm)))
    return st;
  opt->suffix[0] = "Adam";
  opt->suffix[1] = "Adam_1";
  /* ApplyAdam gets float32 tensors and forms T(1) - beta1() in float32. */
  opt->b1 = (float)c->beta1;
  opt->b2 = (float)c->beta2;
  opt->one_minus_b1 = 1.0f - opt->b1;
  opt->one_minus_b2 = 1.0f - opt->b2;
  opt->eps = (float)c->epsilon;
  opt->nscalars = 2;
  opt->scalars[0] = opt->b1; /* beta1_power's initial value */
  opt->scalars[1] = opt->b2;
  if ((st = build_chunks(opt))) {
    est_optimizer_free(opt);
    return st;
  }
  *out = opt;
  return EST_OK;
}

est_status est_optimizer_create_momentum(est_optimizer **out, est_var_store *vs, const est_momentum_config *c) {
  est_status st;
  *out = NULL;
  if (!(c->momentum >= 0) || !isfinite(c->momentum))
    return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: momentum %g must be >= 0", c->momentum);
  est_optimizer *opt;
  if ((st = create(&opt, vs, OPT_MOMENTUM, 1, c->learning_rate, &c->schedule, c->clip_norm)))
    return st;
  opt->suffix[0] = "Momentum";
  opt->momentum = (float)c->momentum;
  opt->nesterov = c->use_nesterov != 0;
  if ((st = build_chunks(opt))) {
    est_optimizer_free(opt);
    return st;
  }
  *out = opt;
  return EST_OK;
}

/* ---- the step --------------------------------------------------------------------- */

/* Sum of squares of n floats in double, 16 independent lanes so it vectorises; the lane
 * order is fixed, so the result is too. */
static double sum_squares(const float *x, size_t n) {
  double acc[16] = {0};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; l++) acc[l] += (double)x[i + l] * (double)x[i + l];
  for (; i < n; i++) acc[0] += (double)x[i] * (double)x[i];
  double s = 0;
  for (int l = 0; l < 16; l++) s += acc[l];
  return s;
}

static float chunked_global_norm(const chunk *chunks, size_t nchunks, double *partials, const float *grads) {
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t c = 0; c < nchunks; c++) partials[c] = sum_squares(grads + chunks[c].offset, chunks[c].count);
  double total = 0;
  for (size_t c = 0; c < nchunks; c++) total += partials[c];
  return (float)sqrt(total);
}

float est_optimizer_global_norm(est_var_store *vs) {
  double total = 0;
  for (size_t i = 0; i < est_vars_count(vs); i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (v->trainable) total += sum_squares(est_vars_grad(vs, i), v->count);
  }
  return (float)sqrt(total);
}

float est_optimizer_learning_rate(const est_optimizer *opt, int64_t global_step) {
  return est_lr_schedule_value(&opt->schedule, opt->init_lr, global_step);
}

/* AdamWeightDecayOptimizer.apply_gradients, per element, in optimization.py's op order. */
__attribute__((noinline)) static void awd_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t n,
                       float scale, float lr, float b1, float c1, float b2, float c2, float eps, float wd,
                       int decay) {
  if (decay) {
    for (size_t i = 0; i < n; i++) {
      float gi = g[i] * scale;
      float mi = b1 * m[i] + c1 * gi;
      float vi = b2 * v[i] + c2 * (gi * gi);
      float u = mi / (sqrtf(vi) + eps);
      u = u + wd * p[i];
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] - lr * u;
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      float gi = g[i] * scale;
      float mi = b1 * m[i] + c1 * gi;
      float vi = b2 * v[i] + c2 * (gi * gi);
      float u = mi / (sqrtf(vi) + eps);
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] - lr * u;
    }
  }
}

/* TF1 ApplyAdam (training_ops.cc), non-Nesterov. */
__attribute__((noinline)) static void adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t n,
                        float scale, float alpha, float c1, float c2, float eps) {
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] * scale;
    float mi = m[i] + (gi - m[i]) * c1;
    float vi = v[i] + (gi * gi - v[i]) * c2;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] - (mi * alpha) / (sqrtf(vi) + eps);
  }
}

/* TF1 ApplyMomentum (training_ops.cc). */
__attribute__((noinline)) static void momentum_update(float *restrict p, const float *restrict g, float *restrict a, size_t n, float scale,
                            float lr, float mu, int nesterov) {
  if (nesterov) {
    for (size_t i = 0; i < n; i++) {
      float gi = g[i] * scale;
      float ai = a[i] * mu + gi;
      a[i] = ai;
      p[i] = p[i] - (gi * lr + ai * mu * lr);
    }
  } else {
    for (size_t i = 0; i < n; i++) {
      float gi = g[i] * scale;
      float ai = a[i] * mu + gi;
      a[i] = ai;
      p[i] = p[i] - ai * lr;
    }
  }
}

est_status est_optimizer_apply(est_optimizer *opt, int64_t global_step) {
  if (global_step < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "optimizer: global_step %lld is negative", (long long)global_step);
  float *params = est_vars_params(opt->vs), *grads = est_vars_grads(opt->vs);
  float scale = 1.0f;
  if (opt->clip_norm > 0) {
    /* tf.clip_by_global_norm: scale = clip * min(1/norm, 1/clip), plus (norm - norm) so a
     * non-finite norm turns every gradient into NaN. */
    float norm = chunked_global_norm(opt->chunks, opt->nchunks, opt->partials, grads);
    float clip = (float)opt->clip_norm;
    float inv_norm = 1.0f / norm, inv_clip = 1.0f / clip;
    scale = clip * (inv_norm < inv_clip ? inv_norm : inv_clip) + (norm - norm);
    opt->last_norm = norm;
  }
  const float lr = est_optimizer_learning_rate(opt, global_step);
  float alpha = 0;
  if (opt->kind == OPT_ADAM) {
    float b1p = opt->scalars[0], b2p = opt->scalars[1];
    alpha = lr * sqrtf(1.0f - b2p) / (1.0f - b1p);
  }
  const chunk *chunks = opt->chunks;
  float *s0 = opt->slots[0], *s1 = opt->slots[1];
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t c = 0; c < opt->nchunks; c++) {
    size_t o = chunks[c].offset, n = chunks[c].count;
    switch (opt->kind) {
      case OPT_ADAM_WEIGHT_DECAY:
        awd_update(params + o, grads + o, s0 + o, s1 + o, n, scale, lr, opt->b1, opt->one_minus_b1, opt->b2,
                   opt->one_minus_b2, opt->eps, opt->weight_decay, chunks[c].decay);
        break;
      case OPT_ADAM:
        adam_update(params + o, grads + o, s0 + o, s1 + o, n, scale, alpha, opt->one_minus_b1, opt->one_minus_b2,
                    opt->eps);
        break;
      case OPT_MOMENTUM:
        momentum_update(params + o, grads + o, s0 + o, n, scale, lr, opt->momentum, opt->nesterov);
        break;
    }
  }
  if (opt->kind == OPT_ADAM) {
    /* AdamOptimizer._finish: beta powers advance after the update, in float32. */
    opt->scalars[0] = opt->scalars[0] * opt->b1;
    opt->scalars[1] = opt->scalars[1] * opt->b2;
  }
  return EST_OK;
}

/* ---- accessors -------------------------------------------------------------------- */

float est_optimizer_last_global_norm(const est_optimizer *opt) { return opt->last_norm; }
int est_optimizer_num_slots(const est_optimizer *opt) { return opt->nslots; }

const char *est_optimizer_slot_suffix(const est_optimizer *opt, int k) {
  return k >= 0 && k < opt->nslots ? opt->suffix[k] : NULL;
}

float *est_optimizer_slot(est_optimizer *opt, int k) { return k >= 0 && k < opt->nslots ? opt->slots[k] : NULL; }
int est_optimizer_num_scalars(const est_optimizer *opt) { return opt->nscalars; }

const char *est_optimizer_scalar_name(const est_optimizer *opt, int k) {
  static const char *const names[2] = {"beta1_power", "beta2_power"};
  return k >= 0 && k < opt->nscalars ? names[k] : NULL;
}

float *est_optimizer_scalar(est_optimizer *opt, int k) {
  return k >= 0 && k < opt->nscalars ? &opt->scalars[k] : NULL;
}

int est_optimizer_decays(const est_optimizer *opt, size_t index) {
  return opt->decays && index < est_vars_count(opt->vs) ? opt->decays[index] : 0;
}

const char *est_optimizer_name(const est_optimizer *opt) {
  switch (opt->kind) {
    case OPT_ADAM_WEIGHT_DECAY: return "AdamWeightDecay";
    case OPT_ADAM: return "Adam";
    case OPT_MOMENTUM: return "Momentum";
  }
  return "?";
}
