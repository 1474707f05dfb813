/* Reading a HuggingFace BERT's safetensors (one file or a sharded index) into est's
 * variables under Google's TF names (docs/hf.md §1). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/safetensors.h"

typedef struct {
  char *hf;                     /* the tensor's name in its file */
  char tf[EST_VAR_NAME_MAX];    /* "" when the table has no row for it */
  int transpose;
  size_t file;
} hf_entry;

struct est_hf_checkpoint {
  est_model_family family;      /* whose name table (est_hf_family_of) */
  size_t nfiles;
  est_safetensors **files;
  char **paths;
  size_t n;
  hf_entry *e;
};

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

static int in_dir(const char *dir, const char *name) {
  char p[4096];
  return est_path_join(p, sizeof p, dir, name) == EST_OK && est_file_exists(p);
}

int est_hf_is_checkpoint(const char *path) {
  if (!path || !*path) return 0;
  if (est_is_directory(path))
    return in_dir(path, "config.json") || in_dir(path, "model.safetensors") ||
           in_dir(path, "model.safetensors.index.json") || in_dir(path, "pytorch_model.bin");
  return ends_with(path, ".safetensors") || ends_with(path, ".index.json");
}

void est_hf_checkpoint_close(est_hf_checkpoint *h) {
  if (!h) return;
  for (size_t i = 0; i < h->nfiles; i++) {
    est_safetensors_close(h->files[i]);
    free(h->paths[i]);
  }
  for (size_t i = 0; i < h->n; i++) free(h->e[i].hf);
  free(h->files);
  free(h->paths);
  free(h->e);
  free(h);
}

