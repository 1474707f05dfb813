/* est/processors.h — run_classifier.py's InputExample, DataProcessors and _read_tsv.
 *
 *     est_processor *p;
 *     if (est_processor_create(&p, "MRPC", NULL)) die(est_error_message());
 *     est_examples ex; est_examples_init(&ex);
 *     if (est_processor_get_examples(p, "glue/MRPC", EST_SPLIT_DEV, &ex)) die(...);
 *     const char *const *labels; size_t nlabels;
 *     est_processor_get_labels(p, "glue/MRPC", &labels, &nlabels);   // {"0", "1"}
 *     ... ex.items[i].guid == "dev-1", .text_a, .text_b, .label ...
 *     est_examples_free(&ex); est_processor_free(p);
 *
 * Tasks (names are case-insensitive, as run_classifier lower-cases --task_name):
 *   cola, mrpc, mnli (matched dev/test), mnli-mm (mismatched dev/test), xnli (train/dev;
 *   language "zh" unless configured), sst-2 (alias sst2), qnli, rte, wnli (GLUE layout
 *   index/text/text/label, guid "<split>-<index>"; not in the reference), and tsv: a user's own
 *   TSV files with the columns chosen in est_tsv_task_config.
 * Column choices, guids, header skipping and labels are the reference's (docs/run_classifier.md
 * §3). Files are read like Python's csv.reader(delimiter="\t", quotechar=None): quotes are
 * ordinary characters, a line's trailing '\r' is dropped, a UTF-8 BOM is kept as text (it
 * only ever sits in a skipped header or an unused column for the GLUE files).
 * Stricter than the reference, which fails later or not at all: a row with too few columns,
 * a label outside the task's list, invalid UTF-8, a NUL byte, or a '\r' inside a line is an
 * error naming the file and line.
 */
#ifndef EST_PROCESSORS_H
#define EST_PROCESSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- examples ------------------------------------------------------------------------ */

/* InputExample, or PaddingInputExample when is_padding (then every text field is NULL). */
typedef struct est_input_example {
  const char *guid;
  const char *text_a;
  const char *text_b;         /* NULL: None (single-sentence task) */
  const char *label;          /* NULL only for padding */
  bool is_padding;
  const char *source;         /* file the example came from (messages); NULL if none */
  int64_t line;               /* its 1-based line in source; 0 if none */
} est_input_example;

/* A list of examples that owns every string it points to. */
typedef struct est_examples {
  est_input_example *items;
  size_t count, cap;
  void **blocks;              /* owned memory: file buffers and string chunks */
  size_t nblocks, block_cap;
  char *chunk;                /* current string chunk */
  size_t chunk_used, chunk_cap;
} est_examples;

void est_examples_init(est_examples *ex);
void est_examples_free(est_examples *ex);   /* leaves ex empty and reusable */

/* Appends a copy of the strings (text_b may be NULL for None). */
est_status est_examples_add(est_examples *ex, const char *guid, const char *text_a, const char *text_b,
                            const char *label);
/* Appends n PaddingInputExamples. */
est_status est_examples_add_padding(est_examples *ex, size_t n);
/* run_classifier's TPU padding: appends padding until count % batch_size == 0; returns how
 * many were added in *added. batch_size <= 0 adds nothing. */
est_status est_examples_pad_to_multiple(est_examples *ex, int64_t batch_size, size_t *added);
/* Copies a string into ex's storage (for callers building examples by hand). */
const char *est_examples_strdup(est_examples *ex, const char *s, size_t len);

/* ---- TSV ----------------------------------------------------------------------------- */

/* One file as rows of fields. Fields are NUL-terminated and point into `data`. An empty line
 * is a row with no fields. */
typedef struct est_tsv {
  char *data;
  char ***rows;               /* rows[i][0 .. ncols[i]) */
  size_t *ncols;
  size_t nrows;
  char **fields;              /* storage behind rows */
} est_tsv;

/* _read_tsv. Errors name path:line. Python csv's field limit (131072 characters) applies. */
est_status est_tsv_read(est_tsv *out, const char *path);
void est_tsv_free(est_tsv *t);

