/* est/ckpt.h — TensorFlow checkpoints (V2 "tensor bundle") and the `checkpoint` state file.
 *
 * A checkpoint is named by a prefix P ("out/model.ckpt-343"): P.index is a LevelDB-format
 * SSTable mapping tensor name -> BundleEntryProto (dtype, shape, shard, offset, size,
 * masked crc32c), P.data-SSSSS-of-NNNNN hold the raw tensor bytes. Files est writes are
 * byte-compatible with TF's BundleWriter (one shard, data in name order, uncompressed
 * index), so TF, tf.train.load_checkpoint and BERT's init_from_checkpoint read them.
 *
 *     est_ckpt_reader *r;
 *     if (est_ckpt_reader_open(&r, "model.ckpt-343") != EST_OK) return est_error_code();
 *     float w[2 * 128];
 *     est_status st = est_ckpt_reader_read_into(r, "output_weights", EST_DT_FLOAT, w, sizeof w);
 *     est_ckpt_reader_close(r);
 *
 *     est_ckpt_writer *w;
 *     est_ckpt_writer_open(&w, "out/model.ckpt-10");
 *     est_ckpt_writer_add(w, "global_step", &step_tensor);   // data must outlive finish
 *     est_ckpt_writer_finish(w);                              // atomic; frees w
 *
 * Reading accepts what TF writes: several shards, data in any order, snappy-compressed
 * index blocks, big-endian bundles (swapped after the CRC check), string tensors, and
 * partitioned variables (saved as slices), which are listed once with their full shape
 * and read whole, assembled from their slices. Every
 * tensor's CRC is verified on read; corruption is EST_ERR_DATA_LOSS naming the file and
 * the tensor, a data file cut short is EST_ERR_OUT_OF_RANGE (as in TF).
 */
#ifndef EST_CKPT_H
#define EST_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "est/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- reader ------------------------------------------------------------------------ */

/* A reader is used by one thread at a time (data files are opened on first use); open
 * one reader per thread to read in parallel. */
typedef struct est_ckpt_reader est_ckpt_reader;

/* Reads and validates <prefix>.index (header version checks, every entry's dtype, shape
 * and size); data shards are opened on the first read that needs them. */
est_status est_ckpt_reader_open(est_ckpt_reader **out, const char *prefix);

/* Tensors, sorted by name (bytewise), the header entry excluded. */
size_t est_ckpt_reader_count(const est_ckpt_reader *r);
const char *est_ckpt_reader_name(const est_ckpt_reader *r, size_t i);
int est_ckpt_reader_has(const est_ckpt_reader *r, const char *name);

/* dtype / rank / dims of a tensor (any pointer may be NULL); NOT_FOUND if absent. */
est_status est_ckpt_reader_info(const est_ckpt_reader *r, const char *name, est_dtype *dtype,
                                int *rank, int64_t dims[EST_MAX_RANK]);

/* Reads a tensor into freshly allocated storage owned by `out` (est_tensor_free).
 * CRC verified; byte-swapped when the bundle is big-endian. */
est_status est_ckpt_reader_read(est_ckpt_reader *r, const char *name, est_tensor *out);

/* Reads a numeric tensor into caller memory without allocating a tensor. `dtype` must be
 * the stored dtype, except that FLOAT may be asked of a HALF or BFLOAT16 tensor (widened).
 * `dst_bytes` must equal elements x size(dtype): a shape mismatch is
 * FAILED_PRECONDITION, as when restoring into a model of another shape (dst untouched).
 * On a read or CRC error dst may hold partial data. */
est_status est_ckpt_reader_read_into(est_ckpt_reader *r, const char *name, est_dtype dtype,
                                     void *dst, size_t dst_bytes);

/* Number of data shards the index names (num_shards of the header). */
int est_ckpt_reader_num_shards(const est_ckpt_reader *r);

void est_ckpt_reader_close(est_ckpt_reader *r);   /* NULL is fine */

/* ---- writer ------------------------------------------------------------------------ */

typedef struct est_ckpt_writer est_ckpt_writer;

/* Creates the directory part of `prefix` if needed. Nothing is written until finish. */
est_status est_ckpt_writer_open(est_ckpt_writer **out, const char *prefix);

/* Registers a tensor. The tensor struct is copied, its data is not: t->data (and, for
 * STRING, every element's bytes) must stay valid until finish. Any order; names must be
 * non-empty and unique (a duplicate is INVALID_ARGUMENT, as in TF). */
est_status est_ckpt_writer_add(est_ckpt_writer *w, const char *name, const est_tensor *t);

/* Writes <prefix>.data-00000-of-00001, then <prefix>.index (sorted keys, masked CRCs),
 * each atomically (temp + fsync + rename), data before index so a reader never sees an
 * index without its data. Frees w whether or not it succeeds. */
est_status est_ckpt_writer_finish(est_ckpt_writer *w);

/* Drops everything; nothing is written. NULL is fine. */
void est_ckpt_writer_abort(est_ckpt_writer *w);

/* Saves a whole list of tensors in one call (open + add + finish). */
est_status est_ckpt_save(const char *prefix, size_t n, const char *const *names,
                         const est_tensor *tensors);

/* ---- the `checkpoint` state file ---------------------------------------------------- */

/* Text-proto CheckpointState in <dir>/checkpoint (docs/checkpoint.md §8). Paths are as stored in
 * the file (usually relative to dir); all_model_checkpoint_paths is oldest first. */
typedef struct est_ckpt_state {
  char *model_checkpoint_path;
  size_t count;
  char **all_model_checkpoint_paths;
} est_ckpt_state;

/* EST_ERR_NOT_FOUND when dir has no `checkpoint` file; INVALID_ARGUMENT (naming the line)
 * when it does not parse or model_checkpoint_path is empty. Unknown fields (timestamps)
 * are accepted and ignored. On success *out is owned by the caller (est_ckpt_state_clear). */
est_status est_ckpt_state_read(const char *dir, est_ckpt_state *out);

/* Writes <dir>/checkpoint atomically with fields 1 and 2 only, as TF's text_format does.
 * Paths that lie inside dir are written relative to it, like Estimator; as in TF's
 * generate_checkpoint_state_proto, model_checkpoint_path is appended to the list when the
 * list does not already end with it. */
est_status est_ckpt_state_write(const char *dir, const est_ckpt_state *st);

void est_ckpt_state_clear(est_ckpt_state *st);

/* tf.train.latest_checkpoint(dir): the full prefix (dir joined with a relative path) of
 * model_checkpoint_path when its .index exists; EST_ERR_NOT_FOUND when there is no state
 * file or no such .index; INVALID_ARGUMENT when the state file does not parse or the
 * path does not fit `size`. */
est_status est_ckpt_latest(const char *dir, char *prefix, size_t size);

/* Deletes <prefix>.index, every <prefix>.data-*-of-* and <prefix>.meta that exist.
 * OK when none exist; IO when one could not be removed. */
est_status est_ckpt_remove(const char *prefix);

#ifdef __cplusplus
}
#endif
#endif