/* Opens one safetensors file and appends its tensors. */
static est_status add_file(est_hf_checkpoint *h, const char *path) {
  for (size_t i = 0; i < h->nfiles; i++)
    if (!strcmp(h->paths[i], path)) return EST_OK; /* an index names each shard many times */
  est_safetensors *st;
  if (est_safetensors_open(&st, path) != EST_OK) return est_error_code();
  est_safetensors **files = realloc(h->files, (h->nfiles + 1) * sizeof *files);
  char **paths = files ? realloc(h->paths, (h->nfiles + 1) * sizeof *paths) : NULL;
  if (files) h->files = files;
  if (paths) h->paths = paths;
  size_t count = est_safetensors_count(st);
  hf_entry *e = paths ? realloc(h->e, (h->n + count + 1) * sizeof *e) : NULL;
  if (e) h->e = e;
  char *copy = e ? strdup(path) : NULL;
  if (!copy) {
    est_safetensors_close(st);
    return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  size_t f = h->nfiles++;
  h->files[f] = st;
  h->paths[f] = copy;
  for (size_t i = 0; i < count; i++) {
    const char *name = est_safetensors_name(st, i);
    for (size_t k = 0; k < h->n; k++)
      if (!strcmp(h->e[k].hf, name))
        return est_error(EST_ERR_INVALID_ARGUMENT, "tensor %s is in both %s and %s", name, h->paths[h->e[k].file],
                         path);
    hf_entry *x = &h->e[h->n];
    memset(x, 0, sizeof *x);
    if (!(x->hf = strdup(name))) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
    x->file = f;
    if (!est_hf_family_name_to_tf(h->family, name, x->tf, sizeof x->tf, &x->transpose)) x->tf[0] = 0;
    h->n++;
  }
  return EST_OK;
}

/* model.safetensors.index.json: {"metadata": {...}, "weight_map": {"tensor": "shard file"}}. */
static est_status add_index(est_hf_checkpoint *h, const char *index) {
  json_error_t err;
  json_t *root = json_load_file(index, 0, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d: %s", index, err.line, est_json_error_text(&err));
  json_t *map = json_object_get(root, "weight_map");
  est_status st = EST_OK;
  if (!json_is_object(map) || !json_object_size(map))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"weight_map\" must be a non-empty object", index);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", index);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  const char *key;
  json_t *file;
  json_object_foreach(map, key, file) {
    if (st != EST_OK) break;
    char path[4096];
    if (!json_is_string(file) || strchr(json_string_value(file), '/'))
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: weight_map[\"%s\"] must name a file beside the index", index, key);
    else if ((st = est_path_join(path, sizeof path, dir, json_string_value(file))) == EST_OK)
      st = add_file(h, path);
  }
  json_decref(root);
  return st;
}

/* The error for a directory holding only PyTorch pickles, which est does not unpickle. */
static est_status pytorch_only(const char *dir) {
  return est_error(EST_ERR_INVALID_ARGUMENT,
                   "%s has pytorch_model.bin but no model.safetensors: est reads safetensors only (a pickle can "
                   "run code). Convert it once with: python -c \"import torch, safetensors.torch as s; "
                   "s.save_file({k: v.clone().contiguous() for k, v in torch.load('%s/pytorch_model.bin', "
                   "map_location='cpu').items()}, '%s/model.safetensors', metadata={'format': 'pt'})\"",
                   dir, dir, dir);
}

static est_status open_path(est_hf_checkpoint *h, const char *path) {
  if (!est_is_directory(path)) {
    if (!est_file_exists(path)) return est_error(EST_ERR_NOT_FOUND, "%s does not exist", path);
    return ends_with(path, ".index.json") ? add_index(h, path) : add_file(h, path);
  }
  char p[4096];
  est_status st;
  if ((st = est_path_join(p, sizeof p, path, "model.safetensors")) != EST_OK) return st;
  if (est_file_exists(p)) return add_file(h, p);
  if ((st = est_path_join(p, sizeof p, path, "model.safetensors.index.json")) != EST_OK) return st;
  if (est_file_exists(p)) return add_index(h, p);
  if (in_dir(path, "pytorch_model.bin")) return pytorch_only(path);
  return est_error(EST_ERR_NOT_FOUND,
                   "%s has neither model.safetensors nor model.safetensors.index.json (a HuggingFace model "
                   "directory; for a TF checkpoint give its prefix, e.g. .../bert_model.ckpt)", path);
}

est_status est_hf_checkpoint_open(est_hf_checkpoint **out, const char *path) {
  *out = NULL;
  est_hf_checkpoint *h = calloc(1, sizeof *h);
  if (!h) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  h->family = est_hf_family_of(path);
  est_status st = open_path(h, path);
  if (st != EST_OK) {
    est_hf_checkpoint_close(h);
    return st;
  }
  *out = h;
  return EST_OK;
}

size_t est_hf_checkpoint_count(const est_hf_checkpoint *h) { return h->n; }
const char *est_hf_checkpoint_hf_name(const est_hf_checkpoint *h, size_t i) { return h->e[i].hf; }
const char *est_hf_checkpoint_tf_name(const est_hf_checkpoint *h, size_t i) { return h->e[i].tf; }

static void shape_text(char *buf, size_t size, int rank, const int64_t *dims) {
  est_tensor t = {.rank = rank};
  for (int i = 0; i < rank && i < EST_MAX_RANK; i++) t.dims[i] = dims[i];
  est_shape_string(&t, buf, size);
}

/* Entry x as float32 into dst, in TF's layout (tf_dims, rank): Linear weights transposed. */
static est_status read_tf_layout(est_hf_checkpoint *h, const hf_entry *x, float *dst, const int64_t *tf_dims,
                                 int rank) {
  const char *path = h->paths[x->file];
  size_t count = 1;
  for (int i = 0; i < rank; i++) count *= (size_t)tf_dims[i];
  size_t bytes = count * sizeof(float);
  if (!(x->transpose && rank == 2)) {
    if (est_safetensors_read_into(h->files[x->file], x->hf, EST_DT_FLOAT, dst, bytes) != EST_OK)
      return est_error_prefix("%s: ", path);
    return EST_OK;
  }
  float *tmp = malloc(bytes ? bytes : 1);
  if (!tmp) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory reading %s", path, x->hf);
  if (est_safetensors_read_into(h->files[x->file], x->hf, EST_DT_FLOAT, tmp, bytes) != EST_OK) {
    free(tmp);
    return est_error_prefix("%s: ", path);
  }
  /* HF weight[out=O][in=I] -> TF kernel[in][out] */
  const int64_t I = tf_dims[0], O = tf_dims[1];
  for (int64_t o = 0; o < O; o++)
    for (int64_t i = 0; i < I; i++) dst[i * O + o] = tmp[o * I + i];
  free(tmp);
  return EST_OK;
}

/* Loads entry x into variable v: dtype and shape checked, Linear weights transposed. */
static est_status load_one(est_hf_checkpoint *h, const hf_entry *x, est_var_store *vs, size_t v) {
  const est_variable *var = est_vars_at(vs, v);
  est_safetensors *st = h->files[x->file];
  const char *path = h->paths[x->file];
  const char *dtype = est_safetensors_dtype_string(st, x->hf);
  if (strcmp(dtype, "F32") && strcmp(dtype, "F16") && strcmp(dtype, "BF16"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor %s (for variable %s) has dtype %s; est reads F32, F16 "
                     "and BF16 (widened to float32)", path, x->hf, var->name, dtype);
  int rank;
  int64_t dims[EST_MAX_RANK], want[EST_MAX_RANK];
  if (est_safetensors_info(st, x->hf, NULL, &rank, dims) != EST_OK) return est_error_code();
  for (int i = 0; i < var->rank; i++) want[i] = var->dims[i];
  if (x->transpose && var->rank == 2) want[0] = var->dims[1], want[1] = var->dims[0];
  int same = rank == var->rank;
  for (int i = 0; same && i < rank; i++) same = dims[i] == want[i];
  if (!same) {
    char have[128], need[128];
    shape_text(have, sizeof have, rank, dims);
    shape_text(need, sizeof need, var->rank, want);
    if (strncmp(var->name, "bert/", 5)) {
      /* a task head of another size (3 labels saved, 2 in this task): the head starts
       * fresh, as transformers' from_pretrained(ignore_mismatched_sizes=True) does */
      EST_LOG_WARN("%s: tensor %s has shape %s but this task's %s is %s: %s not initialised from it", path, x->hf,
                   have, var->name, need, var->name);
      return EST_OK;
    }
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor %s has shape %s but variable %s needs %s%s", path, x->hf,
                     have, var->name, need, x->transpose ? " (a Linear weight [out, in])" : "");
  }
  if (read_tf_layout(h, x, est_vars_value(vs, v), var->dims, var->rank) != EST_OK) return est_error_code();
  est_vars_at_mutable(vs, v)->from_checkpoint = 1;
  return EST_OK;
}

est_status est_hf_checkpoint_read(est_hf_checkpoint *h, size_t i, est_tensor *out) {
  const hf_entry *x = &h->e[i];
  est_safetensors *st = h->files[x->file];
  int rank;
  int64_t dims[EST_MAX_RANK];
  if (est_safetensors_info(st, x->hf, NULL, &rank, dims) != EST_OK) return est_error_code();
  const int transpose = x->transpose && rank == 2;
  if (transpose) {
    int64_t d0 = dims[0];
    dims[0] = dims[1], dims[1] = d0;
  }
  est_status s = est_tensor_alloc(out, EST_DT_FLOAT, rank, dims);
  if (s != EST_OK) return s;
  if ((s = read_tf_layout(h, x, out->data, dims, rank)) != EST_OK) est_tensor_free(out);
  return s;
}

est_status est_hf_checkpoint_load_vars(est_hf_checkpoint *h, est_var_store *vs, size_t *loaded) {
  size_t count = 0;
  if (loaded) *loaded = 0;
  for (size_t i = 0; i < h->n; i++) {
    if (!h->e[i].tf[0]) continue;
    int v = est_vars_find(vs, h->e[i].tf);
    if (v < 0 || !est_vars_at(vs, (size_t)v)->trainable) continue;
    if (load_one(h, &h->e[i], vs, (size_t)v) != EST_OK) return est_error_code();
    count += est_vars_at(vs, (size_t)v)->from_checkpoint != 0;
  }
  if (loaded) *loaded = count;
  return EST_OK;
}

est_status est_hf_load_vars(est_var_store *vs, const char *path, size_t *loaded) {
  est_hf_checkpoint *h;
  if (est_hf_checkpoint_open(&h, path) != EST_OK) return est_error_code();
  est_status st = est_hf_checkpoint_load_vars(h, vs, loaded);
  est_hf_checkpoint_close(h);
  return st;
}

est_status est_hf_require_vars(const est_var_store *vs, size_t first, size_t last, const char *path) {
  const est_model_family family = est_hf_family_of(path);
  for (size_t i = first; i <= last && i < est_vars_count(vs); i++) {
    const est_variable *v = est_vars_at(vs, i);
    if (!v->trainable || v->from_checkpoint) continue;
    /* BertForQuestionAnswering and BertForTokenClassification save no pooler (transformers
     * builds them with add_pooling_layer=False); it keeps its initial values, as there */
    if (!strncmp(v->name, "bert/pooler/", 12)) continue;
    char hf[EST_VAR_NAME_MAX + 32];
    if (!est_hf_family_name_from_tf(family, v->name, hf, sizeof hf, NULL)) snprintf(hf, sizeof hf, "(none for %s)", v->name);
    return est_error(EST_ERR_NOT_FOUND, "%s has no tensor %s, which the model needs for variable %s", path, hf,
                     v->name);
  }
  return EST_OK;
}
