/* est/exporter.h — tf.estimator's exporters (tensorflow_estimator: python/estimator/exporter.py):
 * LatestExporter, BestExporter and FinalExporter, run by est_train_and_evaluate after each
 * evaluation (est_eval_spec.exporters; docs/hooks.md §6).
 *
 *     est_exporter best;
 *     est_best_exporter(&best, "best", my_export, &my_ctx, NULL, 0, 5);   // smaller loss, keep 5
 *     est_eval_spec ev = {.input_fn = eval_in, .every_n_steps = 100, .exporters = &best,
 *                         .num_exporters = 1};
 *     est_train_and_evaluate(e, &ts, &ev, NULL);   // -> model_dir/export/best/<version>/
 *
 * Each export is a version directory <model_dir>/export/<name>/<version>/ holding what the
 * export function wrote plus eval_result.txt (the evaluation that led to it, as
 * eval_results.txt lists one). It is built in a hidden staging directory
 * <base>/.tmp-export-<pid>/ and renamed into place, and a version dropped by exports_to_keep
 * is first renamed to a hidden name and then deleted, so a reader of <base> (est serve
 * --model_base_path=<base>) sees complete versions only.
 *
 * BestExporter's best so far is the eval_result.txt of the newest version under its base:
 * what was really exported. A run restarted after a crash compares against it, so a worse
 * model never replaces the best (TF's exports at the first evaluation of every process:
 * tensorflow #47396). */
#ifndef EST_EXPORTER_H
#define EST_EXPORTER_H

#include <stddef.h>
#include <stdint.h>

#include "est/estimator.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes a servable of checkpoint `checkpoint_prefix` as a new version directory under
 * export_base (created if needed; e.g. est_export_write, est/serving.h, or a BERT task's
 * export) and its path to version_dir (or leaves version_dir "": the one version written
 * under export_base is taken). The directory may be written in place: the
 * exporter gives a staging base that nobody reads. */
typedef est_status (*est_export_fn)(void *ctx, const char *checkpoint_prefix, const char *export_base,
                                    char *version_dir, size_t size);

/* BestExporter's compare_fn: 1 when `current` is better than `best`. */
typedef int (*est_eval_compare_fn)(void *ctx, const est_eval_result *best, const est_eval_result *current);

typedef enum est_exporter_kind {
  EST_EXPORTER_LATEST = 0,     /* every evaluation */
  EST_EXPORTER_BEST = 1,       /* an evaluation better than the best exported so far */
  EST_EXPORTER_FINAL = 2,      /* the evaluation at max_steps (TF's is_the_final_export) */
} est_exporter_kind;

/* An exporter's settings; filled by the constructors below, must outlive the call. */
typedef struct est_exporter {
  est_exporter_kind kind;
  char name[256];              /* the directory under model_dir/export */
  est_export_fn export_fn;
  void *export_ctx;
  int64_t exports_to_keep;     /* the newest versions kept; 0: all */
  /* BestExporter: compare (NULL: by metric) with compare_ctx; the metric (default "loss")
   * and its direction: smaller is better unless higher_is_better. */
  est_eval_compare_fn compare;
  void *compare_ctx;
  char metric[256];
  int higher_is_better;
} est_exporter;

/* Each fills *x. INVALID_ARGUMENT for an empty name, or one with '/' or starting with '.',
 * a NULL export_fn, or exports_to_keep < 0. metric NULL or "": "loss". */
est_status est_latest_exporter(est_exporter *x, const char *name, est_export_fn fn, void *ctx,
                               int64_t exports_to_keep);
est_status est_best_exporter(est_exporter *x, const char *name, est_export_fn fn, void *ctx, const char *metric,
                             int higher_is_better, int64_t exports_to_keep);
est_status est_final_exporter(est_exporter *x, const char *name, est_export_fn fn, void *ctx);

/* TF's Exporter.export for one evaluation `r` (its checkpoint_path is exported): writes a
 * version under export_base when this exporter's rule says so, then drops versions beyond
 * exports_to_keep. *version_dir (may be NULL) gets the new version's path, or "" when none
 * was written. Only one process may export to a base at a time (train_and_evaluate: the
 * chief). */
est_status est_exporter_export(const est_exporter *x, const char *export_base, const est_eval_result *r,
                               int is_the_final_export, char *version_dir, size_t size);

/* The evaluation a version was exported for (its eval_result.txt); NOT_FOUND when it has none. */
est_status est_exporter_read_eval_result(const char *version_dir, est_eval_result *out);

/* The best result BestExporter `x` holds under export_base (the newest version with an
 * eval_result.txt): *found = 0 when none. */
est_status est_exporter_best_so_far(const est_exporter *x, const char *export_base, est_eval_result *best,
                                    int *found);

#ifdef __cplusplus
}
#endif
#endif
