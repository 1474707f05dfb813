/* run_classifier.py's DataProcessors as data: each (task, split) is a row layout -- which
 * file, whether its first line is a header, which columns hold text_a / text_b / label /
 * guid -- and one loop turns TSV rows into InputExamples (docs/run_classifier.md §3). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "est/file.h"
#include "processors_internal.h"

typedef enum task_kind { T_COLA, T_MRPC, T_MNLI, T_MNLI_MM, T_XNLI, T_SST2, T_QNLI, T_RTE, T_WNLI, T_TSV } task_kind;

enum { COL_NONE = -1, COL_LAST = -3 };

typedef struct layout {
  const char *file;           /* relative to data_dir */
  char file_buf[256];
  bool skip_header;
  int a, b, label;            /* columns; label COL_LAST = the row's last field */
  const char *fixed_label;    /* used when label == COL_NONE */
  const char *set;            /* guid prefix */
  int guid_col;               /* COL_NONE: guid = set-<row index>; else set-<that field> */
  int lang_col;               /* XNLI dev: keep rows whose lang_col equals lang */
  const char *lang;
  bool contradictory;         /* XNLI train: "contradictory" -> "contradiction" */
  bool strip_bom;             /* generic TSV: drop a UTF-8 BOM before the first field */
} layout;

struct est_processor {
  task_kind kind;
  const char *name;
  est_tsv_task_config cfg;
  char *cfg_strings;          /* copies of cfg's strings */
  const char **labels;
  size_t nlabels;
  char *label_storage;
  bool labels_ready;
};

static const char *const BINARY[] = {"0", "1"};
static const char *const NLI[] = {"contradiction", "entailment", "neutral"};
static const char *const ENTAIL[] = {"entailment", "not_entailment"};

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

const char *est_processor_name(const est_processor *p) { return p->name; }

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
  static const struct { const char *name; task_kind kind; } tasks[] = {
    {"cola", T_COLA}, {"mrpc", T_MRPC}, {"mnli", T_MNLI}, {"mnli-mm", T_MNLI_MM},
    {"mnli_mismatched", T_MNLI_MM}, {"xnli", T_XNLI}, {"sst-2", T_SST2}, {"sst2", T_SST2},
    {"qnli", T_QNLI}, {"rte", T_RTE}, {"wnli", T_WNLI}, {"tsv", T_TSV},
  };
  if (!task_name) return est_error(EST_ERR_INVALID_ARGUMENT, "no task name given");
  int found = -1;
  for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++)
    if (!strcasecmp(task_name, tasks[i].name)) found = (int)i;
  if (found < 0)
    return est_error(EST_ERR_NOT_FOUND,
                     "Task not found: %s (known: cola, mnli, mnli-mm, mrpc, qnli, rte, sst-2, wnli, xnli, tsv)",
                     task_name);
  est_processor *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "creating processor");
  p->kind = tasks[found].kind;
  p->name = tasks[found].name;
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
  switch (p->kind) {
    case T_COLA: case T_MRPC: case T_SST2: case T_WNLI:
      p->labels = malloc(2 * sizeof *p->labels);
      if (p->labels) memcpy(p->labels, BINARY, sizeof BINARY);
      p->nlabels = 2;
      break;
    case T_MNLI: case T_MNLI_MM: case T_XNLI:
      p->labels = malloc(3 * sizeof *p->labels);
      if (p->labels) memcpy(p->labels, NLI, sizeof NLI);
      p->nlabels = 3;
      break;
    case T_QNLI: case T_RTE:
      p->labels = malloc(2 * sizeof *p->labels);
      if (p->labels) memcpy(p->labels, ENTAIL, sizeof ENTAIL);
      p->nlabels = 2;
      break;
    case T_TSV:
      if (p->cfg.text_a_column < 0)
        st = est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: text_a column must be >= 0 (got %d)",
                       p->cfg.text_a_column);
      else if (p->cfg.labels && *p->cfg.labels)
        st = parse_label_list(p, p->cfg.labels);
      break;
  }
  if (st == EST_OK && p->kind != T_TSV) {
    if (!p->labels) st = est_error(EST_ERR_NO_MEMORY, "creating processor");
    p->labels_ready = true;
  }
  if (st != EST_OK) {
    est_processor_free(p);
    return st;
  }
  *out = p;
  return EST_OK;
}

