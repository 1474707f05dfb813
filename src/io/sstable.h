/* sstable.h — LevelDB-format tables as TensorFlow's checkpoint .index uses them (internal).
 *
 * Layout (docs/checkpoint.md §2): data blocks, an empty metaindex block, an index block whose
 * entries map a separator key to each data block's (offset, size), and a 48-byte footer
 * ending in the magic 0xdb4775248b80fb57. Every block is followed by a type byte
 * (0 none, 1 snappy) and the masked crc32c of block ‖ type.
 *
 * Bundle indexes are small (about 100 bytes per tensor), so the reader does not seek
 * block by block: it parses a whole table held in memory into a sorted array of
 * key/value pairs, checking every CRC and length on the way. Working on a memory buffer
 * keeps the parser fuzzable (tests/fuzz/fuzz_ckpt.c).
 *
 * The builder reproduces LevelDB's / TSL's TableBuilder byte for byte with compression
 * off (the bundle writer's options): block_size 256 KiB, restart interval 16 for data
 * blocks and 1 for the index block, shortest separators between blocks.
 */
#ifndef EST_IO_SSTABLE_H
#define EST_IO_SSTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "est/status.h"
#include "io/protowire.h"

enum {
  EST_SSTABLE_FOOTER_SIZE = 48,
  EST_SSTABLE_TRAILER_SIZE = 5,
  EST_SSTABLE_BLOCK_SIZE = 262144,  /* BundleWriter's table::Options::block_size */
};

/* A parsed table: entries in file order, which the parser checks is strictly increasing
 * bytewise. keys[i] / values[i] point into `arena` (owned). */
typedef struct est_sstable {
  size_t count;
  const uint8_t **keys;
  size_t *key_lens;
  const uint8_t **values;
  size_t *value_lens;
  uint8_t *arena;
} est_sstable;

/* Parses a whole table from memory. `what` names the source in error messages (a path).
 * Corruption of any kind is EST_ERR_DATA_LOSS with the byte offset at fault. */
est_status est_sstable_parse(est_sstable *t, const uint8_t *data, size_t size, const char *what);
void est_sstable_free(est_sstable *t);

/* Index of `key` in t, or -1 (binary search). */
long est_sstable_find(const est_sstable *t, const void *key, size_t key_len);

/* Builds a table in memory. Keys must be added in strictly increasing bytewise order. */
typedef struct est_sstable_block {
  est_pw_buf buf;
  uint32_t *restarts;
  size_t num_restarts, restarts_cap;
  int counter;              /* entries since the last restart */
  int interval;             /* restart interval */
  uint8_t *last_key;
  size_t last_key_len, last_key_cap;
  size_t entries;
  int failed;               /* allocation failure */
} est_sstable_block;

typedef struct est_sstable_builder {
  est_pw_buf out;           /* the file so far */
  est_sstable_block data;
  est_sstable_block index;
  size_t block_size;
  uint8_t *last_key;        /* last key added (becomes the separator) */
  size_t last_key_len, last_key_cap;
  size_t num_entries;
  int pending_index;        /* a data block was flushed; its index entry waits for the next key */
  uint64_t pending_offset, pending_size;
  int failed;
} est_sstable_builder;

/* block_size 0 means EST_SSTABLE_BLOCK_SIZE. */
void est_sstable_builder_init(est_sstable_builder *b, size_t block_size);
/* INVALID_ARGUMENT when key is not greater than the previous one. */
est_status est_sstable_builder_add(est_sstable_builder *b, const void *key, size_t key_len,
                                   const void *value, size_t value_len);
/* Finishes the table and hands its bytes to the caller (free()). Frees the builder. */
est_status est_sstable_builder_finish(est_sstable_builder *b, uint8_t **data, size_t *size);
void est_sstable_builder_free(est_sstable_builder *b);

#endif
