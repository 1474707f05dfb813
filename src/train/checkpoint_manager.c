/* Checkpoint saving with a bounded history (see checkpoint_manager.h). */
#include "train/checkpoint_manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/fault_hooks.h"
#include "est/file.h"
#include "est/log.h"

/* The test seam (est/fault_hooks.h): a drill may crash the process at `phase` of the save
 * of `step`, "bundle" (the checkpoint's files are complete, the state file does not name
 * them yet) or "state" (the state file names them, older checkpoints are not deleted yet).
 * No hooks installed: no effect. */
static void fault_point(int64_t step, const char *phase) {
  const est_fault_hooks *h = est_get_fault_hooks();
  if (h && h->checkpoint_phase) h->checkpoint_phase(h->ctx, step, phase);
}

static void free_paths(est_ckpt_manager *m) {
  for (size_t i = 0; i < m->count; i++) free(m->paths[i]);
  free(m->paths);
  m->paths = NULL;
  m->count = 0;
}

est_status est_ckpt_manager_open(est_ckpt_manager *m, const char *dir, int keep_max) {
  memset(m, 0, sizeof *m);
  m->dir = strdup(dir);
  if (!m->dir) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  m->keep_max = keep_max;
  est_ckpt_state st = {0};
  est_status s = est_ckpt_state_read(dir, &st);
  if (s == EST_ERR_NOT_FOUND) {
    est_error_clear();
    return EST_OK;
  }
  if (s != EST_OK) {
    est_ckpt_manager_close(m);
    return s;
  }
  /* Take over the list; make sure the latest is last (it should already be). */
  m->paths = st.all_model_checkpoint_paths;
  m->count = st.count;
  st.all_model_checkpoint_paths = NULL;
  st.count = 0;
  int found = 0;
  for (size_t i = 0; i < m->count; i++) found |= !strcmp(m->paths[i], st.model_checkpoint_path);
  if (!found) {
    char **grown = realloc(m->paths, (m->count + 1) * sizeof *grown);
    char *copy = strdup(st.model_checkpoint_path);
    if (!grown || !copy) {
      free(copy);
      if (grown) m->paths = grown;
      est_ckpt_state_clear(&st);
      est_ckpt_manager_close(m);
      return est_error(EST_ERR_NO_MEMORY, "out of memory");
    }
    m->paths = grown;
    m->paths[m->count++] = copy;
  }
  est_ckpt_state_clear(&st);
  return EST_OK;
}

void est_ckpt_manager_close(est_ckpt_manager *m) {
  if (!m) return;
  free_paths(m);
  free(m->dir);
  m->dir = NULL;
}

char *est_ckpt_manager_full_path(const est_ckpt_manager *m, const char *path, char *buf, size_t size) {
  if (path[0] == '/') snprintf(buf, size, "%s", path);
  else if (est_path_join(buf, size, m->dir, path) != EST_OK) return NULL;
  return buf;
}

est_status est_ckpt_manager_save(est_ckpt_manager *m, int64_t step, size_t n, const char *const *names,
                                 const est_tensor *tensors, char *prefix_out, size_t size) {
  char rel[64], prefix[4096];
  snprintf(rel, sizeof rel, "model.ckpt-%lld", (long long)step);
  if (est_path_join(prefix, sizeof prefix, m->dir, rel) != EST_OK) return est_error_code();
  EST_LOG_INFO("Saving checkpoints for %lld into %s/model.ckpt.", (long long)step, m->dir);
  est_status s = est_ckpt_save(prefix, n, names, tensors);
  if (s != EST_OK) return est_error_prefix("saving checkpoint %s: ", prefix);

  fault_point(step, "bundle");

  /* Saver._RecordLastCheckpoint: a re-saved path moves to the end of the list. */
  char *copy = strdup(rel);
  char **grown = copy ? realloc(m->paths, (m->count + 1) * sizeof *grown) : NULL;
  if (!grown) {
    free(copy);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  m->paths = grown;
  size_t w = 0;
  for (size_t i = 0; i < m->count; i++) {
    if (!strcmp(m->paths[i], rel)) free(m->paths[i]);
    else m->paths[w++] = m->paths[i];
  }
  m->paths[w++] = copy;
  m->count = w;

  /* The checkpoints that fall off the end are dropped from the list first, written to the
   * state file, and only then deleted: a crash in between leaves stray files, never a
   * state file naming a deleted checkpoint. */
  size_t drop = (m->keep_max > 0 && m->count > (size_t)m->keep_max) ? m->count - (size_t)m->keep_max : 0;
  est_ckpt_state st = {.model_checkpoint_path = copy, .count = m->count - drop,
                       .all_model_checkpoint_paths = m->paths + drop};
  s = est_ckpt_state_write(m->dir, &st);
  if (s != EST_OK) return est_error_prefix("updating %s/checkpoint: ", m->dir);
  fault_point(step, "state");
  for (size_t i = 0; i < drop; i++) {
    char full[4096];
    if (!est_ckpt_manager_full_path(m, m->paths[i], full, sizeof full) || est_ckpt_remove(full) != EST_OK)
      EST_LOG_WARN("could not delete old checkpoint: %s", est_error_message());
    free(m->paths[i]);
  }
  if (drop) memmove(m->paths, m->paths + drop, (m->count - drop) * sizeof *m->paths);
  m->count -= drop;
  if (prefix_out) snprintf(prefix_out, size, "%s", prefix);
  return EST_OK;
}
