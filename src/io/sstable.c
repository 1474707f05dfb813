/* LevelDB-format table: whole-table parser over a memory buffer, and a byte-exact builder
 * (docs/checkpoint.md §2; TSL table.cc, block.cc, format.cc, table_builder.cc, block_builder.cc). */
#include "io/sstable.h"

#include <limits.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "est/crc32c.h"
#include "io/fuzzing.h"

static const uint64_t kTableMagic = 0xdb4775248b80fb57ull;

/* ---- parsing ------------------------------------------------------------------------ */

typedef struct raw_entry {
  size_t key_off, key_len, value_off, value_len;   /* offsets into the arena */
} raw_entry;

typedef struct parse_ctx {
  const uint8_t *file;
  size_t file_size;
  const char *what;
  est_pw_buf arena;
  raw_entry *entries;
  size_t count, cap;
  est_pw_buf key;        /* the key being rebuilt from its shared prefix */
} parse_ctx;

/* Finds the block at [offset, offset+size) plus its trailer, checks the CRC and
 * decompresses it when snappy. *owned is set when *block must be freed. */
static est_status read_block(parse_ctx *c, uint64_t offset, uint64_t size, const uint8_t **block,
                             size_t *block_len, uint8_t **owned) {
  *owned = NULL;
  if (offset > c->file_size || size > c->file_size - offset ||
      c->file_size - offset - size < EST_SSTABLE_TRAILER_SIZE)
    return est_error(EST_ERR_DATA_LOSS,
                     "%s: truncated block read: block at offset %llu of %llu bytes (+5 trailer) "
                     "runs past the end of the %zu-byte table",
                     c->what, (unsigned long long)offset, (unsigned long long)size, c->file_size);
  const uint8_t *p = c->file + offset;
  uint8_t type = p[size];
  /* The CRC covers the block and its type byte. */
  uint32_t actual = est_crc32c(p, (size_t)size + 1);
  uint32_t stored = est_crc32c_unmask(est_pw_decode_fixed32(p + size + 1));
  if (EST_CHECKSUM_MISMATCH(stored, actual))
    return est_error(EST_ERR_DATA_LOSS,
                     "%s: block checksum mismatch for the block at offset %llu (%llu bytes): "
                     "stored 0x%08x, computed 0x%08x",
                     c->what, (unsigned long long)offset, (unsigned long long)size, stored, actual);
  if (type == 0) {
    *block = p;
    *block_len = (size_t)size;
    return EST_OK;
  }
  if (type != 1)
    return est_error(EST_ERR_DATA_LOSS, "%s: bad block type %u for the block at offset %llu", c->what,
                     type, (unsigned long long)offset);
  /* Snappy: validate before trusting the claimed length (a decompression bomb or a
   * corrupt stream must not allocate or read wildly). */
  size_t n = 0;
  if (snappy_validate_compressed_buffer((const char *)p, (size_t)size) != SNAPPY_OK ||
      snappy_uncompressed_length((const char *)p, (size_t)size, &n) != SNAPPY_OK)
    return est_error(EST_ERR_DATA_LOSS, "%s: corrupted snappy-compressed block at offset %llu", c->what,
                     (unsigned long long)offset);
  uint8_t *out = malloc(n ? n : 1);
  if (!out) return est_error(EST_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes for a block", c->what, n);
  size_t got = n;
  if (snappy_uncompress((const char *)p, (size_t)size, (char *)out, &got) != SNAPPY_OK || got != n) {
    free(out);
    return est_error(EST_ERR_DATA_LOSS, "%s: corrupted snappy-compressed block at offset %llu", c->what,
                     (unsigned long long)offset);
  }
  *owned = out;
  *block = out;
  *block_len = n;
  return EST_OK;
}

/* Walks a block's entries, calling `on_entry` with each rebuilt key and its value.
 * `block_off` is only for messages. */
typedef est_status (*entry_fn)(parse_ctx *c, const uint8_t *key, size_t key_len, const uint8_t *value,
                               size_t value_len, uint64_t at);

static est_status walk_block(parse_ctx *c, const uint8_t *b, size_t n, uint64_t block_off, entry_fn fn) {
  if (n < 4)
    return est_error(EST_ERR_DATA_LOSS, "%s: bad block contents: block at offset %llu is %zu bytes",
                     c->what, (unsigned long long)block_off, n);
  uint32_t num_restarts = est_pw_decode_fixed32(b + n - 4);
  if (num_restarts == 0) return EST_OK; /* TF iterates such a block as empty */
  if (num_restarts > (n - 4) / 4)
    return est_error(EST_ERR_DATA_LOSS,
                     "%s: bad block contents: %u restart points do not fit the %zu-byte block at "
                     "offset %llu",
                     c->what, num_restarts, n, (unsigned long long)block_off);
  size_t limit = n - 4 - (size_t)num_restarts * 4;
  est_pw_reader r = est_pw_reader_make(b, limit);
  c->key.size = 0;
  while (!est_pw_eof(&r)) {
    size_t at = (size_t)(r.pos - b);
    uint32_t shared, non_shared, value_len;
    if (!est_pw_read_varint32(&r, &shared) || !est_pw_read_varint32(&r, &non_shared) ||
        !est_pw_read_varint32(&r, &value_len) || shared > c->key.size ||
        non_shared > est_pw_left(&r) || value_len > est_pw_left(&r) - non_shared)
      return est_error(EST_ERR_DATA_LOSS, "%s: bad entry in block at offset %llu (entry at byte %zu)",
                       c->what, (unsigned long long)block_off, at);
    c->key.size = shared;
    est_pw_put_raw(&c->key, r.pos, non_shared);
    if (c->key.failed) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", c->what);
    r.pos += non_shared;
    est_status st = fn(c, c->key.data, c->key.size, r.pos, value_len, block_off + at);
    if (st != EST_OK) return st;
    r.pos += value_len;
  }
  return EST_OK;
}

static int bytes_compare(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  size_t m = an < bn ? an : bn;
  int r = m ? memcmp(a, b, m) : 0; /* an empty key may have a NULL pointer */
  if (r) return r;
  return an < bn ? -1 : an > bn;
}

/* A data-block entry: copied into the arena (key NUL-terminated for the bundle layer). */
static est_status add_data_entry(parse_ctx *c, const uint8_t *key, size_t key_len, const uint8_t *value,
                                 size_t value_len, uint64_t at) {
  if (c->count > 0) {
    const raw_entry *prev = &c->entries[c->count - 1];
    if (bytes_compare(c->arena.data + prev->key_off, prev->key_len, key, key_len) >= 0)
      return est_error(EST_ERR_DATA_LOSS, "%s: keys out of order or duplicated at byte %llu", c->what,
                       (unsigned long long)at);
  }
  raw_entry *grown = est_grow(c->entries, &c->cap, c->count + 1, sizeof *grown, 64);
  if (!grown) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", c->what);
  c->entries = grown;
  raw_entry *e = &c->entries[c->count++];
  e->key_off = c->arena.size;
  e->key_len = key_len;
  est_pw_put_raw(&c->arena, key, key_len);
  est_pw_put_raw(&c->arena, "", 1);
  e->value_off = c->arena.size;
  e->value_len = value_len;
  est_pw_put_raw(&c->arena, value, value_len);
  if (c->arena.failed) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", c->what);
  return EST_OK;
}

/* An index-block entry: its value is the BlockHandle of a data block, which is read and
 * walked right away. */
static est_status add_index_entry(parse_ctx *c, const uint8_t *key, size_t key_len, const uint8_t *value,
                                  size_t value_len, uint64_t at) {
  (void)key;
  (void)key_len;
  est_pw_reader r = est_pw_reader_make(value, value_len);
  uint64_t off, size;
  if (!est_pw_read_varint(&r, &off) || !est_pw_read_varint(&r, &size))
    return est_error(EST_ERR_DATA_LOSS, "%s: bad block handle in the index entry at byte %llu", c->what,
                     (unsigned long long)at);
  /* walk_block reuses c->key for the data block; the index key is not needed later. */
  est_pw_buf saved = c->key;
  est_pw_buf_init(&c->key);
  est_pw_buf_reserve(&c->key, 64);
  const uint8_t *blk;
  size_t n;
  uint8_t *owned;
  est_status st = read_block(c, off, size, &blk, &n, &owned);
  if (st == EST_OK) st = walk_block(c, blk, n, off, add_data_entry);
  free(owned);
  est_pw_buf_free(&c->key);
  c->key = saved;
  return st;
}

est_status est_sstable_parse(est_sstable *t, const uint8_t *data, size_t size, const char *what) {
  memset(t, 0, sizeof *t);
  if (size < EST_SSTABLE_FOOTER_SIZE)
    return est_error(EST_ERR_DATA_LOSS, "%s: file is too short to be an sstable (%zu bytes, need 48)", what,
                     size);
  const uint8_t *footer = data + size - EST_SSTABLE_FOOTER_SIZE;
  if (est_pw_decode_fixed64(footer + 40) != kTableMagic)
    return est_error(EST_ERR_DATA_LOSS, "%s: not an sstable (bad magic number)", what);
  est_pw_reader r = est_pw_reader_make(footer, 40);
  uint64_t meta_off, meta_size, index_off, index_size;
  if (!est_pw_read_varint(&r, &meta_off) || !est_pw_read_varint(&r, &meta_size) ||
      !est_pw_read_varint(&r, &index_off) || !est_pw_read_varint(&r, &index_size))
    return est_error(EST_ERR_DATA_LOSS, "%s: bad block handle in the footer at byte %zu", what,
                     size - EST_SSTABLE_FOOTER_SIZE);
  (void)meta_off; /* the metaindex only matters with filter blocks, which TF never writes */
  (void)meta_size;

  parse_ctx c = {.file = data, .file_size = size - EST_SSTABLE_FOOTER_SIZE, .what = what};
  est_pw_buf_init(&c.arena);
  est_pw_buf_init(&c.key);
  /* Non-NULL buffers from the start, so zero-length appends never offset a NULL. */
  est_pw_buf_reserve(&c.arena, 256);
  est_pw_buf_reserve(&c.key, 64);
  const uint8_t *blk;
  size_t n;
  uint8_t *owned;
  est_status st = read_block(&c, index_off, index_size, &blk, &n, &owned);
  if (st == EST_OK) st = walk_block(&c, blk, n, index_off, add_index_entry);
  free(owned);
  est_pw_buf_free(&c.key);
  if (st == EST_OK) {
    size_t m = c.count ? c.count : 1;
    t->keys = malloc(m * sizeof *t->keys);
    t->key_lens = malloc(m * sizeof *t->key_lens);
    t->values = malloc(m * sizeof *t->values);
    t->value_lens = malloc(m * sizeof *t->value_lens);
    if (!t->keys || !t->key_lens || !t->values || !t->value_lens) {
      st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", what);
    } else {
      /* Pointers are fixed only now: the arena moved while it grew. */
      t->arena = c.arena.data;
      est_pw_buf_init(&c.arena);
      t->count = c.count;
      for (size_t i = 0; i < c.count; i++) {
        t->keys[i] = t->arena + c.entries[i].key_off;
        t->key_lens[i] = c.entries[i].key_len;
        t->values[i] = t->arena + c.entries[i].value_off;
        t->value_lens[i] = c.entries[i].value_len;
      }
    }
  }
  free(c.entries);
  est_pw_buf_free(&c.arena);
  if (st != EST_OK) est_sstable_free(t);
  return st;
}

void est_sstable_free(est_sstable *t) {
  if (!t) return;
  free(t->keys);
  free(t->key_lens);
  free(t->values);
  free(t->value_lens);
  free(t->arena);
  memset(t, 0, sizeof *t);
}

long est_sstable_find(const est_sstable *t, const void *key, size_t key_len) {
  size_t lo = 0, hi = t->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = bytes_compare(t->keys[mid], t->key_lens[mid], key, key_len);
    if (c == 0) return (long)mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/* ---- building ----------------------------------------------------------------------- */

static int set_bytes(uint8_t **buf, size_t *len, size_t *cap, const void *src, size_t n) {
  if (n > *cap) {
    size_t c = *cap ? *cap : 64;
    while (c < n) c *= 2;
    uint8_t *p = realloc(*buf, c);
    if (!p) return 0;
    *buf = p;
    *cap = c;
  }
  if (n) memmove(*buf, src, n);
  *len = n;
  return 1;
}

static void block_reset(est_sstable_block *b) {
  b->buf.size = 0;
  b->num_restarts = 0;
  b->counter = 0;
  b->last_key_len = 0;
  b->entries = 0;
}

static void block_push_restart(est_sstable_block *b, uint32_t off) {
  if (b->num_restarts == b->restarts_cap) {
    size_t cap = b->restarts_cap ? 2 * b->restarts_cap : 16;
    uint32_t *r = realloc(b->restarts, cap * sizeof *r);
    if (!r) {
      b->failed = 1;
      return;
    }
    b->restarts = r;
    b->restarts_cap = cap;
  }
  b->restarts[b->num_restarts++] = off;
}

static void block_init(est_sstable_block *b, int interval) {
  memset(b, 0, sizeof *b);
  est_pw_buf_init(&b->buf);
  b->interval = interval;
}

static void block_free(est_sstable_block *b) {
  est_pw_buf_free(&b->buf);
  free(b->restarts);
  free(b->last_key);
  memset(b, 0, sizeof *b);
}

/* BlockBuilder::Add: share a prefix with the previous key except at restart points. */
static void block_add(est_sstable_block *b, const uint8_t *key, size_t key_len, const uint8_t *value,
                      size_t value_len) {
  size_t shared = 0;
  if (b->entries == 0) {
    block_push_restart(b, 0);
  } else if (b->counter < b->interval) {
    size_t m = key_len < b->last_key_len ? key_len : b->last_key_len;
    while (shared < m && b->last_key[shared] == key[shared]) shared++;
  } else {
    block_push_restart(b, (uint32_t)b->buf.size);
    b->counter = 0;
  }
  est_pw_put_varint(&b->buf, shared);
  est_pw_put_varint(&b->buf, key_len - shared);
  est_pw_put_varint(&b->buf, value_len);
  if (key_len > shared) est_pw_put_raw(&b->buf, key + shared, key_len - shared); /* key may be NULL when empty */
  est_pw_put_raw(&b->buf, value, value_len);
  if (!set_bytes(&b->last_key, &b->last_key_len, &b->last_key_cap, key, key_len)) b->failed = 1;
  b->counter++;
  b->entries++;
}

/* BlockBuilder::CurrentSizeEstimate (an empty block still has one restart). */
static size_t block_size_estimate(const est_sstable_block *b) {
  size_t restarts = b->num_restarts ? b->num_restarts : 1;
  return b->buf.size + restarts * 4 + 4;
}

/* Appends the restart array; an empty block gets the single restart at 0. */
static void block_finish(est_sstable_block *b) {
  if (b->num_restarts == 0) block_push_restart(b, 0);
  for (size_t i = 0; i < b->num_restarts; i++) est_pw_put_fixed32(&b->buf, b->restarts[i]);
  est_pw_put_fixed32(&b->buf, (uint32_t)b->num_restarts);
}

/* WriteBlock + WriteRawBlock with kNoCompression: block, type 0, masked crc. */
static void write_block(est_sstable_builder *t, est_sstable_block *b, uint64_t *off, uint64_t *size) {
  block_finish(b);
  if (b->failed) t->failed = 1;
  *off = t->out.size;
  *size = b->buf.size;
  est_pw_put_raw(&t->out, b->buf.data, b->buf.size);
  uint8_t trailer[5] = {0};
  uint32_t crc = est_crc32c_extend(est_crc32c(b->buf.data, b->buf.size), trailer, 1);
  est_pw_encode_fixed32(trailer + 1, est_crc32c_mask(crc));
  est_pw_put_raw(&t->out, trailer, 5);
  block_reset(b);
}

static void flush_data(est_sstable_builder *t) {
  if (t->data.entries == 0) return;
  write_block(t, &t->data, &t->pending_offset, &t->pending_size);
  t->pending_index = 1;
}

static void add_index_for_pending(est_sstable_builder *t) {
  uint8_t handle[20];
  uint8_t *p = est_pw_encode_varint(handle, t->pending_offset);
  p = est_pw_encode_varint(p, t->pending_size);
  block_add(&t->index, t->last_key, t->last_key_len, handle, (size_t)(p - handle));
  t->pending_index = 0;
}

void est_sstable_builder_init(est_sstable_builder *b, size_t block_size) {
  memset(b, 0, sizeof *b);
  est_pw_buf_init(&b->out);
  block_init(&b->data, 16);
  block_init(&b->index, 1);
  b->block_size = block_size ? block_size : EST_SSTABLE_BLOCK_SIZE;
}

est_status est_sstable_builder_add(est_sstable_builder *b, const void *key_, size_t key_len,
                                   const void *value, size_t value_len) {
  const uint8_t *key = key_;
  if (b->num_entries > 0 && bytes_compare(b->last_key, b->last_key_len, key, key_len) >= 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "sstable keys must be added in strictly increasing order");
  /* TSL-only rule: an entry of 2 block sizes or more starts a block of its own. */
  if (b->num_entries > 0 && key_len + value_len >= 2 * b->block_size) flush_data(b);
  if (b->pending_index) {
    /* FindShortestSeparator(last_key, key), shortening last_key in place. */
    size_t m = key_len < b->last_key_len ? key_len : b->last_key_len, i = 0;
    while (i < m && b->last_key[i] == key[i]) i++;
    if (i < m && b->last_key[i] < 0xff && b->last_key[i] + 1 < key[i]) {
      b->last_key[i]++;
      b->last_key_len = i + 1;
    }
    add_index_for_pending(b);
  }
  if (!set_bytes(&b->last_key, &b->last_key_len, &b->last_key_cap, key, key_len)) b->failed = 1;
  b->num_entries++;
  block_add(&b->data, key, key_len, value, value_len);
  if (block_size_estimate(&b->data) >= b->block_size) flush_data(b);
  if (b->failed || b->data.failed || b->out.failed)
    return est_error(EST_ERR_NO_MEMORY, "out of memory building an sstable");
  return EST_OK;
}

est_status est_sstable_builder_finish(est_sstable_builder *b, uint8_t **data, size_t *size) {
  *data = NULL;
  *size = 0;
  flush_data(b);
  est_sstable_block meta;
  block_init(&meta, 16);
  uint64_t meta_off, meta_size, index_off, index_size;
  write_block(b, &meta, &meta_off, &meta_size);
  block_free(&meta);
  if (b->pending_index) {
    /* FindShortSuccessor(last_key): bump the first byte that is not 0xff, cut after it. */
    for (size_t i = 0; i < b->last_key_len; i++) {
      if (b->last_key[i] != 0xff) {
        b->last_key[i]++;
        b->last_key_len = i + 1;
        break;
      }
    }
    add_index_for_pending(b);
  }
  write_block(b, &b->index, &index_off, &index_size);
  uint8_t footer[EST_SSTABLE_FOOTER_SIZE] = {0};
  uint8_t *p = est_pw_encode_varint(footer, meta_off);
  p = est_pw_encode_varint(p, meta_size);
  p = est_pw_encode_varint(p, index_off);
  est_pw_encode_varint(p, index_size);
  est_pw_encode_fixed64(footer + 40, kTableMagic);
  est_pw_put_raw(&b->out, footer, sizeof footer);
  est_status st = EST_OK;
  if (b->failed || b->out.failed || b->index.failed || b->data.failed)
    st = est_error(EST_ERR_NO_MEMORY, "out of memory building an sstable");
  else
    *data = est_pw_buf_release(&b->out, size);
  est_sstable_builder_free(b);
  return st;
}

void est_sstable_builder_free(est_sstable_builder *b) {
  est_pw_buf_free(&b->out);
  block_free(&b->data);
  block_free(&b->index);
  free(b->last_key);
  memset(b, 0, sizeof *b);
}
