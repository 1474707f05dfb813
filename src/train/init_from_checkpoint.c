/* Initialising variables from a checkpoint: BERT's get_assignment_map_from_checkpoint +
 * tf.train.init_from_checkpoint, tf.estimator's warm start, and the variable listing. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/estimator.h"
#include "est/log.h"

/* "model.ckpt" names without the ":0" that TF graph names carry. */
static size_t strip_output_suffix(const char *name) {
  size_t len = strlen(name);
  size_t i = len;
  while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--;
  if (i < len && i > 0 && name[i - 1] == ':') return i - 1;
  return len;
}

static int find_var(const est_var_store *vs, const char *name) {
  size_t len = strip_output_suffix(name);
  char buf[EST_VAR_NAME_MAX];
  if (len >= sizeof buf) return -1;
  memcpy(buf, name, len);
  buf[len] = 0;
  return est_vars_find(vs, buf);
}

void est_assignment_map_free(est_assignment *map, size_t n) {
  if (!map) return;
  for (size_t i = 0; i < n; i++) {
    free(map[i].checkpoint_name);
    free(map[i].variable_name);
  }
  free(map);
}

est_status est_assignment_map_from_checkpoint(const est_var_store *vs, const char *checkpoint,
                                              est_assignment **out, size_t *n) {
  *out = NULL;
  *n = 0;
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, checkpoint) != EST_OK) return est_error_prefix("init_checkpoint: ");
  size_t count = est_ckpt_reader_count(r);
  est_assignment *map = calloc(count ? count : 1, sizeof *map);
  if (!map) {
    est_ckpt_reader_close(r);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  size_t m = 0;
  /* The reader lists names sorted, as tf.train.list_variables does: the map follows. */
  for (size_t i = 0; i < count; i++) {
    const char *name = est_ckpt_reader_name(r, i);
    int v = est_vars_find(vs, name);
    if (v < 0 || !est_vars_at(vs, (size_t)v)->trainable) continue;
    map[m].checkpoint_name = strdup(name);
    map[m].variable_name = strdup(name);
    if (!map[m].checkpoint_name || !map[m].variable_name) {
      est_assignment_map_free(map, m + 1);
      est_ckpt_reader_close(r);
      return est_error(EST_ERR_NO_MEMORY, "out of memory");
    }
    m++;
  }
  est_ckpt_reader_close(r);
  *out = map;
  *n = m;
  return EST_OK;
}

static void shape_text(char *buf, size_t size, int rank, const int64_t *dims) {
  est_tensor t = {.rank = rank};
  for (int i = 0; i < rank && i < EST_MAX_RANK; i++) t.dims[i] = dims[i];
  est_shape_string(&t, buf, size);
}

/* Loads checkpoint tensor `cname` into variable `index`, checking dtype and shape. */
static est_status load_one(est_ckpt_reader *r, const char *checkpoint, est_var_store *vs, size_t index,
                           const char *cname) {
  const est_variable *v = est_vars_at(vs, index);
  est_dtype dt;
  int rank;
  int64_t dims[EST_MAX_RANK];
  est_status s = est_ckpt_reader_info(r, cname, &dt, &rank, dims);
  if (s != EST_OK)
    return est_error(EST_ERR_NOT_FOUND, "Key %s not found in checkpoint %s (wanted for variable %s)", cname,
                     checkpoint, v->name);
  char want[128], have[128];
  shape_text(want, sizeof want, v->rank, v->dims);
  shape_text(have, sizeof have, rank, dims);
  if (dt != EST_DT_FLOAT && dt != EST_DT_HALF && dt != EST_DT_BFLOAT16)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "variable %s is float32 %s in the model but %s %s as %s in checkpoint %s", v->name, want,
                     est_dtype_name(dt) ? est_dtype_name(dt) : "?", have, cname, checkpoint);
  int same = rank == v->rank;
  for (int i = 0; same && i < rank; i++) same = dims[i] == v->dims[i];
  if (!same)
    return est_error(EST_ERR_FAILED_PRECONDITION,
                     "variable %s has shape %s in the model but %s has shape %s in checkpoint %s", v->name, want,
                     cname, have, checkpoint);
  s = est_ckpt_reader_read_into(r, cname, EST_DT_FLOAT, est_vars_value(vs, index), v->count * sizeof(float));
  if (s != EST_OK) return est_error_prefix("loading variable %s from %s: ", v->name, checkpoint);
  est_vars_at_mutable(vs, index)->from_checkpoint = 1;
  return EST_OK;
}

static int ends_with_slash(const char *s) {
  size_t n = strlen(s);
  return n > 0 && s[n - 1] == '/';
}

