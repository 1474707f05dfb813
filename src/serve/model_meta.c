/* est_model.json: what a servable is (est_model_meta, est/served_head.h), read and written.
 * The one place its JSON is parsed and printed (keys sorted, indent 2, trailing newline), so
 * an export, a servable and est embed's checkpoint route agree on every field. The fields of
 * every export are here; "head" is looked up in the table of served heads, and that head reads
 * and writes its own fields (est_served_head.read_config, .write_config). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/precision.h"
#include "est/serving.h"

void est_model_meta_clear(est_model_meta *m) {
  for (size_t i = 0; i < m->num_labels; i++) free(m->labels[i]);
  free(m->labels);
  memset(m, 0, sizeof *m);
}

char *est_model_meta_to_json(const est_model_meta *m) {
  const est_served_head *head = est_model_meta_head(m);
  char *cfg_text = est_bert_config_to_json_string(&m->bert_config);
  if (!cfg_text) return NULL;
  json_t *cfg = json_loads(cfg_text, 0, NULL);
  free(cfg_text);
  json_t *labels = json_array();
  for (size_t i = 0; i < m->num_labels; i++) json_array_append_new(labels, json_string(m->labels[i]));
  json_t *root = json_object();
  json_object_set_new(root, "bert_config", cfg);
  json_object_set_new(root, "labels", labels);
  json_object_set_new(root, "max_seq_length", json_integer(m->max_seq_length));
  json_object_set_new(root, "do_lower_case", json_boolean(m->do_lower_case));
  json_object_set_new(root, "task", json_string(m->task));
  json_object_set_new(root, "head", json_string(head->name));
  json_object_set_new(root, "precision", json_string(m->precision[0] ? m->precision : "fp32"));
  /* the head's own fields ("squad": {...}, "pooling": {...}) */
  char *text = !head->write_config || head->write_config(est_model_meta_head_config(m), root) == EST_OK
                   ? json_dumps(root, JSON_SORT_KEYS | JSON_INDENT(2))
                   : NULL;
  json_decref(root);
  if (!text) return NULL;
  size_t n = strlen(text);
  char *out = realloc(text, n + 2);
  if (!out) {
    free(text);
    return NULL;
  }
  out[n] = '\n';
  out[n + 1] = 0;
  return out;
}

/* The fields of a parsed est_model.json (root is consumed); `path` names it in errors. */
static est_status meta_from_json(est_model_meta *m, json_t *root, const char *path) {
  est_status st = EST_OK;
  json_t *cfg = json_object_get(root, "bert_config");
  json_t *labels = json_object_get(root, "labels");
  json_t *seq = json_object_get(root, "max_seq_length");
  json_t *lower = json_object_get(root, "do_lower_case");
  json_t *task = json_object_get(root, "task");
  json_t *head = json_object_get(root, "head");
  json_t *precision = json_object_get(root, "precision");
  /* the head the file names (none: the table's first, the classifier); its labels are
   * required when its outputs are per label */
  const est_served_head *served = head ? est_served_head_find(json_string_value(head)) : est_served_head_at(0);
  est_precision parsed_precision;
  char names[256];
  if (!json_is_object(cfg)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"bert_config\" must be an object", path);
  else if (labels && !json_is_array(labels))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"labels\" must be an array of strings", path);
  else if (served && served->labels && json_array_size(labels) < 1)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"labels\" must be a non-empty array of strings", path);
  else if (!json_is_integer(seq) || json_integer_value(seq) < 3 || json_integer_value(seq) > 1 << 20)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"max_seq_length\" must be an integer >= 3", path);
  else if (!json_is_boolean(lower))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"do_lower_case\" must be true or false", path);
  else if (task && !json_is_string(task))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"task\" must be a string", path);
  else if (head && (!json_is_string(head) || json_string_length(head) >= 32))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"head\" must be a head's name (e.g. \"classifier\")", path);
  else if (!served)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"head\": \"%s\" cannot be served (servable heads: %s)", path,
                   json_string_value(head), est_served_head_names(names, sizeof names));
  else if (precision && (!json_is_string(precision) || est_precision_parse(json_string_value(precision), &parsed_precision)))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"precision\" must be \"fp32\", \"bf16\" or \"int8\"", path);
  if (st == EST_OK) {
    char *cfg_text = json_dumps(cfg, 0);
    st = cfg_text ? est_bert_config_from_json_string(&m->bert_config, cfg_text, path)
                  : est_error(EST_ERR_NO_MEMORY, "%s: bert_config", path);
    free(cfg_text);
  }
  if (st == EST_OK) {
    est_model_meta_set_head(m, served, NULL);
    if (served->read_config) st = served->read_config(m->head_config.bytes, root, path);
  }
  if (st == EST_OK) {
    m->num_labels = labels ? json_array_size(labels) : 0;
    m->labels = calloc(m->num_labels ? m->num_labels : 1, sizeof *m->labels);
    if (!m->labels) st = est_error(EST_ERR_NO_MEMORY, "%s: labels", path);
    for (size_t i = 0; st == EST_OK && i < m->num_labels; i++) {
      json_t *l = json_array_get(labels, i);
      if (!json_is_string(l)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: labels[%zu] must be a string", path, i);
      else if (!(m->labels[i] = strdup(json_string_value(l)))) st = est_error(EST_ERR_NO_MEMORY, "%s: labels", path);
    }
  }
  if (st == EST_OK) {
    m->max_seq_length = (int)json_integer_value(seq);
    m->do_lower_case = json_is_true(lower);
    snprintf(m->task, sizeof m->task, "%s", task ? json_string_value(task) : "");
    snprintf(m->precision, sizeof m->precision, "%s", precision ? json_string_value(precision) : "fp32");
    if (m->max_seq_length > m->bert_config.max_position_embeddings)
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: max_seq_length %d is above max_position_embeddings %d", path,
                     m->max_seq_length, m->bert_config.max_position_embeddings);
  }
  json_decref(root);
  if (st != EST_OK) est_model_meta_clear(m);
  return st;
}
est_status est_model_meta_read(est_model_meta *m, const char *path) {
  memset(m, 0, sizeof *m);
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", path, err.line, err.column, est_json_error_text(&err));
  return meta_from_json(m, root, path);
}

est_status est_model_meta_parse(est_model_meta *m, const char *text, size_t size, const char *name) {
  memset(m, 0, sizeof *m);
  json_error_t err;
  json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", name, err.line, err.column, est_json_error_text(&err));
  return meta_from_json(m, root, name);
}
