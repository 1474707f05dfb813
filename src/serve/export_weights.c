/* An export's variables/: the weights the model of est_model.json's shape declares (the
 * encoder and its head, as a servable loads them, serve/servable_model.h), copied out of a
 * checkpoint into a TF tensor bundle; an int8 export stores the dense layers that run int8 as
 * codes + scales instead (serve/int8_weights.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/ckpt.h"
#include "est/serving.h"
#include "est/variables.h"
#include "serve/export_internal.h"
#include "serve/int8_weights.h"
#include "serve/servable_model.h"

est_status est_export_weights(const char *dst, const char *ckpt_prefix, const est_model_meta *meta) {
  est_var_store *vs = NULL;
  est_servable_model m = {0};
  est_ckpt_writer *w = NULL;
  const int int8 = !strcmp(meta->precision, "int8");
  void **keep = NULL; /* the int8 tensors' memory, until finish */
  est_status st = est_vars_create(&vs);
  if (st == EST_OK) st = est_servable_model_create(&m, meta, vs);
  if (st == EST_OK) st = est_vars_finalize(vs, 1);
  if (st == EST_OK && (st = est_servable_model_restore(vs, ckpt_prefix, NULL)) == EST_ERR_NOT_FOUND) {
    char missing[1024], shape[48] = "";
    snprintf(missing, sizeof missing, "%s", est_error_message());
    if (meta->num_labels) snprintf(shape, sizeof shape, " with %zu labels", meta->num_labels);
    st = est_error(st, "checkpoint %s (is it a %s%s of this bert_config?)", missing, est_model_meta_head(meta)->name, shape);
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