est_status est_init_from_checkpoint(est_var_store *vs, const char *checkpoint, const est_assignment *map, size_t n,
                                    size_t *loaded) {
  if (loaded) *loaded = 0;
  est_assignment *own = NULL;
  if (!map) {
    if (est_assignment_map_from_checkpoint(vs, checkpoint, &own, &n) != EST_OK) return est_error_code();
    map = own;
  }
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, checkpoint) != EST_OK) {
    est_assignment_map_free(own, n);
    return est_error_prefix("init_checkpoint: ");
  }
  est_status s = EST_OK;
  size_t count = 0;
  for (size_t i = 0; i < n && s == EST_OK; i++) {
    const char *cn = map[i].checkpoint_name, *vn = map[i].variable_name;
    if (ends_with_slash(cn) && ends_with_slash(vn)) {
      /* Scope mapping: every checkpoint tensor under cn goes to the same name under vn. */
      size_t cl = strlen(cn);
      size_t matched = 0;
      for (size_t k = 0; k < est_ckpt_reader_count(r) && s == EST_OK; k++) {
        const char *name = est_ckpt_reader_name(r, k);
        if (strncmp(name, cn, cl)) continue;
        char target[2 * EST_VAR_NAME_MAX];
        snprintf(target, sizeof target, "%s%s", vn, name + cl);
        int v = est_vars_find(vs, target);
        if (v < 0) continue;  /* slots, global_step etc. under the scope are not variables */
        s = load_one(r, checkpoint, vs, (size_t)v, name);
        matched++;
        count++;
      }
      if (s == EST_OK && !matched)
        s = est_error(EST_ERR_NOT_FOUND, "init_from_checkpoint: no variable of scope %s found in checkpoint %s", cn,
                      checkpoint);
      continue;
    }
    int v = find_var(vs, vn);
    if (v < 0) {
      s = est_error(EST_ERR_NOT_FOUND, "init_from_checkpoint: variable %s (from checkpoint tensor %s) is not in the model",
                    vn, cn);
      break;
    }
    s = load_one(r, checkpoint, vs, (size_t)v, cn);
    count += s == EST_OK;
  }
  est_ckpt_reader_close(r);
  est_assignment_map_free(own, own ? n : 0);
  if (loaded) *loaded = count;
  return s;
}

est_status est_warm_start(est_var_store *vs, const char *checkpoint, const char *vars_regex, size_t *loaded) {
  if (loaded) *loaded = 0;
  regex_t re;
  int rc = regcomp(&re, vars_regex ? vars_regex : ".*", REG_EXTENDED | REG_NOSUB);
  if (rc) {
    char msg[256];
    regerror(rc, &re, msg, sizeof msg);
    return est_error(EST_ERR_INVALID_ARGUMENT, "warm_start_vars '%s' is not a regular expression: %s", vars_regex,
                     msg);
  }
  est_ckpt_reader *r;
  if (est_ckpt_reader_open(&r, checkpoint) != EST_OK) {
    regfree(&re);
    return est_error_prefix("warm_start_from: ");
  }
  est_status s = EST_OK;
  size_t count = 0;
  for (size_t i = 0; i < est_vars_count(vs) && s == EST_OK; i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (regexec(&re, v->name, 0, NULL, 0) != 0 || !est_ckpt_reader_has(r, v->name)) continue;
    s = load_one(r, checkpoint, vs, i, v->name);
    count += s == EST_OK;
  }
  est_ckpt_reader_close(r);
  regfree(&re);
  if (loaded) *loaded = count;
  if (s == EST_OK) EST_LOG_INFO("Warm-started %zu variables from %s.", count, checkpoint);
  return s;
}

void est_log_variables(const est_var_store *vs) {
  EST_LOG_INFO("**** Trainable Variables ****");
  for (size_t i = 0; i < est_vars_count(vs); i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (!v->trainable) continue;
    /* Python's tuple repr of a TensorShape: (768, 768), (768,), (). */
    char shape[256];
    size_t len = 0;
    len += (size_t)snprintf(shape + len, sizeof shape - len, "(");
    for (int d = 0; d < v->rank && len < sizeof shape; d++)
      len += (size_t)snprintf(shape + len, sizeof shape - len, "%s%lld", d ? ", " : "", (long long)v->dims[d]);
    if (len < sizeof shape) snprintf(shape + len, sizeof shape - len, "%s)", v->rank == 1 ? "," : "");
    /* var.name in TF carries the output suffix: "bert/embeddings/word_embeddings:0". */
    EST_LOG_INFO("  name = %s:0, shape = %s%s", v->name, shape, v->from_checkpoint ? ", *INIT_FROM_CKPT*" : "");
  }
}
