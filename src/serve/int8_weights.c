/* An int8 export's stored weights (serve/int8_weights.h): writing them, and reading them back
 * into the packed form est_sgemm_int8 runs (nn/gemm_int8.h). */
#include "serve/int8_weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "nn/gemm_int8.h"

static const char CODES[] = "/int8_codes", SCALES[] = "/int8_scales";

int est_int8_stored(const est_variable *v) {
  size_t n = strlen(v->name);
  return v->rank == 2 && !strncmp(v->name, "bert/", 5) && n > 7 && !strcmp(v->name + n - 7, "/kernel");
}

/* "<v's name><suffix>" into buf. */
static void tensor_name(char *buf, size_t size, const est_variable *v, const char *suffix) {
  snprintf(buf, size, "%s%s", v->name, suffix);
}

est_status est_int8_weights_add(est_ckpt_writer *w, const est_variable *v, const float *values, void **keep) {
  const int K = (int)v->dims[0], N = (int)v->dims[1];
  /* codes [K][N] then scales [N], one block */
  char *mem = malloc((size_t)K * N + (size_t)N * sizeof(float));
  *keep = mem;
  if (!mem) return est_error(EST_ERR_NO_MEMORY, "int8 export of %s", v->name);
  int8_t *codes = (int8_t *)mem;
  float *scales = (float *)(mem + (size_t)K * N);
  for (int n = 0; n < N; n++) scales[n] = est_int8_quantize(values + n, N, K, codes + n, N);
  char name[EST_VAR_NAME_MAX + 16];
  est_tensor t = {.dtype = EST_DT_INT8, .rank = 2, .dims = {K, N}, .data = codes};
  tensor_name(name, sizeof name, v, CODES);
  est_status st = est_ckpt_writer_add(w, name, &t);
  t = (est_tensor){.dtype = EST_DT_FLOAT, .rank = 1, .dims = {N}, .data = scales};
  tensor_name(name, sizeof name, v, SCALES);
  return st == EST_OK ? est_ckpt_writer_add(w, name, &t) : st;
}

int est_int8_weights_present(const est_ckpt_reader *r, const est_variable *v) {
  char name[EST_VAR_NAME_MAX + 16];
  tensor_name(name, sizeof name, v, CODES);
  int codes = est_ckpt_reader_has(r, name);
  tensor_name(name, sizeof name, v, SCALES);
  return codes || est_ckpt_reader_has(r, name);
}

/* The tensor `suffix` of v: present, of dtype and shape [dims[0]] or [dims[0], dims[1]]. */
static est_status check_tensor(const est_ckpt_reader *r, const char *prefix, const est_variable *v, const char *suffix,
                               est_dtype want, int rank, const int64_t *dims) {
  char name[EST_VAR_NAME_MAX + 16];
  tensor_name(name, sizeof name, v, suffix);
  est_dtype dt;
  int got_rank;
  int64_t got[EST_MAX_RANK];
  if (est_ckpt_reader_info(r, name, &dt, &got_rank, got) != EST_OK)
    return est_error(EST_ERR_NOT_FOUND, "%s: no tensor %s (an int8 export stores %s as %s%s and %s%s)", prefix, name,
                     v->name, v->name, CODES, v->name, SCALES);
  if (dt != want || got_rank != rank || got[0] != dims[0] || (rank == 2 && got[1] != dims[1]))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: tensor %s is %s of rank %d [%lld%s...], expected %s [%lld%s%lld]",
                     prefix, name, est_dtype_name(dt), got_rank, (long long)got[0], got_rank > 1 ? ", " : "",
                     est_dtype_name(want), (long long)dims[0], rank == 2 ? ", " : "", rank == 2 ? (long long)dims[1] : 0LL);
  return EST_OK;
}

est_status est_int8_weights_restore(est_ckpt_reader *r, const char *prefix, est_var_store *vs, size_t index) {
  const est_variable *v = est_vars_at(vs, index);
  const int K = (int)v->dims[0], N = (int)v->dims[1];
  const int64_t scale_dims[1] = {N};
  est_status st = check_tensor(r, prefix, v, CODES, EST_DT_INT8, 2, v->dims);
  if (st == EST_OK) st = check_tensor(r, prefix, v, SCALES, EST_DT_FLOAT, 1, scale_dims);
  if (st != EST_OK) return st;
  char *mem = malloc((size_t)K * N + (size_t)N * sizeof(float));
  if (!mem) return est_error(EST_ERR_NO_MEMORY, "%s: int8 weights of %s", prefix, v->name);
  int8_t *codes = (int8_t *)mem;
  float *scales = (float *)(mem + (size_t)K * N);
  char name[EST_VAR_NAME_MAX + 16];
  tensor_name(name, sizeof name, v, CODES);
  st = est_ckpt_reader_read_into(r, name, EST_DT_INT8, codes, (size_t)K * N);
  if (st == EST_OK) {
    tensor_name(name, sizeof name, v, SCALES);
    st = est_ckpt_reader_read_into(r, name, EST_DT_FLOAT, scales, (size_t)N * sizeof(float));
  }
  if (st != EST_OK) st = est_error_prefix("%s, tensor %s: ", prefix, name);
  /* what quantization can give: codes in [-127, 127], scales finite and >= 0 */
  for (size_t i = 0; st == EST_OK && i < (size_t)K * N; i++)
    if (codes[i] == -128)
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s%s[%zu][%zu] is -128, outside the codes' [-127, 127]", prefix,
                     v->name, CODES, i / N, i % N);
  for (int n = 0; st == EST_OK && n < N; n++)
    if (!(scales[n] >= 0.0f) || isinf(scales[n]))
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: %s%s[%d] is %g, expected a finite scale >= 0", prefix, v->name,
                     SCALES, n, scales[n]);
  float *values = est_vars_value(vs, index);
  if (st == EST_OK && est_int8_weights_adopt(values, K, N, codes, scales) != 0)
    st = est_error(EST_ERR_FAILED_PRECONDITION, "%s: the int8 form of %s could not be kept (out of memory, or the "
                   "variables are not read-only)", prefix, v->name);
  free(mem);
  if (st == EST_OK) est_release_pages(values, v->count * sizeof(float));
  return st;
}