/* ---- processors ---------------------------------------------------------------------- */

typedef enum est_split { EST_SPLIT_TRAIN = 0, EST_SPLIT_DEV = 1, EST_SPLIT_TEST = 2 } est_split;

/* "train", "dev", "test". */
const char *est_split_name(est_split s);

/* Options of the generic "tsv" task (and XNLI's language). Start from
 * est_tsv_task_config_default(). Columns are 0-based; -1 means "none". */
typedef struct est_tsv_task_config {
  int text_a_column;          /* default 0 */
  int text_b_column;          /* default -1: single sentence */
  int label_column;           /* default 1; -1: every example gets the first label */
  /* The test file's columns; -2 (the default) means "same as for train/dev". GLUE-style test
   * files often have an index column first and no label. */
  int test_text_a_column, test_text_b_column, test_label_column;
  bool skip_header;           /* drop each file's first line; default true */
  /* Comma-separated label list ("neg,pos"), in the order the classifier's outputs take.
   * NULL or "": collect the distinct labels of the training file, sorted bytewise (sorting
   * makes the order independent of row order, so train and predict runs agree). */
  const char *labels;
  const char *train_file, *dev_file, *test_file;   /* defaults train.tsv, dev.tsv, test.tsv */
  const char *language;       /* XNLI only; default "zh" */
  /* Multi-label (the generic task only; default false): a label field holds any number of
   * the task's labels, comma-separated ("sports,politics"; "" for none), and the label list
   * collected from the training file is the distinct labels of all its rows. The examples
   * keep the field as it is (est_multi_label_ids reads it). */
  bool multi_label;
} est_tsv_task_config;

est_tsv_task_config est_tsv_task_config_default(void);

/* A multi-label field ("a,b": labels comma-separated, "" none) as hot[nlabels]: 1 for each
 * label named, 0 else. INVALID_ARGUMENT for an empty item or a label not in the list (naming
 * it and the list). */
est_status est_multi_label_ids(const char *field, const char *const *labels, size_t nlabels, int32_t *hot);

typedef struct est_processor est_processor;

/* Unknown names are NOT_FOUND "Task not found: <name>" (the reference's text). cfg may be NULL
 * (defaults); it is copied. */
est_status est_processor_create(est_processor **out, const char *task_name, const est_tsv_task_config *cfg);
void est_processor_free(est_processor *p);

/* The canonical lower-case task name ("mrpc", "sst-2" also for "sst2", "tsv", ...). */
const char *est_processor_name(const est_processor *p);

/* What the task reports besides accuracy and loss: F1 for MRPC (eval_f1), MCC for CoLA
 * (eval_mcc), none for the others. Not in the reference's metric_fn, which has accuracy
 * and loss only; the GLUE papers report these. */
typedef enum est_task_metric {
  EST_TASK_METRIC_NONE = 0,
  EST_TASK_METRIC_F1 = 1,
  EST_TASK_METRIC_MCC = 2,
} est_task_metric;
est_task_metric est_processor_extra_metric(const est_processor *p);

/* Whether the task has the split: every task but XNLI has train, dev and test; XNLI has no
 * test set (reading it is UNIMPLEMENTED, as the reference's NotImplementedError). */
bool est_processor_has_split(const est_processor *p, est_split split);

/* get_train_examples / get_dev_examples / get_test_examples: appends to out. */
est_status est_processor_get_examples(est_processor *p, const char *data_dir, est_split split,
                                      est_examples *out);

/* get_labels. For "tsv" without a label list this reads the training file once (data_dir
 * is unused otherwise, and may be NULL; a NULL one is an error for that case). The array is
 * owned by p. */
est_status est_processor_get_labels(est_processor *p, const char *data_dir, const char *const **labels,
                                    size_t *n);

/* The file a split reads (for messages): data_dir + "/" + name, into buf ("" when it does
 * not fit; the error stays recorded). */
const char *est_processor_split_path(const est_processor *p, const char *data_dir, est_split split,
                                     char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