/* The row layout of one split of one task (the reference's _create_examples calls). */
static est_status get_layout(const est_processor *p, est_split split, layout *L) {
  memset(L, 0, sizeof *L);
  L->b = L->guid_col = L->lang_col = COL_NONE;
  L->set = est_split_name(split);
  L->skip_header = true;
  bool test = split == EST_SPLIT_TEST;
  switch (p->kind) {
    case T_MRPC:
      L->file = test ? "test.tsv" : split == EST_SPLIT_DEV ? "dev.tsv" : "train.tsv";
      L->a = 3;
      L->b = 4;
      L->label = test ? COL_NONE : 0;
      L->fixed_label = "0";
      break;
    case T_COLA:
      L->file = test ? "test.tsv" : split == EST_SPLIT_DEV ? "dev.tsv" : "train.tsv";
      L->skip_header = test;            /* only CoLA's test file has a header */
      L->a = test ? 1 : 3;
      L->label = test ? COL_NONE : 1;
      L->fixed_label = "0";
      break;
    case T_SST2:
      L->file = test ? "test.tsv" : split == EST_SPLIT_DEV ? "dev.tsv" : "train.tsv";
      L->a = test ? 1 : 0;
      L->label = test ? COL_NONE : 1;
      L->fixed_label = "0";
      break;
    case T_MNLI: case T_MNLI_MM: {
      bool mm = p->kind == T_MNLI_MM;
      L->file = split == EST_SPLIT_TRAIN ? "train.tsv"
                : split == EST_SPLIT_DEV ? (mm ? "dev_mismatched.tsv" : "dev_matched.tsv")
                                         : (mm ? "test_mismatched.tsv" : "test_matched.tsv");
      L->set = split == EST_SPLIT_TRAIN ? "train"
               : split == EST_SPLIT_DEV ? (mm ? "dev_mismatched" : "dev_matched") : "test";
      L->a = 8;
      L->b = 9;
      L->label = test ? COL_NONE : COL_LAST;
      L->fixed_label = "contradiction";
      L->guid_col = 0;
      break;
    }
    case T_QNLI: case T_RTE: case T_WNLI:
      /* Not in the reference; GLUE's layout `index, text, text, label` (test: no label) as the
       * community ports read it: guid from the index column, label from the last column, and
       * the first label as the test dummy (like MRPC's "0"). */
      L->file = test ? "test.tsv" : split == EST_SPLIT_DEV ? "dev.tsv" : "train.tsv";
      L->a = 1;
      L->b = 2;
      L->label = test ? COL_NONE : COL_LAST;
      L->fixed_label = p->kind == T_WNLI ? "0" : "entailment";
      L->guid_col = 0;
      break;
    case T_XNLI:
      if (test)
        return est_error(EST_ERR_UNIMPLEMENTED, "xnli: the reference has no test set (do_predict "
                                                "raises NotImplementedError)");
      if (split == EST_SPLIT_TRAIN) {
        snprintf(L->file_buf, sizeof L->file_buf, "multinli/multinli.train.%s.tsv", p->cfg.language);
        L->file = L->file_buf;
        L->a = 0;
        L->b = 1;
        L->label = 2;
        L->contradictory = true;
      } else {
        L->file = "xnli.dev.tsv";
        L->a = 6;
        L->b = 7;
        L->label = 1;
        L->lang_col = 0;
        L->lang = p->cfg.language;
      }
      break;
    case T_TSV: {
      const est_tsv_task_config *c = &p->cfg;
      L->file = test ? c->test_file : split == EST_SPLIT_DEV ? c->dev_file : c->train_file;
      L->skip_header = c->skip_header;
      L->strip_bom = true;
      L->a = test && c->test_text_a_column != -2 ? c->test_text_a_column : c->text_a_column;
      L->b = test && c->test_text_b_column != -2 ? c->test_text_b_column : c->text_b_column;
      L->label = test && c->test_label_column != -2 ? c->test_label_column : c->label_column;
      if (L->b < 0) L->b = COL_NONE;
      if (L->label < 0) L->label = COL_NONE;
      L->fixed_label = NULL;            /* the first label, known once labels are */
      if (L->a < 0)
        return est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: %s text_a column must be >= 0 (got %d)",
                         est_split_name(split), L->a);
      break;
    }
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
  est_path_join(buf, size, data_dir, L.file); /* "" when it does not fit */
  return buf;
}

