/* Export: a checkpoint + vocab + what the model is -> <base>/<version>/ as TF's
 * export_saved_model lays a servable out (variables/, assets/), plus est_model.json.
 * Atomic per version: everything is written under <base>/.tmp-<version>-<pid>/ and that
 * directory is renamed to <base>/<version> (rename of a directory is atomic on POSIX), so a
 * server polling <base> sees either no version or a complete one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/json_error.h"
#include "est/ckpt.h"
#include "est/file.h"
#include "est/hf_model.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/processors.h"
#include "est/serving.h"
#include "est/tokenizer.h"
#include "est/variables.h"
#include "serve/int8_weights.h"
#include "serve/servable_model.h"

/* ---- est_model.json ------------------------------------------------------------------- */

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
  if (!root)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", path, err.line, err.column, est_json_error_text(&err));
  return meta_from_json(m, root, path);
}

est_status est_model_meta_parse(est_model_meta *m, const char *text, size_t size, const char *name) {
  memset(m, 0, sizeof *m);
  json_error_t err;
  json_t *root = json_loadb(text, size, JSON_REJECT_DUPLICATES, &err);
  if (!root)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%d:%d: %s", name, err.line, err.column, est_json_error_text(&err));
  return meta_from_json(m, root, name);
}

/* ---- writing a version ---------------------------------------------------------------- */

static int all_digits(const char *s) {
  if (!*s) return 0;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

/* fsync a directory so a rename inside it survives a crash. */
static est_status sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return est_error(EST_ERR_IO, "open %s: %s", dir, strerror(errno));
  int rc = fsync(fd);
  close(fd);
  if (rc != 0) return est_error(EST_ERR_IO, "fsync %s: %s", dir, strerror(errno));
  return EST_OK;
}

/* The newest version number present under base (0 when none). */
static int64_t newest_version(const char *base) {
  int64_t best = 0;
  DIR *d = opendir(base);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!all_digits(e->d_name) || strlen(e->d_name) > 18) continue;
    int64_t v = strtoll(e->d_name, NULL, 10);
    if (v > best) best = v;
  }
  closedir(d);
  return best;
}

/* Copies the weights the model of meta's shape declares (the encoder and meta's head, as a
 * servable loads them) from the checkpoint into the bundle prefix `dst` (optimizer slots,
 * global_step and est/ tensors stay behind). An int8 export stores the dense layers that
 * run int8 as codes + scales instead (serve/int8_weights.h). */
static est_status write_weights(const char *dst, const char *ckpt_prefix, const est_model_meta *meta) {
  est_var_store *vs = NULL;
  est_servable_model m = {0};
  est_ckpt_writer *w = NULL;
  const int int8 = !strcmp(meta->precision, "int8");
  void **keep = NULL; /* the int8 tensors' memory, until finish */
  est_status st = est_vars_create(&vs);
  if (st == EST_OK) st = est_servable_model_create(&m, meta, vs, "est_model.json");
  if (st == EST_OK) st = est_vars_finalize(vs, 1);
  if (st == EST_OK && (st = est_servable_model_restore(vs, ckpt_prefix)) == EST_ERR_NOT_FOUND) {
    char missing[1024], shape[48] = "";
    snprintf(missing, sizeof missing, "%s", est_error_message());
    if (meta->num_labels) snprintf(shape, sizeof shape, " with %zu labels", meta->num_labels);
    st = est_error(st, "checkpoint %s (is it a %s%s of this bert_config?)", missing, meta->head, shape);
  }
  if (st == EST_OK) st = est_ckpt_writer_open(&w, dst);
  if (st == EST_OK && !(keep = calloc(est_vars_count(vs) + 1, sizeof *keep))) st = est_error(EST_ERR_NO_MEMORY, "export");
  for (size_t i = 0; st == EST_OK && i < est_vars_count(vs); i++) {
    est_tensor t = est_vars_tensor(vs, i);
    const est_variable *v = est_vars_at(vs, i);
    st = int8 && est_int8_stored(v) ? est_int8_weights_add(w, v, est_vars_value(vs, i), &keep[i])
                                    : est_ckpt_writer_add(w, v->name, &t);
  }
  if (st == EST_OK) {
    st = est_ckpt_writer_finish(w); /* frees w */
    w = NULL;
  }
  est_ckpt_writer_abort(w);
  for (size_t i = 0; keep && i < est_vars_count(vs); i++) free(keep[i]);
  free(keep);
  est_servable_model_free(&m);
  est_vars_free(vs);
  return st;
}

