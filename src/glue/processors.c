/* run_classifier.py's DataProcessors as data: one row of TASKS per task holds everything
 * that differs between tasks -- its labels, the metric it reports besides accuracy (F1 for
 * MRPC, MCC for CoLA), whether it has a test set, and per split the row layout: which
 * file, whether its first line is a header, which columns hold text_a / text_b / label /
 * guid, and XNLI's quirks (a language in the file name and a language column, the
 * "contradictory" label). One loop turns TSV rows into InputExamples (docs/run_classifier.md
 * §3; the reference's _create_examples in google-research/bert run_classifier.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "est/file.h"
#include "glue/processors_internal.h"

enum { COL_NONE = -1, COL_LAST = -3 };

/* One split of one task, as the reference's get_*_examples reads it. */
typedef struct split_layout {
  const char *file;           /* relative to data_dir; NULL: the task has no such split */
  bool file_has_language;     /* file is "<prefix>%s<suffix>" with the language (XNLI train) */
  const char *set;            /* guid prefix; NULL: the split's name */
  bool skip_header;
  int a, b, label;            /* columns; COL_NONE; label COL_LAST = the row's last field */
  int guid_col;               /* COL_NONE: guid = set-<row index>; else set-<that field> */
  int lang_col;               /* XNLI dev: keep rows whose lang_col equals the language */
  bool contradictory;         /* XNLI train: "contradictory" -> "contradiction" */
} split_layout;

/* file, set, header, text_a, text_b, label, guid column (no language filter). */
#define SPLIT(file, set, header, a, b, label, guid) {file, false, set, header, a, b, label, guid, COL_NONE, false}

typedef struct task_def {
  const char *name;           /* canonical, lower case */
  const char *alias;          /* also accepted, or NULL */
  const char *const *labels;  /* NULL: the generic tsv task (labels from the config or the file) */
  size_t nlabels;
  const char *dummy_label;    /* what an example without a label column gets (test files) */
  est_task_metric metric;
  split_layout split[3];      /* train, dev, test; the tsv task builds its own */
} task_def;

static const char *const BINARY[] = {"0", "1"};
static const char *const NLI[] = {"contradiction", "entailment", "neutral"};
static const char *const ENTAIL[] = {"entailment", "not_entailment"};
#define LABELS(l) l, sizeof l / sizeof *l