static int max3(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static bool label_known(const est_processor *p, const char *label) {
  for (size_t i = 0; i < p->nlabels; i++)
    if (!strcmp(p->labels[i], label)) return true;
  return false;
}

static void labels_joined(const est_processor *p, char *buf, size_t size) {
  size_t w = 0;
  buf[0] = 0;
  for (size_t i = 0; i < p->nlabels && w + 1 < size; i++)
    w += (size_t)snprintf(buf + w, size - w, i ? ", %s" : "%s", p->labels[i]);
}

/* Reads a layout's file and hands back each kept row's fields (a NULL label: the fixed one). */
typedef est_status (*row_fn)(void *ctx, const layout *L, const est_tsv *t, size_t i, const char *path);

static est_status for_each_row(const layout *L, const char *data_dir, est_tsv *t, char *path, size_t psize,
                               row_fn fn, void *ctx) {
  if (est_path_join(path, psize, data_dir, L->file) != EST_OK) return est_error_code();
  est_status st = est_tsv_read(t, path);
  if (st != EST_OK) return st;
  if (L->strip_bom && t->nrows > 0 && t->ncols[0] > 0 && !strncmp(t->rows[0][0], "\xEF\xBB\xBF", 3))
    t->rows[0][0] += 3;
  int need = max3(L->a, L->b, max3(L->label, L->guid_col, L->lang_col));
  for (size_t i = 0; i < t->nrows; i++) {
    if (L->skip_header && i == 0) continue;
    size_t nc = t->ncols[i];
    /* XNLI reads the language first and skips other languages' rows without looking further. */
    if (L->lang_col >= 0 && (int64_t)nc > L->lang_col && strcmp(t->rows[i][L->lang_col], L->lang) != 0) continue;
    if ((int64_t)nc <= need || (L->label == COL_LAST && nc == 0))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: expected at least %d tab-separated columns, found %zu",
                       path, i + 1, (need > 0 ? need : 0) + 1, nc);
    st = fn(ctx, L, t, i, path);
    if (st != EST_OK) return st;
  }
  return EST_OK;
}

static const char *row_label(const layout *L, const est_tsv *t, size_t i) {
  if (L->label == COL_NONE) return L->fixed_label;
  const char *l = L->label == COL_LAST ? t->rows[i][t->ncols[i] - 1] : t->rows[i][L->label];
  if (L->contradictory && !strcmp(l, "contradictory")) return "contradiction";
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
  if (!label_known(c->p, label)) {
    char all[512];
    labels_joined(c->p, all, sizeof all);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: label '%s' is not one of the task's labels (%s)", path,
                     i + 1, label, all);
  }
  char guid[320];
  if (L->guid_col >= 0) snprintf(guid, sizeof guid, "%s-%.256s", L->set, row[L->guid_col]);
  else snprintf(guid, sizeof guid, "%s-%zu", L->set, i);
  if (!c->source && !(c->source = est_examples_strdup(c->out, path, SIZE_MAX)))
    return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  est_input_example *e = est_examples_push(c->out);
  const char *g = est_examples_strdup(c->out, guid, SIZE_MAX);
  if (!e || !g) return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  e->guid = g;
  e->text_a = row[L->a];              /* these point into the adopted file buffer */
  e->text_b = L->b >= 0 ? row[L->b] : NULL;
  /* A field or a static string; a label-list entry is copied, as the processor may go first. */
  e->label = label;
  if (label == c->p->labels[0] && L->label == COL_NONE &&
      !(e->label = est_examples_strdup(c->out, label, SIZE_MAX)))
    return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  e->source = c->source;
  e->line = (int64_t)i + 1;
  return EST_OK;
}

typedef struct collect_ctx {
  char **items;
  size_t n, cap;
} collect_ctx;

static est_status collect_label(void *vctx, const layout *L, const est_tsv *t, size_t i, const char *path) {
  collect_ctx *c = vctx;
  (void)path;
  const char *l = row_label(L, t, i);
  for (size_t k = 0; k < c->n; k++)
    if (!strcmp(c->items[k], l)) return EST_OK;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 8;
    char **p = realloc(c->items, cap * sizeof *p);
    if (!p) return est_error(EST_ERR_NO_MEMORY, "collecting labels");
    c->items = p;
    c->cap = cap;
  }
  c->items[c->n++] = (char *)l;
  return EST_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Generic TSV without --labels: the sorted distinct labels of the training file. */
static est_status collect_labels(est_processor *p, const char *data_dir) {
  layout L;
  est_status st = get_layout(p, EST_SPLIT_TRAIN, &L);
  if (st != EST_OK) return st;
  char path[4096];
  if (L.label == COL_NONE)
    return est_error(EST_ERR_INVALID_ARGUMENT, "tsv task: no label column and no label list: give --labels");
  est_tsv t;
  collect_ctx c = {0};
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