est_status est_export_write(const char *export_base, const char *ckpt_prefix, const est_model_meta *meta,
                            const char *vocab_file, char *version_dir, size_t size) {
  est_status st = est_mkdirs(export_base);
  if (st != EST_OK) return st;
  int64_t version = (int64_t)time(NULL);
  int64_t newest = newest_version(export_base);
  if (version <= newest) version = newest + 1;

  char tmp[4096], final[4096], path[4096], name[64];
  snprintf(name, sizeof name, ".tmp-%lld-%ld", (long long)version, (long)getpid());
  if (strlen(export_base) + 80 > sizeof tmp)
    return est_error(EST_ERR_INVALID_ARGUMENT, "export dir %s: path too long", export_base);
  st = est_path_join(tmp, sizeof tmp, export_base, name);
  if (st != EST_OK) return st;
  est_remove_tree(tmp);

  uint8_t *tokenizer_json = NULL;
  size_t tokenizer_json_size = 0;
  char *json = NULL, source_json[4096];
  /* assets/vocab.txt always; a HuggingFace tokenizer.json (--vocab_file=it or a model
   * directory) also as it is, since its settings (e.g. max_input_chars_per_word) are the model's */
  st = est_path_join(path, sizeof path, tmp, "assets");
  if (st == EST_OK) st = est_mkdirs(path);
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "assets/vocab.txt");
  if (st == EST_OK) st = est_vocab_file_write(path, vocab_file, meta->do_lower_case);
  if (st == EST_OK) st = est_tokenizer_json_of(vocab_file, source_json, sizeof source_json);
  if (st == EST_OK && source_json[0]) {
    st = est_read_file(source_json, &tokenizer_json, &tokenizer_json_size);
    if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "assets/tokenizer.json");
    if (st == EST_OK) st = est_write_file_atomic(path, tokenizer_json, tokenizer_json_size);
  }
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "variables/variables");
  if (st == EST_OK) st = write_weights(path, ckpt_prefix, meta);
  if (st == EST_OK) {
    json = est_model_meta_to_json(meta);
    if (!json) st = est_error(EST_ERR_NO_MEMORY, "writing est_model.json");
  }
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "est_model.json");
  if (st == EST_OK) st = est_write_file_atomic(path, json, strlen(json));
  if (st == EST_OK) st = est_path_join(path, sizeof path, tmp, "variables");
  if (st == EST_OK) st = sync_dir(path);
  if (st == EST_OK) st = sync_dir(tmp);
  /* A concurrent exporter may have taken the number meanwhile: take the next one. */
  for (int tries = 0; st == EST_OK; tries++, version++) {
    snprintf(name, sizeof name, "%lld", (long long)version);
    st = est_path_join(final, sizeof final, export_base, name);
    if (st != EST_OK) break;
    if (rename(tmp, final) == 0) break;
    if ((errno != EEXIST && errno != ENOTEMPTY) || tries > 100)
      st = est_error(EST_ERR_IO, "rename %s -> %s: %s", tmp, final, strerror(errno));
  }
  if (st == EST_OK) st = sync_dir(export_base);
  if (st != EST_OK) est_remove_tree(tmp);
  free(tokenizer_json);
  free(json);
  if (st == EST_OK) {
    EST_LOG_INFO("exported %s to %s", ckpt_prefix, final);
    if (version_dir) snprintf(version_dir, size, "%s", final);
  }
  return st;
}

/* ---- a task's --do_export ----------------------------------------------------------------- */

est_status est_export_prepare(const est_task_flags *f, const char *vocab_file, est_model_meta *meta, char *ckpt,
                              size_t ckpt_size) {
  const struct {
    const char *name, *value;
  } required[] = {{"vocab_file", vocab_file}, {"bert_config_file", f->bert_config_file},
                  {"output_dir", f->output_dir}};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--do_export: flag --%s must be specified", required[i].name);
  est_status st = EST_OK;
  if (f->export_checkpoint) snprintf(ckpt, ckpt_size, "%s", f->export_checkpoint);
  else st = est_ckpt_latest(f->output_dir, ckpt, ckpt_size);
  if (st != EST_OK) return est_error_prefix("--do_export: no checkpoint in --output_dir=%s: ", f->output_dir);
  st = est_bert_config_from_json_file(&meta->bert_config, f->bert_config_file);
  if (st != EST_OK) return est_error_prefix("--bert_config_file: ");
  if (f->max_seq_length < 3 || f->max_seq_length > meta->bert_config.max_position_embeddings)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%lld: must be in [3, max_position_embeddings %d]",
                     (long long)f->max_seq_length, meta->bert_config.max_position_embeddings);
  meta->max_seq_length = (int)f->max_seq_length;
  snprintf(meta->precision, sizeof meta->precision, "%s", f->precision ? f->precision : "fp32");
  return EST_OK;
}

est_status est_export_task(const est_task_flags *f, const char *vocab_file, est_model_meta *meta, char *version_dir,
                           size_t size) {
  char ckpt[4096], base[4096];
  est_status st = est_export_prepare(f, vocab_file, meta, ckpt, sizeof ckpt);
  if (st != EST_OK) return st;
  if (f->export_dir && *f->export_dir) snprintf(base, sizeof base, "%s", f->export_dir);
  else if ((st = est_path_join(base, sizeof base, f->output_dir, "export")) != EST_OK) return st;
  return est_export_write(base, ckpt, meta, vocab_file, version_dir, size);
}

/* ---- run_classifier --do_export --------------------------------------------------------- */