static const task_def TASKS[] = {
  {"cola", NULL, LABELS(BINARY), "0", EST_TASK_METRIC_MCC,
   {SPLIT("train.tsv", NULL, false, 3, COL_NONE, 1, COL_NONE),   /* only CoLA's test file has a header */
    SPLIT("dev.tsv", NULL, false, 3, COL_NONE, 1, COL_NONE),
    SPLIT("test.tsv", NULL, true, 1, COL_NONE, COL_NONE, COL_NONE)}},
  {"mnli", NULL, LABELS(NLI), "contradiction", EST_TASK_METRIC_NONE,
   {SPLIT("train.tsv", "train", true, 8, 9, COL_LAST, 0),
    SPLIT("dev_matched.tsv", "dev_matched", true, 8, 9, COL_LAST, 0),
    SPLIT("test_matched.tsv", "test", true, 8, 9, COL_NONE, 0)}},
  {"mnli-mm", "mnli_mismatched", LABELS(NLI), "contradiction", EST_TASK_METRIC_NONE,
   {SPLIT("train.tsv", "train", true, 8, 9, COL_LAST, 0),
    SPLIT("dev_mismatched.tsv", "dev_mismatched", true, 8, 9, COL_LAST, 0),
    SPLIT("test_mismatched.tsv", "test", true, 8, 9, COL_NONE, 0)}},
  {"mrpc", NULL, LABELS(BINARY), "0", EST_TASK_METRIC_F1,
   {SPLIT("train.tsv", NULL, true, 3, 4, 0, COL_NONE),
    SPLIT("dev.tsv", NULL, true, 3, 4, 0, COL_NONE),
    SPLIT("test.tsv", NULL, true, 3, 4, COL_NONE, COL_NONE)}},
  /* QNLI, RTE, WNLI are not in the reference: GLUE's layout `index, text, text, label`
   * (test: no label) as the community ports read it, guid from the index column, the first
   * label as the test dummy (like MRPC's "0"). */
  {"qnli", NULL, LABELS(ENTAIL), "entailment", EST_TASK_METRIC_NONE,
   {SPLIT("train.tsv", NULL, true, 1, 2, COL_LAST, 0), SPLIT("dev.tsv", NULL, true, 1, 2, COL_LAST, 0),
    SPLIT("test.tsv", NULL, true, 1, 2, COL_NONE, 0)}},
  {"rte", NULL, LABELS(ENTAIL), "entailment", EST_TASK_METRIC_NONE,
   {SPLIT("train.tsv", NULL, true, 1, 2, COL_LAST, 0), SPLIT("dev.tsv", NULL, true, 1, 2, COL_LAST, 0),
    SPLIT("test.tsv", NULL, true, 1, 2, COL_NONE, 0)}},
  {"sst-2", "sst2", LABELS(BINARY), "0", EST_TASK_METRIC_NONE,
   {SPLIT("train.tsv", NULL, true, 0, COL_NONE, 1, COL_NONE), SPLIT("dev.tsv", NULL, true, 0, COL_NONE, 1, COL_NONE),
    SPLIT("test.tsv", NULL, true, 1, COL_NONE, COL_NONE, COL_NONE)}},
  {"wnli", NULL, LABELS(BINARY), "0", EST_TASK_METRIC_NONE,
   {SPLIT("train.tsv", NULL, true, 1, 2, COL_LAST, 0), SPLIT("dev.tsv", NULL, true, 1, 2, COL_LAST, 0),
    SPLIT("test.tsv", NULL, true, 1, 2, COL_NONE, 0)}},
  /* XNLI: MultiNLI's machine-translated train file for the language, the dev rows of that
   * language from xnli.dev.tsv; no test set (the reference raises NotImplementedError). */
  {"xnli", NULL, LABELS(NLI), NULL, EST_TASK_METRIC_NONE,
   {{"multinli/multinli.train.%s.tsv", true, NULL, true, 0, 1, 2, COL_NONE, COL_NONE, true},
    {"xnli.dev.tsv", false, NULL, true, 6, 7, 1, COL_NONE, 0, false},
    {NULL, false, NULL, false, 0, 0, 0, 0, 0, false}}},
  /* The generic task: columns, files and labels from est_tsv_task_config. */
  {"tsv", NULL, NULL, 0, NULL, EST_TASK_METRIC_NONE, {{0}}},
};

#undef SPLIT
#undef LABELS

/* A split's layout as read: the table's, or the tsv task's from its config. */
typedef struct layout {
  split_layout s;
  char file_buf[256];         /* the file with the language filled in */
  const char *fixed_label;    /* used when label == COL_NONE; NULL: the first label */
  const char *lang;
  bool strip_bom;             /* generic TSV: drop a UTF-8 BOM before the first field */
} layout;

struct est_processor {
  const task_def *task;
  est_tsv_task_config cfg;
  char *cfg_strings;          /* copies of cfg's strings */
  const char **labels;
  size_t nlabels;
  char *label_storage;
  bool labels_ready;
};

const char *est_split_name(est_split s) {
  return s == EST_SPLIT_TRAIN ? "train" : s == EST_SPLIT_DEV ? "dev" : "test";
}

est_tsv_task_config est_tsv_task_config_default(void) {
  est_tsv_task_config c = {
    .text_a_column = 0, .text_b_column = -1, .label_column = 1,
    .test_text_a_column = -2, .test_text_b_column = -2, .test_label_column = -2,
    .skip_header = true, .labels = NULL,
    .train_file = "train.tsv", .dev_file = "dev.tsv", .test_file = "test.tsv", .language = "zh",
  };
  return c;
}

void est_processor_free(est_processor *p) {
  if (!p) return;
  free(p->cfg_strings);
  free(p->labels);
  free(p->label_storage);
  free(p);
}

const char *est_processor_name(const est_processor *p) { return p->task->name; }

est_task_metric est_processor_extra_metric(const est_processor *p) { return p->task->metric; }

bool est_processor_has_split(const est_processor *p, est_split split) {
  return !p->task->labels || p->task->split[split].file != NULL;
}

