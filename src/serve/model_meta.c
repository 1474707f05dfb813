/* est_model.json: what a servable is (est_model_meta, est/serving.h), read and written. The
 * one place its JSON is parsed and printed (keys sorted, indent 2, trailing newline), so an
 * export, a servable and est embed's checkpoint route agree on every field. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/precision.h"
#include "est/serving.h"

void est_model_meta_clear(est_model_meta *m) {
  for (size_t i = 0; i < m->num_labels; i++) free(m->labels[i]);
  free(m->labels);
  memset(m, 0, sizeof *m);
}

char *est_model_meta_to_json(const est_model_meta *m) {
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
  json_object_set_new(root, "head", json_string(m->head[0] ? m->head : "classifier"));
  json_object_set_new(root, "precision", json_string(m->precision[0] ? m->precision : "fp32"));
  if (!strcmp(m->head, "squad")) {
    const est_model_squad *q = &m->squad;
    json_object_set_new(root, "squad",
                        json_pack("{s:i, s:i, s:i, s:i, s:b, s:f}", "doc_stride", q->doc_stride, "max_query_length",
                                  q->max_query_length, "n_best_size", q->n_best_size, "max_answer_length",
                                  q->max_answer_length, "version_2_with_negative", q->version_2_with_negative,
                                  "null_score_diff_threshold", q->null_score_diff_threshold));
  }
  if (!strcmp(m->head, est_bert_pooling_head_type.name)) {
    char modes[64];
    json_object_set_new(root, "pooling", json_pack("{s:s,s:b}", "modes", est_pooling_modes_string(&m->pooling, modes,
                        sizeof modes), "normalize", m->pooling.normalize));
  }
  char *text = json_dumps(root, JSON_SORT_KEYS | JSON_INDENT(2));
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

/* est_model.json's "squad" object: run_squad's prediction flags (head "squad"). */
static est_status squad_from_json(est_model_squad *q, const json_t *o, const char *path) {
  if (!json_is_object(o)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\" must be an object", path);
  const struct {
    const char *name;
    int *dst, lo;
  } ints[] = {{"doc_stride", &q->doc_stride, 1}, {"max_query_length", &q->max_query_length, 0},
              {"n_best_size", &q->n_best_size, 1}, {"max_answer_length", &q->max_answer_length, 1}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    const json_t *v = json_object_get(o, ints[i].name);
    if (!json_is_integer(v) || json_integer_value(v) < ints[i].lo || json_integer_value(v) > 1 << 20)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\".\"%s\" must be an integer >= %d", path, ints[i].name,
                       ints[i].lo);
    *ints[i].dst = (int)json_integer_value(v);
  }
  const json_t *v2 = json_object_get(o, "version_2_with_negative"), *thr = json_object_get(o, "null_score_diff_threshold");
  if (!json_is_boolean(v2))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\".\"version_2_with_negative\" must be true or false", path);
  if (!json_is_number(thr))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"squad\".\"null_score_diff_threshold\" must be a number", path);
  q->version_2_with_negative = json_is_true(v2);
  q->null_score_diff_threshold = json_number_value(thr);
  return EST_OK;
}

/* "pooling": {"modes": "cls,mean", "normalize": false} of a pooling export. */
static est_status pooling_from_json(est_pooling_params *p, const json_t *v, const char *path) {
  const json_t *modes = json_object_get(v, "modes"), *normalize = json_object_get(v, "normalize");
  if (!json_is_object(v) || !json_is_string(modes) || !json_is_boolean(normalize))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: a \"pooling\" head needs \"pooling\": {\"modes\": \"mean\", "
                     "\"normalize\": true} (modes: cls, max, mean, mean_sqrt_len, comma-separated)", path);
  est_status st = est_pooling_params_parse(p, json_string_value(modes), json_is_true(normalize));
  return st == EST_OK ? st : est_error_prefix("%s: \"pooling\".\"modes\": ", path);
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
  /* labels: a classifier's (required there); other heads have none */
  const bool is_classifier = !head || (json_is_string(head) && !strcmp(json_string_value(head), "classifier"));
  const bool is_squad = json_is_string(head) && !strcmp(json_string_value(head), "squad");
  est_precision parsed_precision;
  /* a pooling (sentence-embedding) export has no labels and says how it pools */
  const int pooling = json_is_string(head) && !strcmp(json_string_value(head), est_bert_pooling_head_type.name);
  if (!json_is_object(cfg)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"bert_config\" must be an object", path);
  else if (labels && !json_is_array(labels))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"labels\" must be an array of strings", path);
  else if (is_classifier && json_array_size(labels) < 1)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"labels\" must be a non-empty array of strings", path);
  else if (!json_is_integer(seq) || json_integer_value(seq) < 3 || json_integer_value(seq) > 1 << 20)
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"max_seq_length\" must be an integer >= 3", path);
  else if (!json_is_boolean(lower))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"do_lower_case\" must be true or false", path);
  else if (task && !json_is_string(task))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"task\" must be a string", path);
  else if (head && (!json_is_string(head) || json_string_length(head) >= sizeof m->head))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"head\" must be a head's name (e.g. \"classifier\")", path);
  else if (precision && (!json_is_string(precision) || est_precision_parse(json_string_value(precision), &parsed_precision)))
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: \"precision\" must be \"fp32\", \"bf16\" or \"int8\"", path);
  if (st == EST_OK) {
    char *cfg_text = json_dumps(cfg, 0);
    st = cfg_text ? est_bert_config_from_json_string(&m->bert_config, cfg_text, path)
                  : est_error(EST_ERR_NO_MEMORY, "%s: bert_config", path);
    free(cfg_text);
  }
  if (st == EST_OK && is_squad) st = squad_from_json(&m->squad, json_object_get(root, "squad"), path);
  if (st == EST_OK && pooling) st = pooling_from_json(&m->pooling, json_object_get(root, "pooling"), path);
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
    snprintf(m->head, sizeof m->head, "%s", head ? json_string_value(head) : "classifier");
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
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", path, err.line, err.column, err.text);
  return meta_from_json(m, root, path);
}

est_status est_model_meta_parse(est_model_meta *m, const char *text, size_t size, const char *name) {
  memset(m, 0, sizeof *m);
  json_error_t err;
  json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &err);
  if (!root) return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", name, err.line, err.column, err.text);
  return meta_from_json(m, root, name);
}