est_status est_export_classifier(const est_run_classifier_config *c, const char *export_dir, char *version_dir,
                                 size_t size) {
  if (!c->task_name || !*c->task_name)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--do_export: flag --task_name must be specified");
  est_model_meta meta = {0};
  meta.do_lower_case = c->do_lower_case;
  /* The labels in output order, exactly as run_classifier's processor lists them. */
  est_tsv_task_config tc = est_tsv_task_config_default();
  tc.text_a_column = (int)c->tsv_text_a_column;
  tc.text_b_column = (int)c->tsv_text_b_column;
  tc.label_column = (int)c->tsv_label_column;
  tc.skip_header = c->tsv_skip_header;
  tc.labels = c->tsv_labels;
  est_processor *proc = NULL;
  est_status st = est_processor_create(&proc, c->task_name, &tc);
  if (st != EST_OK) return est_error_prefix("--task_name: ");
  const char *const *labels;
  size_t nlabels;
  st = est_processor_get_labels(proc, c->data_dir, &labels, &nlabels);
  if (st == EST_OK) {
    snprintf(meta.task, sizeof meta.task, "%s", est_processor_name(proc));
    snprintf(meta.head, sizeof meta.head, "%s", est_bert_classifier_head_type.name);
    meta.labels = calloc(nlabels, sizeof *meta.labels);
    if (!meta.labels) st = est_error(EST_ERR_NO_MEMORY, "export labels");
    for (size_t i = 0; st == EST_OK && i < nlabels; i++, meta.num_labels++)
      if (!(meta.labels[i] = strdup(labels[i]))) st = est_error(EST_ERR_NO_MEMORY, "export labels");
  }
  est_processor_free(proc);

  if (st == EST_OK && c->common.export_format && !strcmp(c->common.export_format, "hf")) {
    /* a HuggingFace BertForSequenceClassification directory (docs/hf.md §6) */
    char ckpt[4096], base[4096];
    st = est_export_prepare(&c->common, c->vocab_file, &meta, ckpt, sizeof ckpt);
    if (st == EST_OK) {
      if (export_dir && *export_dir) snprintf(base, sizeof base, "%s", export_dir);
      else st = est_path_join(base, sizeof base, c->common.output_dir, "hf");
    }
    est_hf_export_params hp = {.cfg = &meta.bert_config, .vocab_file = c->vocab_file,
                               .do_lower_case = c->do_lower_case, .labels = (const char *const *)meta.labels,
                               .num_labels = meta.num_labels};
    if (st == EST_OK) st = est_hf_export(ckpt, base, &hp);
    if (st == EST_OK && version_dir) snprintf(version_dir, size, "%s", base);
    est_model_meta_clear(&meta);
    return st;
  }
  est_task_flags f = c->common;
  f.export_dir = export_dir;
  if (st == EST_OK) st = est_export_task(&f, c->vocab_file, &meta, version_dir, size);
  est_model_meta_clear(&meta);
  return st;
}

/* ---- finding a version ------------------------------------------------------------------ */

static int is_complete_version(const char *dir) {
  char p[4096];
  return (est_path_join(p, sizeof p, dir, "est_model.json") == EST_OK && est_file_exists(p)) &&
         (est_path_join(p, sizeof p, dir, "variables/variables.index") == EST_OK && est_file_exists(p));
}

est_status est_export_resolve(const char *path, char *version_dir, size_t size, int64_t *version) {
  return est_export_resolve_below(path, INT64_MAX, version_dir, size, version);
}

est_status est_export_resolve_below(const char *path, int64_t below, char *version_dir, size_t size,
                                    int64_t *version) {
  char p[4096];
  if (below == INT64_MAX && (est_path_join(p, sizeof p, path, "est_model.json") == EST_OK && est_file_exists(p))) {
    const char *slash = strrchr(path, '/');
    const char *leaf = slash ? slash + 1 : path;
    if (version) *version = all_digits(leaf) && strlen(leaf) <= 18 ? strtoll(leaf, NULL, 10) : 0;
    snprintf(version_dir, size, "%s", path);
    return EST_OK;
  }
  DIR *d = opendir(path);
  if (!d) return est_error(EST_ERR_NOT_FOUND, "export dir %s: %s", path, strerror(errno));
  int64_t best = -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!all_digits(e->d_name) || strlen(e->d_name) > 18) continue;
    int64_t v = strtoll(e->d_name, NULL, 10);
    if (v <= best || v >= below || est_path_join(p, sizeof p, path, e->d_name) != EST_OK || !is_complete_version(p)) continue;
    best = v;
  }
  closedir(d);
  if (best < 0)
    return below == INT64_MAX ? est_error(EST_ERR_NOT_FOUND, "export dir %s holds no complete version", path)
                              : est_error(EST_ERR_NOT_FOUND, "export dir %s holds no complete version below %lld",
                                          path, (long long)below);
  char name[32];
  snprintf(name, sizeof name, "%lld", (long long)best);
  if (strlen(path) + strlen(name) + 2 > size)
    return est_error(EST_ERR_INVALID_ARGUMENT, "export dir %s: path too long", path);
  est_status st = est_path_join(version_dir, size, path, name);
  if (st != EST_OK) return st;
  if (version) *version = best;
  return EST_OK;
}