/* Copies the config's strings into one block so the caller's may go away. */
static bool copy_cfg_strings(est_processor *p) {
  const char **fields[] = {&p->cfg.labels, &p->cfg.train_file, &p->cfg.dev_file, &p->cfg.test_file,
                           &p->cfg.language};
  size_t total = 0;
  for (size_t i = 0; i < 5; i++) total += *fields[i] ? strlen(*fields[i]) + 1 : 0;
  p->cfg_strings = malloc(total + 1);
  if (!p->cfg_strings) return false;
  char *w = p->cfg_strings;
  for (size_t i = 0; i < 5; i++) {
    if (!*fields[i]) continue;
    size_t n = strlen(*fields[i]) + 1;
    memcpy(w, *fields[i], n);
    *fields[i] = w;
    w += n;
  }
  return true;
}

/* Splits the comma-separated label list; empty items are refused (a label "" cannot be
 * told apart from a missing column). */
static est_status parse_label_list(est_processor *p, const char *list) {
  size_t n = 1;
  for (const char *c = list; *c; c++) n += *c == ',';
  p->label_storage = strdup(list);
  p->labels = malloc(n * sizeof *p->labels);
  if (!p->label_storage || !p->labels) return est_error(EST_ERR_NO_MEMORY, "label list");
  size_t k = 0;
  for (char *s = p->label_storage, *save = NULL, *tok = strtok_r(s, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save))
    p->labels[k++] = tok;
  if (k != n) return est_error(EST_ERR_INVALID_ARGUMENT, "--labels=%s: empty label in the list", list);
  for (size_t i = 0; i < k; i++)
    for (size_t j = 0; j < i; j++)
      if (!strcmp(p->labels[i], p->labels[j]))
        return est_error(EST_ERR_INVALID_ARGUMENT, "--labels=%s: label '%s' given twice", list, p->labels[i]);
  p->nlabels = k;
  p->labels_ready = true;
  return EST_OK;
}

est_status est_processor_create(est_processor **out, const char *task_name, const est_tsv_task_config *cfg) {
  *out = NULL;
  if (!task_name) return est_error(EST_ERR_INVALID_ARGUMENT, "no task name given");
  const size_t ntasks = sizeof TASKS / sizeof *TASKS;
  const task_def *task = NULL;
  for (size_t i = 0; i < ntasks && !task; i++)
    if (!strcasecmp(task_name, TASKS[i].name) || (TASKS[i].alias && !strcasecmp(task_name, TASKS[i].alias)))
      task = &TASKS[i];
  if (!task) {
    char known[256];
    size_t w = 0;
    for (size_t i = 0; i < ntasks && w < sizeof known; i++)
      w += (size_t)snprintf(known + w, sizeof known - w, "%s%s", i ? ", " : "", TASKS[i].name);
    return est_error(EST_ERR_NOT_FOUND, "Task not found: %s (known: %s)", task_name, known);
  }
  est_processor *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "creating processor");
  p->task = task;
  p->cfg = cfg ? *cfg : est_tsv_task_config_default();
  est_tsv_task_config d = est_tsv_task_config_default();
  if (!p->cfg.train_file) p->cfg.train_file = d.train_file;
  if (!p->cfg.dev_file) p->cfg.dev_file = d.dev_file;
  if (!p->cfg.test_file) p->cfg.test_file = d.test_file;
  if (!p->cfg.language) p->cfg.language = d.language;
  if (!copy_cfg_strings(p)) {
    est_processor_free(p);
    return est_error(EST_ERR_NO_MEMORY, "creating processor");
  }
  est_status st = EST_OK;
  if (task->labels && p->cfg.multi_label) {
    est_processor_free(p);
    return est_error(EST_ERR_INVALID_ARGUMENT, "--multi_label: task %s has one label a row; multi-label needs "
                     "--task_name=tsv", task->name);
  }
  if (task->labels) {
    p->labels = malloc(task->nlabels * sizeof *p->labels);
    if (!p->labels) {
      st = est_error(EST_ERR_NO_MEMORY, "creating processor");
    } else {
      memcpy(p->labels, task->labels, task->nlabels * sizeof *p->labels);
      p->nlabels = task->nlabels;
      p->labels_ready = true;
    }
  } else if (p->cfg.text_a_column < 0) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: text_a column must be >= 0 (got %d)", p->cfg.text_a_column);
  } else if (p->cfg.labels && *p->cfg.labels) {
    st = parse_label_list(p, p->cfg.labels);
  }
  if (st != EST_OK) {
    est_processor_free(p);
    return st;
  }
  *out = p;
  return EST_OK;
}

