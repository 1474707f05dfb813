/* A HuggingFace model directory served as it is, as text-embeddings-inference serves one
 * (issue 49 §5): its config.json read into the est_model_meta an export would hold, the head
 * chosen by the table of served heads (est_served_head.hf_architecture), its weights restored
 * from the directory by the servable (servable_model.c: est_hf_load_vars). No conversion, and
 * nothing here knows a head by name. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/file.h"
#include "est/serving.h"

/* The served head for a transformers class name, or NULL. */
static const est_served_head *head_for(const char *arch) {
  const size_t n = strlen(arch);
  for (size_t i = 0; i < est_served_head_count(); i++) {
    const est_served_head *h = est_served_head_at(i);
    const size_t k = h->hf_architecture ? strlen(h->hf_architecture) : 0;
    if (k && n > k && !strcmp(arch + n - k, h->hf_architecture)) return h;
  }
  return NULL;
}

/* id2label {"0": ..., "1": ...} in id order, else LABEL_i of num_labels. */
static est_status read_labels(est_model_meta *m, const json_t *root, const char *path) {
  const json_t *id2label = json_object_get(root, "id2label"), *num = json_object_get(root, "num_labels");
  size_t n = json_is_object(id2label) ? json_object_size(id2label) : 0;
  if (!n && json_is_integer(num) && json_integer_value(num) > 0 && json_integer_value(num) < 1 << 20)
    n = (size_t)json_integer_value(num);
  if (!n) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: no \"id2label\" or \"num_labels\": the labels of the "
                           "classifier are unknown", path);
  m->labels = calloc(n, sizeof *m->labels);
  if (!m->labels) return est_error(EST_ERR_NO_MEMORY, "%s: labels", path);
  for (size_t i = 0; i < n; i++, m->num_labels++) {
    char key[32], fallback[32];
    snprintf(key, sizeof key, "%zu", i);
    snprintf(fallback, sizeof fallback, "LABEL_%zu", i);
    const json_t *v = json_is_object(id2label) ? json_object_get(id2label, key) : NULL;
    if (json_is_object(id2label) && !json_is_string(v))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"id2label\" must name ids 0 to %zu, each a string; \"%s\" is "
                       "missing or not a string", path, n - 1, key);
    if (!(m->labels[i] = strdup(v ? json_string_value(v) : fallback))) return est_error(EST_ERR_NO_MEMORY, "labels");
  }
  return EST_OK;
}

/* tokenizer_config.json's model_max_length, when the directory has one that is an integer. */
static int model_max_length(const char *dir) {
  char path[4096];
  if (est_path_join(path, sizeof path, dir, "tokenizer_config.json") != EST_OK || !est_file_exists(path)) return 0;
  json_t *root = json_load_file(path, 0, NULL);
  const json_t *v = json_object_get(root, "model_max_length");
  const int n = json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 1 << 20
                    ? (int)json_integer_value(v)
                    : 0;
  json_decref(root);
  return n;
}

est_status est_hf_servable_meta(est_model_meta *m, const char *dir) {
  memset(m, 0, sizeof *m);
  char path[4096];
  est_status st = est_path_join(path, sizeof path, dir, "config.json");
  if (st != EST_OK) return st;
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!json_is_object(root)) {
    json_decref(root);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s", path, root ? "not a JSON object" : est_json_error_text(&err));
  }
  const json_t *archs = json_object_get(root, "architectures");
  const char *arch = json_string_value(json_array_get(archs, 0));
  const est_served_head *head = arch ? head_for(arch) : NULL;
  if (!head) {
    char names[256] = "";
    size_t len = 0;
    for (size_t i = 0; i < est_served_head_count() && len < sizeof names; i++)
      if (est_served_head_at(i)->hf_architecture)
        len += (size_t)snprintf(names + len, sizeof names - len, "%s*%s", len ? ", " : "",
                                est_served_head_at(i)->hf_architecture);
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"architectures\" %s%s%s; est serves a directory of %s (or an "
                   "export of est)", path, arch ? "names " : "is missing", arch ? arch : "",
                   arch ? ", which no served head takes" : "", names);
  }
  if (st == EST_OK) st = est_bert_config_from_json_file(&m->bert_config, dir);
  if (st == EST_OK && head->labels) st = read_labels(m, root, path);
  unsigned char config[EST_MODEL_HEAD_CONFIG_SIZE] = {0};
  if (st == EST_OK && head->hf_config) st = head->hf_config(config, root, path);
  if (st == EST_OK) {
    est_model_meta_set_head(m, head, head->config_size ? config : NULL);
    int S = est_bert_config_max_seq_length(&m->bert_config);
    if (S > 512) S = 512;
    const int tok_max = model_max_length(dir);
    if (tok_max >= 3 && tok_max < S) S = tok_max;
    m->max_seq_length = S;
    m->do_lower_case = true; /* the tokenizer's own setting wins when the servable opens it */
    snprintf(m->task, sizeof m->task, "%s", arch);
    snprintf(m->precision, sizeof m->precision, "fp32");
  }
  json_decref(root);
  if (st != EST_OK) est_model_meta_clear(m);
  return st;
}
