/* read_eval_metrics (tensorflow_estimator: early_stopping.py) for one metric
 * (est_read_eval_metric, est/early_stopping.h): the eval directory's events files. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "est/early_stopping.h"
#include "est/file.h"
#include "est/log.h"
#include "est/tfevents.h"
#include "est/tfrecord.h"
#include "core/alloc.h"
#include "train/estimator_internal.h"

typedef struct metric_series {
  int64_t *steps;
  double *values;
  unsigned char *present;      /* 0: the step's scalars (so far) lack the metric */
  size_t n, cap;
} metric_series;

/* Records that `step` has scalars, with the metric's value when `present`: TF's
 * eval_metrics_dict[step].update(metrics), so a later value overrides and an event
 * without the metric leaves the step's earlier value alone. */
static est_status series_set(metric_series *s, int64_t step, double value, int present) {
  for (size_t i = 0; i < s->n; i++)
    if (s->steps[i] == step) {
      if (present) s->values[i] = value, s->present[i] = 1;
      return EST_OK;
    }
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 16;
    if (!EST_RESIZE(s->steps, cap) || !EST_RESIZE(s->values, cap) || !EST_RESIZE(s->present, cap))
      return est_error(EST_ERR_NO_MEMORY, "out of memory");
    s->cap = cap;
  }
  s->steps[s->n] = step;
  s->present[s->n] = (unsigned char)(present != 0);
  s->values[s->n++] = present ? value : 0.0;
  return EST_OK;
}

/* Every event of one file that holds scalars: the metric's value at the event's step. */
static est_status read_events_file(const char *path, const char *metric, metric_series *s) {
  est_tfrecord_reader *r;
  est_status st = est_tfrecord_reader_open(&r, path, EST_COMPRESSION_NONE);
  if (st != EST_OK) return st;
  const uint8_t *data;
  size_t size;
  while ((st = est_tfrecord_reader_next(r, &data, &size)) == EST_OK) {
    est_event ev;
    st = est_event_parse(&ev, data, size);
    if (st != EST_OK) {
      st = est_error_prefix("%s: event at offset %llu: ", path, (unsigned long long)est_tfrecord_reader_offset(r));
      break;
    }
    int found = 0;
    for (size_t k = 0; st == EST_OK && k < ev.count; k++)
      if (!strcmp(ev.tags[k], metric)) {
        found = 1;
        st = series_set(s, ev.step, ev.values[k], 1);
      }
    if (st == EST_OK && ev.count && !found) st = series_set(s, ev.step, 0.0, 0);
    est_event_clear(&ev);
    if (st != EST_OK) break;
  }
  if (st == EST_ERR_OUT_OF_RANGE) {
    est_error_clear();
    st = EST_OK;
  } else if (st == EST_ERR_DATA_LOSS) {
    /* TF's _summaries: a DataLossError (a truncated or corrupted record) skips the rest of
     * the file with a warning; an event that does not parse fails (DecodeError). */
    EST_LOG_WARN("Skipping rest of the file due to encountering data corruption error; file path: %s: %s", path,
                 est_error_message());
    est_error_clear();
    st = EST_OK;
  }
  est_tfrecord_reader_close(r);
  return st;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The events files of `dir` in name order (malloc'ed names). */
static est_status list_events_files(const char *dir, char ***names, size_t *n) {
  *names = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return EST_OK;   /* no evaluation yet */
  size_t cap = 0;
  est_status st = EST_OK;
  struct dirent *ent;
  while (st == EST_OK && (ent = readdir(d))) {
    if (strncmp(ent->d_name, "events.out.tfevents.", 20)) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      char **grown = realloc(*names, cap * sizeof *grown);
      if (!grown) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
      else *names = grown;
    }
    if (st == EST_OK && !((*names)[*n] = strdup(ent->d_name))) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
    if (st == EST_OK) ++*n;
  }
  closedir(d);
  if (*n) qsort(*names, *n, sizeof **names, cmp_names);
  return st;
}

static int cmp_by_step(const void *a, const void *b, void *steps) {
  const int64_t *s = steps;
  int64_t x = s[*(const size_t *)a], y = s[*(const size_t *)b];
  return (x > y) - (x < y);
}

est_status est_read_eval_metric(const char *eval_dir, const char *metric_name, int64_t **steps, double **values,
                                size_t *n) {
  unsigned char *present;
  est_status st = est_read_eval_metric_steps(eval_dir, metric_name, steps, values, &present, n);
  for (size_t i = 0; st == EST_OK && i < *n; i++)
    if (!present[i])
      st = est_error(EST_ERR_NOT_FOUND, "%s: the evaluation at step %lld has no metric '%s'", eval_dir,
                     (long long)(*steps)[i], metric_name);
  free(present);
  if (st != EST_OK) {
    free(*steps), free(*values);
    *steps = NULL, *values = NULL, *n = 0;
  }
  return st;
}

est_status est_read_eval_metric_steps(const char *eval_dir, const char *metric_name, int64_t **steps,
                                      double **values, unsigned char **present, size_t *n) {
  *steps = NULL;
  *values = NULL;
  *present = NULL;
  *n = 0;
  char **files;
  size_t nfiles;
  metric_series s = {0};
  est_status st = list_events_files(eval_dir, &files, &nfiles);
  for (size_t i = 0; st == EST_OK && i < nfiles; i++) {
    char path[8192];
    st = est_path_join(path, sizeof path, eval_dir, files[i]);
    if (st == EST_OK) st = read_events_file(path, metric_name, &s);
  }
  for (size_t i = 0; i < nfiles; i++) free(files[i]);
  free(files);
  size_t *order = st == EST_OK ? malloc((s.n ? s.n : 1) * sizeof *order) : NULL;
  if (st == EST_OK && !order) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
  if (st == EST_OK && s.n) {
    for (size_t i = 0; i < s.n; i++) order[i] = i;
    qsort_r(order, s.n, sizeof *order, cmp_by_step, s.steps);
    *steps = malloc(s.n * sizeof **steps);
    *values = malloc(s.n * sizeof **values);
    *present = malloc(s.n);
    if (!*steps || !*values || !*present) st = est_error(EST_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; st == EST_OK && i < s.n; i++) {
      (*steps)[i] = s.steps[order[i]];
      (*values)[i] = s.values[order[i]];
      (*present)[i] = s.present[order[i]];
    }
    if (st == EST_OK) *n = s.n;
  }
  if (st != EST_OK) {
    free(*steps);
    free(*values);
    free(*present);
    *steps = NULL;
    *values = NULL;
    *present = NULL;
  }
  free(order);
  free(s.steps);
  free(s.values);
  free(s.present);
  return st;
}