/* The generic task's layout, from its config: test_* columns of -2 mean "as train". */
static est_status tsv_layout(const est_tsv_task_config *c, est_split split, layout *L) {
  const bool test = split == EST_SPLIT_TEST;
  split_layout *s = &L->s;
  s->file = test ? c->test_file : split == EST_SPLIT_DEV ? c->dev_file : c->train_file;
  s->skip_header = c->skip_header;
  s->a = test && c->test_text_a_column != -2 ? c->test_text_a_column : c->text_a_column;
  s->b = test && c->test_text_b_column != -2 ? c->test_text_b_column : c->text_b_column;
  s->label = test && c->test_label_column != -2 ? c->test_label_column : c->label_column;
  if (s->b < 0) s->b = COL_NONE;
  if (s->label < 0) s->label = COL_NONE;
  s->set = est_split_name(split);
  s->guid_col = s->lang_col = COL_NONE;
  L->strip_bom = true;
  L->fixed_label = NULL;              /* the first label, known once labels are */
  if (s->a < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: %s text_a column must be >= 0 (got %d)",
                     est_split_name(split), s->a);
  return EST_OK;
}

/* The row layout of one split of one task (the reference's _create_examples calls). */
static est_status get_layout(const est_processor *p, est_split split, layout *L) {
  memset(L, 0, sizeof *L);
  const task_def *t = p->task;
  if (!t->labels) return tsv_layout(&p->cfg, split, L);
  if (!t->split[split].file)
    return est_error(EST_ERR_UNIMPLEMENTED, "%s: the reference has no %s set (do_predict raises "
                                            "NotImplementedError)", t->name, est_split_name(split));
  L->s = t->split[split];
  if (!L->s.set) L->s.set = est_split_name(split);
  L->fixed_label = t->dummy_label;
  L->lang = p->cfg.language;
  if (L->s.file_has_language) {
    /* "<prefix>%s<suffix>" with the language in place of %s */
    const char *at = strstr(L->s.file, "%s");
    snprintf(L->file_buf, sizeof L->file_buf, "%.*s%s%s", (int)(at - L->s.file), L->s.file, L->lang, at + 2);
    L->s.file = L->file_buf;
  }
  return EST_OK;
}

const char *est_processor_split_path(const est_processor *p, const char *data_dir, est_split split, char *buf,
                                     size_t size) {
  layout L;
  if (get_layout(p, split, &L) != EST_OK) {
    est_error_clear();
    snprintf(buf, size, "%s", data_dir);
    return buf;
  }
  est_path_join(buf, size, data_dir, L.s.file); /* "" when it does not fit */
  return buf;
}

static int max3(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static bool label_known(const est_processor *p, const char *label) {
  for (size_t i = 0; i < p->nlabels; i++)
    if (!strcmp(p->labels[i], label)) return true;
  return false;
}

static void list_joined(const char *const *labels, size_t n, char *buf, size_t size) {
  size_t w = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && w + 1 < size; i++) w += (size_t)snprintf(buf + w, size - w, i ? ", %s" : "%s", labels[i]);
}

static void labels_joined(const est_processor *p, char *buf, size_t size) {
  list_joined((const char *const *)p->labels, p->nlabels, buf, size);
}

est_status est_multi_label_ids(const char *field, const char *const *labels, size_t nlabels, int32_t *hot) {
  memset(hot, 0, nlabels * sizeof *hot);
  for (const char *item = field; item && *item;) {
    const char *comma = strchr(item, ',');
    const size_t len = comma ? (size_t)(comma - item) : strlen(item);
    size_t k = 0;
    while (k < nlabels && (strlen(labels[k]) != len || strncmp(labels[k], item, len))) k++;
    if (!len)
      return est_error(EST_ERR_INVALID_ARGUMENT, "multi-label field '%s': an empty label (labels are "
                       "comma-separated, e.g. \"a,b\")", field);
    if (k == nlabels) {
      char all[512];
      list_joined(labels, nlabels, all, sizeof all);
      return est_error(EST_ERR_INVALID_ARGUMENT, "multi-label field '%s': label '%.*s' is not one of the task's "
                       "labels (%s)", field, (int)len, item, all);
    }
    hot[k] = 1;
    if (!comma) break;
    item = comma + 1;
    if (!*item)
      return est_error(EST_ERR_INVALID_ARGUMENT, "multi-label field '%s': an empty label after the last comma", field);
  }
  return EST_OK;
}

/* Reads a layout's file and hands back each kept row's fields (a NULL label: the fixed one). */
typedef est_status (*row_fn)(void *ctx, const layout *L, const est_tsv *t, size_t i, const char *path);

static est_status for_each_row(const layout *L, const char *data_dir, est_tsv *t, char *path, size_t psize,
                               row_fn fn, void *ctx) {
  if (est_path_join(path, psize, data_dir, L->s.file) != EST_OK) return est_error_code();
  est_status st = est_tsv_read(t, path);
  if (st != EST_OK) return st;
  if (L->strip_bom && t->nrows > 0 && t->ncols[0] > 0 && !strncmp(t->rows[0][0], "\xEF\xBB\xBF", 3))
    t->rows[0][0] += 3;
  int need = max3(L->s.a, L->s.b, max3(L->s.label, L->s.guid_col, L->s.lang_col));
  for (size_t i = 0; i < t->nrows; i++) {
    if (L->s.skip_header && i == 0) continue;
    size_t nc = t->ncols[i];
    /* XNLI reads the language first and skips other languages' rows without looking further. */
    if (L->s.lang_col >= 0 && (int64_t)nc > L->s.lang_col && strcmp(t->rows[i][L->s.lang_col], L->lang) != 0) continue;
    if ((int64_t)nc <= need || (L->s.label == COL_LAST && nc == 0))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: expected at least %d tab-separated columns, found %zu",
                       path, i + 1, (need > 0 ? need : 0) + 1, nc);
    st = fn(ctx, L, t, i, path);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

static const char *row_label(const layout *L, const est_tsv *t, size_t i) {
  if (L->s.label == COL_NONE) return L->fixed_label;
  const char *l = L->s.label == COL_LAST ? t->rows[i][t->ncols[i] - 1] : t->rows[i][L->s.label];
  if (L->s.contradictory && !strcmp(l, "contradictory")) return "contradiction";
  return l;
}

typedef struct add_ctx {
  est_processor *p;
  est_examples *out;
  const char *source;         /* path copied into out's storage */
} add_ctx;

static est_status add_row(void *vctx, const layout *L, const est_tsv *t, size_t i, const char *path) {
  add_ctx *c = vctx;
  char *const *row = t->rows[i];
  const char *label = row_label(L, t, i);
  if (!label) label = c->p->labels[0];  /* generic TSV without a label column */
  if (c->p->cfg.multi_label && L->s.label != COL_NONE) { /* each of the field's labels */
    int32_t *hot = malloc((c->p->nlabels + 1) * sizeof *hot);
    est_status st = hot ? est_multi_label_ids(label, (const char *const *)c->p->labels, c->p->nlabels, hot)
                        : est_error(EST_ERR_NO_MEMORY, "reading %s", path);
    free(hot);
    if (st != EST_OK) return est_error_prefix("%s:%zu: ", path, i + 1);
  } else if (!label_known(c->p, label)) {
    char all[512];
    labels_joined(c->p, all, sizeof all);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: label '%s' is not one of the task's labels (%s)", path,
                     i + 1, label, all);
  }
  char guid[320];
  if (L->s.guid_col >= 0) snprintf(guid, sizeof guid, "%s-%.256s", L->s.set, row[L->s.guid_col]);
  else snprintf(guid, sizeof guid, "%s-%zu", L->s.set, i);
  if (!c->source && !(c->source = est_examples_strdup(c->out, path, SIZE_MAX)))
    return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  est_input_example *e = est_examples_push(c->out);
  const char *g = est_examples_strdup(c->out, guid, SIZE_MAX);
  if (!e || !g) return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  e->guid = g;
  e->text_a = row[L->s.a];              /* these point into the adopted file buffer */
  e->text_b = L->s.b >= 0 ? row[L->s.b] : NULL;
  /* A field or a static string; a label-list entry is copied, as the processor may go first. */
  e->label = label;
  if (label == c->p->labels[0] && L->s.label == COL_NONE &&
      !(e->label = est_examples_strdup(c->out, label, SIZE_MAX)))
    return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  e->source = c->source;
  e->line = (int64_t)i + 1;
  return EST_OK;
}

typedef struct collect_ctx {
  char **items;
  size_t n, cap;
  bool multi_label;           /* a field holds comma-separated labels */
} collect_ctx;

static est_status collect_one(collect_ctx *c, char *l) {
  for (size_t k = 0; k < c->n; k++)
    if (!strcmp(c->items[k], l)) return EST_OK;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    char **p = realloc(c->items, cap * sizeof *p);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "collecting labels");
    c->items = p;
    c->cap = cap;
  }
  c->items[c->n++] = l;
  return EST_OK;
}

static est_status collect_label(void *vctx, const layout *L, const est_tsv *t, size_t i, const char *path) {
  collect_ctx *c = vctx;
  char *l = (char *)row_label(L, t, i);
  if (!c->multi_label) return collect_one(c, l);
  /* "a,b": each label (the field is split in place: it is the file buffer's, read once
   * here); an empty field has none, an empty item is an error */
  if (!*l) return EST_OK;
  for (char *item = l;;) {
    char *comma = strchr(item, ',');
    if (comma) *comma = 0;
    if (!*item)
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: an empty label in a multi-label field (labels are "
                       "comma-separated, e.g. \"a,b\")", path, i + 1);
    est_status st = collect_one(c, item);
    if (st != EST_OK || !comma) return st;
    item = comma + 1;
  }
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Generic TSV without --labels: the sorted distinct labels of the training file. */
static est_status collect_labels(est_processor *p, const char *data_dir) {
  layout L;
  est_status st = get_layout(p, EST_SPLIT_TRAIN, &L);
  if (st != EST_OK) return st;
  char path[4096];
  if (L.s.label == COL_NONE)
    return est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: no label column and no label list: give --labels");
  if (!data_dir || !*data_dir) /* e.g. run_classifier --do_export alone */
    return est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: without a label list (--tsv_labels) the labels are "
                                               "%s's: give --data_dir", L.s.file);
  est_tsv t;
  collect_ctx c = {.multi_label = p->cfg.multi_label};
  st = for_each_row(&L, data_dir, &t, path, sizeof path, collect_label, &c);
  if (st == EST_OK && c.n == 0) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: no labels found (no data rows)", path);
  if (st == EST_OK) {
    qsort(c.items, c.n, sizeof *c.items, cmp_str);
    size_t total = 0;
    for (size_t k = 0; k < c.n; k++) total += strlen(c.items[k]) + 1;
    p->label_storage = malloc(total);
    p->labels = malloc(c.n * sizeof *p->labels);
    if (!p->label_storage || !p->labels) {
      st = est_error(EST_ERR_NO_MEMORY, "collecting labels");
    } else {
      char *w = p->label_storage;
      for (size_t k = 0; k < c.n; k++) {
        size_t n = strlen(c.items[k]) + 1;
        memcpy(w, c.items[k], n);
        p->labels[k] = w;
        w += n;
      }
      p->nlabels = c.n;
      p->labels_ready = true;
    }
  }
  free(c.items);
  est_tsv_free(&t);
  return st;
}

est_status est_processor_get_labels(est_processor *p, const char *data_dir, const char *const **labels, size_t *n) {
  if (!p->labels_ready) {
    est_status st = collect_labels(p, data_dir);
    if (st != EST_OK) return st;
  }
  *labels = p->labels;
  *n = p->nlabels;
  return EST_OK;
}

est_status est_processor_get_examples(est_processor *p, const char *data_dir, est_split split, est_examples *out) {
  const char *const *labels;
  size_t nl;
  est_status st = est_processor_get_labels(p, data_dir, &labels, &nl);
  if (st != EST_OK) return st;
  layout L;
  if ((st = get_layout(p, split, &L)) != EST_OK) return st;
  char path[4096];
  est_tsv t;
  add_ctx c = {p, out, NULL};
  size_t before = out->count;
  st = for_each_row(&L, data_dir, &t, path, sizeof path, add_row, &c);
  if (st == EST_OK && !est_examples_adopt_block(out, t.data)) st = est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  if (st == EST_OK) {
    t.data = NULL;                      /* now owned by out */
  } else {
    out->count = before;                /* drop the partial split; its strings die with out */
  }
  est_tsv_free(&t);
  return st;
}
