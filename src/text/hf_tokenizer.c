/* The tokenizer.json pipeline (tokenizers' tokenizer/mod.rs encode; docs/tokenizer.md §8):
 * added tokens, normalizer, pre-tokenizer, model, truncation, post-processor, padding, with
 * code point offsets into the input. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "est/log.h"
#include "text/hf_internal.h"
#include "text/hf_tokenizer.h"
#include "text/unicode.h"
#include "text/vocab_internal.h"

typedef struct added {
  int32_t id;
  uint32_t *c;            /* the pattern: content, normalized when `normalized` */
  size_t n;
  bool single_word, lstrip, rstrip, normalized, special;
} added;

struct tok_pipeline {
  tok_normalizer *norm;
  tok_pretokenizer *pre;
  tok_model *model;
  tok_postproc *post;
  tok_decoder *dec;       /* NULL: decode joins the tokens with ' ' */
  added *add;
  size_t nadd;
  const char **id_tok;    /* id -> token (added tokens over the model's), borrowed */
  char **own;             /* added tokens' strings */
  int32_t nid;
  est_truncation trunc;
  est_padding pad;
  char *pad_token;
  uint64_t first[2][64];  /* [normalized] bit (c & 4095): an added token may start with c */
  tok_enc out;            /* the last encoding */
  tok_enc *over;          /* its overflowing encodings (truncation's other windows) */
  size_t nover;
  bool twin;              /* a twin: frees only `out`; the rest is its original's */
};

static void free_overflowing(tok_pipeline *p);

void tok_pipeline_free(tok_pipeline *p) {
  if (!p) return;
  free_overflowing(p);
  if (p->twin) {
    enc_free(&p->out);
    free(p);
    return;
  }
  normalizer_free(p->norm);
  pretokenizer_free(p->pre);
  model_free(p->model);
  postproc_free(p->post);
  decoder_free(p->dec);
  for (size_t i = 0; i < p->nadd; i++) free(p->add[i].c), free(p->own[i]);
  free(p->add);
  free(p->own);
  free(p->id_tok);
  free(p->pad_token);
  enc_free(&p->out);
  free(p);
}

static est_status json_bool(json_t *o, const char *k, bool *out, const char *where) {
  json_t *v = json_object_get(o, k);
  if (!v) return EST_OK;
  if (!json_is_boolean(v)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be a boolean", where, k);
  *out = json_is_true(v);
  return EST_OK;
}

static est_status read_truncation(est_truncation *t, json_t *o, const char *path) {
  memset(t, 0, sizeof *t);
  if (!o || json_is_null(o)) return EST_OK;
  json_t *ml = json_object_get(o, "max_length"), *st = json_object_get(o, "strategy"), *sd = json_object_get(o, "stride"),
         *dir = json_object_get(o, "direction");
  if (!json_is_integer(ml) || json_integer_value(ml) < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: truncation.max_length must be a non-negative integer", path);
  t->enabled = true;
  t->max_length = (size_t)json_integer_value(ml);
  t->stride = json_is_integer(sd) ? (size_t)json_integer_value(sd) : 0;
  const char *s = json_is_string(st) ? json_string_value(st) : "LongestFirst";
  if (!strcmp(s, "LongestFirst")) t->strategy = EST_TRUNCATE_LONGEST_FIRST;
  else if (!strcmp(s, "OnlyFirst")) t->strategy = EST_TRUNCATE_ONLY_FIRST;
  else if (!strcmp(s, "OnlySecond")) t->strategy = EST_TRUNCATE_ONLY_SECOND;
  else return est_error(EST_ERR_INVALID_ARGUMENT, "%s: truncation.strategy \"%s\": expected LongestFirst, OnlyFirst or OnlySecond", path, s);
  const char *d = json_is_string(dir) ? json_string_value(dir) : "Right";
  if (strcmp(d, "Right") && strcmp(d, "Left"))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: truncation.direction \"%s\": expected Right or Left", path, d);
  t->left = d[0] == 'L';
  return EST_OK;
}

static est_status read_padding(tok_pipeline *p, json_t *o, const char *path) {
  est_padding *q = &p->pad;
  memset(q, 0, sizeof *q);
  if (!o || json_is_null(o)) return EST_OK;
  json_t *st = json_object_get(o, "strategy"), *dir = json_object_get(o, "direction"),
         *m = json_object_get(o, "pad_to_multiple_of"), *tok = json_object_get(o, "pad_token");
  q->enabled = true;
  if (json_is_object(st) && json_is_integer(json_object_get(st, "Fixed")))
    q->fixed = (size_t)json_integer_value(json_object_get(st, "Fixed"));
  else if (!(json_is_string(st) && !strcmp(json_string_value(st), "BatchLongest")))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: padding.strategy: expected \"BatchLongest\" or {\"Fixed\": n}", path);
  q->left = json_is_string(dir) && !strcmp(json_string_value(dir), "Left");
  q->multiple_of = json_is_integer(m) ? (size_t)json_integer_value(m) : 0;
  q->pad_id = (int32_t)json_integer_value(json_object_get(o, "pad_id"));
  q->pad_type_id = (int32_t)json_integer_value(json_object_get(o, "pad_type_id"));
  p->pad_token = strdup(json_is_string(tok) ? json_string_value(tok) : "[PAD]");
  q->pad_token = p->pad_token;
  return p->pad_token ? EST_OK : est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
}

est_status tok_pipeline_from_json(tok_pipeline **out, json_t *root, const char *path) {
  *out = NULL;
  tok_pipeline *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
  char where[600];
  est_status st = EST_OK;
  json_t *n = json_object_get(root, "normalizer"), *pt = json_object_get(root, "pre_tokenizer"),
         *pp = json_object_get(root, "post_processor"), *at = json_object_get(root, "added_tokens"),
         *dc = json_object_get(root, "decoder");
  snprintf(where, sizeof where, "%s: model", path);
  if ((st = model_from_json(&p->model, json_object_get(root, "model"), where))) goto fail;
  snprintf(where, sizeof where, "%s: normalizer", path);
  if (n && !json_is_null(n) && (st = normalizer_from_json(&p->norm, n, where))) goto fail;
  snprintf(where, sizeof where, "%s: pre_tokenizer", path);
  if (pt && !json_is_null(pt) && (st = pretokenizer_from_json(&p->pre, pt, where))) goto fail;
  snprintf(where, sizeof where, "%s: post_processor", path);
  if (pp && !json_is_null(pp) && (st = postproc_from_json(&p->post, pp, model_vocab(p->model), where))) goto fail;
  snprintf(where, sizeof where, "%s: decoder", path);
  if (dc && !json_is_null(dc) && (st = decoder_from_json(&p->dec, dc, where))) goto fail;
  if ((st = read_truncation(&p->trunc, json_object_get(root, "truncation"), path)) ||
      (st = read_padding(p, json_object_get(root, "padding"), path)))
    goto fail;
  /* added tokens */
  size_t na = json_is_array(at) ? json_array_size(at) : 0;
  if (at && !json_is_null(at) && !json_is_array(at)) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s: added_tokens must be an array", path);
    goto fail;
  }
  const tok_vocab *v = model_vocab(p->model);
  int32_t nid = v->n;
  p->add = calloc(na + 1, sizeof *p->add);
  p->own = calloc(na + 1, sizeof *p->own);
  if (!p->add || !p->own) {
    st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
    goto fail;
  }
  for (size_t i = 0; i < na; i++, p->nadd++) {
    json_t *a = json_array_get(at, i), *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
    added *x = &p->add[i];
    snprintf(where, sizeof where, "%s: added_tokens[%zu]", path, i);
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (1 << 30) || !json_is_string(c) ||
        !json_string_length(c)) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "%s needs an \"id\" and a non-empty \"content\"", where);
      goto fail;
    }
    x->id = (int32_t)json_integer_value(id);
    x->normalized = !json_is_true(json_object_get(a, "special")); /* tokenizers' default: !special */
    if ((st = json_bool(a, "single_word", &x->single_word, where)) || (st = json_bool(a, "lstrip", &x->lstrip, where)) ||
        (st = json_bool(a, "rstrip", &x->rstrip, where)) || (st = json_bool(a, "normalized", &x->normalized, where)) ||
        (st = json_bool(a, "special", &x->special, where)))
      goto fail;
    p->own[i] = strdup(json_string_value(c));
    tok_nstr s = {0};
    size_t m;
    uint32_t *cps = utf8_to_cps(json_string_value(c), json_string_length(c), &m);
    if (!p->own[i] || !cps || !nstr_reserve(&s, m + 1)) {
      free(cps);
      st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
      goto fail;
    }
    for (size_t k = 0; k < m; k++) nstr_push(&s, cps[k], (int32_t)k, (int32_t)k + 1);
    free(cps);
    if (x->normalized && p->norm && !normalizer_apply(p->norm, &s)) {
      nstr_free(&s);
      st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
      goto fail;
    }
    x->c = s.c;
    x->n = s.n;
    if (s.n) p->first[x->normalized][(s.c[0] & 4095) >> 6] |= 1ULL << (s.c[0] & 63);
    s.c = NULL;
    nstr_free(&s);
    if (x->id + 1 > nid) nid = x->id + 1;
  }
  p->nid = nid;
  p->id_tok = calloc((size_t)nid + 1, sizeof *p->id_tok);
  if (!p->id_tok) {
    st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", path);
    goto fail;
  }
  for (int32_t i = 0; i < v->n; i++) p->id_tok[i] = v->tok[i];
  for (size_t i = 0; i < p->nadd; i++) p->id_tok[p->add[i].id] = p->own[i];
  *out = p;
  return EST_OK;
fail:
  tok_pipeline_free(p);
  return st;
}

/* ---- added tokens: leftmost-longest matches with single_word / lstrip / rstrip ---- */

static bool word_char(uint32_t c) {
  if (c == '_') return true;
  int g = utf8proc_category((utf8proc_int32_t)c);
  return (g >= UTF8PROC_CATEGORY_LU && g <= UTF8PROC_CATEGORY_LO) || (g >= UTF8PROC_CATEGORY_ND && g <= UTF8PROC_CATEGORY_NO) ||
         g == UTF8PROC_CATEGORY_MN || g == UTF8PROC_CATEGORY_MC || g == UTF8PROC_CATEGORY_PC;
}

static bool ws(uint32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Splits s (consumed) by the added tokens with normalized == want into t. */
static bool split_added(const tok_pipeline *p, tok_nstr *s, bool want, tok_splits *t) {
  size_t start_offset = 0;
  bool any = false;
  for (size_t i = 0; i < p->nadd; i++) any |= p->add[i].normalized == want;
  if (!any || !s->n) {
    if (!s->n) return nstr_free(s), true;
    return splits_push(t, s, -1);
  }
  const uint64_t *first = p->first[want];
  for (size_t at = 0; at < s->n;) {
    if (!(first[(s->c[at] & 4095) >> 6] >> (s->c[at] & 63) & 1)) { /* no added token starts here */
      at++;
      continue;
    }
    /* the longest added token at `at` */
    size_t best = SIZE_MAX, blen = 0;
    for (size_t i = 0; i < p->nadd; i++) {
      const added *x = &p->add[i];
      if (x->normalized != want || !x->n || x->n > s->n - at || x->n <= blen) continue;
      if (memcmp(s->c + at, x->c, x->n * sizeof *x->c)) continue;
      best = i, blen = x->n;
    }
    if (best == SIZE_MAX) {
      at++;
      continue;
    }
    const added *x = &p->add[best];
    size_t ms = at, me = at + x->n;
    if (x->single_word) {
      bool start_ok = ms == 0 || !word_char(s->c[ms - 1]);
      bool stop_ok = me == s->n || !word_char(s->c[me]);
      if (!start_ok || !stop_ok) {
        at++;
        continue;
      }
    }
    if (x->lstrip) {
      size_t k = ms;
      while (k > 0 && ws(s->c[k - 1])) k--;
      ms = k > start_offset ? k : start_offset;
    }
    if (x->rstrip)
      while (me < s->n && ws(s->c[me])) me++;
    tok_nstr piece;
    if (start_offset < ms) {
      if (!nstr_slice(&piece, s, start_offset, ms) || !splits_push(t, &piece, -1)) return false;
    }
    if (!nstr_slice(&piece, s, ms, me) || !splits_push(t, &piece, x->id)) return false;
    start_offset = at = me;
  }
  if (start_offset < s->n) {
    tok_nstr piece;
    if (!nstr_slice(&piece, s, start_offset, s->n) || !splits_push(t, &piece, -1)) return false;
  }
  nstr_free(s);
  return true;
}

/* One sequence -> e (type ids = type_id, offsets into the sequence's own code points). */
static est_status encode_one(tok_pipeline *p, const char *text, size_t len, int32_t type_id, tok_enc *e) {
  tok_nstr s = {0};
  tok_splits a = {0}, b = {0};
  tok_tokens toks = {0};
  est_status st = EST_OK;
  if (!nstr_reserve(&s, len + 1)) return est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  for (size_t i = 0; i < len;) { /* invalid UTF-8 is dropped, as est's other tokenizers do */
    size_t adv;
    uint32_t c = tok_utf8_next((const uint8_t *)text + i, len - i, &adv);
    if (c != UINT32_MAX) nstr_push(&s, c, (int32_t)s.n, (int32_t)s.n + 1);
    i += adv;
  }
  bool ok = split_added(p, &s, false, &a);
  for (size_t i = 0; ok && i < a.n; i++) {
    if (a.v[i].added_id >= 0) {
      ok = splits_push(&b, &a.v[i].s, a.v[i].added_id);
      continue;
    }
    ok = (!p->norm || normalizer_apply(p->norm, &a.v[i].s)) && split_added(p, &a.v[i].s, true, &b);
  }
  if (ok && p->pre) ok = pretokenizer_apply(p->pre, &b);
  for (size_t i = 0; ok && !st && i < b.n; i++) {
    const tok_nstr *w = &b.v[i].s;
    if (b.v[i].added_id >= 0) {
      int32_t id = b.v[i].added_id;
      ok = enc_push(e, id, type_id, p->id_tok[id] ? p->id_tok[id] : "", w->n ? w->as[0] : w->base,
                    w->n ? w->ae[w->n - 1] : w->base, 0);
      continue;
    }
    toks.n = 0;
    if ((st = model_tokenize(p->model, w->c, w->n, &toks))) break;
    for (size_t k = 0; ok && k < toks.n; k++) {
      tok_token *x = &toks.v[k];
      int32_t os = x->e > x->s ? w->as[x->s] : w->base, oe = x->e > x->s ? w->ae[x->e - 1] : w->base;
      const char *name = x->id < p->nid && p->id_tok[x->id] ? p->id_tok[x->id] : "";
      ok = enc_push(e, x->id, type_id, name, os, oe, 0);
    }
  }
  nstr_free(&s);
  splits_free(&a);
  splits_free(&b);
  free(toks.v);
  if (!ok && !st) st = est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  return st;
}

/* A window [s, e) of a sequence's tokens (utils/truncation.rs, Encoding::truncate). */
typedef struct win {
  size_t s, e;
} win;

typedef struct wins {
  win *v;
  size_t n;
} wins;

/* Encoding::truncate(max, stride, direction) of n tokens as windows: the first is what encode
 * keeps, the others Encoding.overflowing, in its order. Right: starts 0, max - stride, ...
 * until one reaches the end; Left: the same from the end. max 0 keeps nothing and moves the
 * whole sequence to overflowing. A stride not under a non-zero max is an error (an assert in
 * tokenizers, which panics there). */
static est_status windows(wins *w, size_t n, size_t max, size_t stride, bool left) {
  free(w->v);
  w->n = 0;
  size_t offset = max > stride ? max - stride : 1, cap = n <= max ? 1 : max == 0 ? 2 : n / offset + 2;
  if (!(w->v = malloc(cap * sizeof *w->v))) return est_error(EST_ERR_NO_MEMORY, "truncating %zu tokens", n);
  if (n <= max) {
    w->v[w->n++] = (win){0, n};
    return EST_OK;
  }
  if (max == 0) {
    w->v[w->n++] = (win){0, 0};
    w->v[w->n++] = (win){0, n};
    return EST_OK;
  }
  if (stride >= max)
    return est_error(EST_ERR_INVALID_ARGUMENT, "Truncation error: stride %zu must be less than the %zu tokens a "
                     "sequence is cut to", stride, max);
  if (!left) {
    for (size_t start = 0; start < n; start += offset) {
      size_t stop = start + max < n ? start + max : n;
      w->v[w->n++] = (win){start, stop};
      if (stop == n) break;
    }
  } else {
    for (size_t k = 0; k < n; k += offset) { /* stop = n - k, n - k - offset, ... */
      size_t stop = n - k, start = stop < max ? 0 : stop - max;
      w->v[w->n++] = (win){start, stop};
      if (start == 0) break;
    }
  }
  return EST_OK;
}

/* truncate_encodings (utils/truncation.rs) as windows of a and b (b NULL for one text). */
static est_status truncate_pair(const est_truncation *t, size_t max_length, const tok_enc *a, const tok_enc *b,
                                wins *wa, wins *wb) {
  size_t total = a->n + (b ? b->n : 0);
  est_status st = EST_OK;
  if (max_length == 0) {
    st = windows(wa, a->n, 0, 0, t->left);
    return st || !b ? st : windows(wb, b->n, 0, 0, t->left);
  }
  if (total <= max_length) return EST_OK;
  size_t to_remove = total - max_length;
  if (t->strategy == EST_TRUNCATE_LONGEST_FIRST) {
    if (!b) return windows(wa, a->n, total - to_remove, t->stride, t->left);
    size_t n1 = a->n, n2 = b->n;
    bool swap = n1 > n2;
    if (swap) { size_t x = n1; n1 = n2; n2 = x; }
    if (n1 > max_length) n2 = n1;
    else n2 = n1 > max_length - n1 ? n1 : max_length - n1;
    if (n1 + n2 > max_length) {
      n1 = max_length / 2;
      n2 = n1 + max_length % 2;
    }
    if (swap) { size_t x = n1; n1 = n2; n2 = x; }
    st = windows(wa, a->n, n1, t->stride, t->left);
    return st ? st : windows(wb, b->n, n2, t->stride, t->left);
  }
  const tok_enc *target = t->strategy == EST_TRUNCATE_ONLY_FIRST ? a : b;
  if (!target) return est_error(EST_ERR_INVALID_ARGUMENT, "Truncation error: Second sequence not provided");
  if (target->n <= to_remove)
    return est_error(EST_ERR_INVALID_ARGUMENT, "Truncation error: Sequence to truncate too short to respect the provided max_length");
  return windows(target == a ? wa : wb, target->n, target->n - to_remove, t->stride, t->left);
}

/* e's tokens [w.s, w.e) copied into out, or e itself when w is all of it. */
static const tok_enc *slice_enc(tok_enc *out, const tok_enc *e, win w, bool *ok) {
  if (w.s == 0 && w.e == e->n) return e;
  for (size_t i = w.s; *ok && i < w.e; i++)
    *ok = enc_push(out, e->ids[i], e->type_ids[i], e->tokens[i], e->os[i], e->oe[i], e->special[i]);
  return out;
}

/* PaddingParams on one encoding (utils/padding.rs pad_encodings, one at a time). */
static bool pad_enc(const est_padding *pad, tok_enc *e) {
  size_t target = pad->fixed ? pad->fixed : e->n;
  if (pad->multiple_of && target % pad->multiple_of) target += pad->multiple_of - target % pad->multiple_of;
  size_t have = e->n;
  for (size_t i = have; i < target; i++)
    if (!enc_push(e, pad->pad_id, pad->pad_type_id, pad->pad_token, 0, 0, 1)) return false;
  for (size_t i = have; i < target; i++) e->attention[i] = 0;
  if (pad->left && target > have) { /* rotate the pads to the front */
    size_t d = target - have;
    int32_t *arr[] = {e->ids, e->type_ids, e->special, e->attention, e->os, e->oe};
    for (int k = 0; k < 6; k++) {
      int32_t v = arr[k][have];
      memmove(arr[k] + d, arr[k], have * sizeof *arr[k]);
      for (size_t i = 0; i < d; i++) arr[k][i] = v;
    }
    memmove(e->tokens + d, e->tokens, have * sizeof *e->tokens);
    for (size_t i = 0; i < d; i++) e->tokens[i] = (char *)pad->pad_token;
  }
  return true;
}

/* The post-processed, padded encoding of window wa of a and wb of b (b NULL: one text); *_over:
 * that window is an overflowing one. */
static bool assemble(const tok_pipeline *p, const tok_enc *a, win wa, bool wa_over, const tok_enc *b, win wb,
                     bool wb_over, bool add_special, tok_enc *out) {
  tok_enc sa = {0}, sb = {0};
  bool ok = true;
  const tok_enc *x = slice_enc(&sa, a, wa, &ok), *y = b ? slice_enc(&sb, b, wb, &ok) : NULL;
  unsigned keep = (wa_over ? 1u : 0u) | (wb_over ? 2u : 0u);
  ok = ok && postproc_apply(p->post, x, y, add_special, keep, out) && (!p->pad.enabled || pad_enc(&p->pad, out));
  enc_free(&sa);
  enc_free(&sb);
  return ok;
}

static void free_overflowing(tok_pipeline *p) {
  for (size_t i = 0; i < p->nover; i++) enc_free(&p->over[i]);
  free(p->over);
  p->over = NULL;
  p->nover = 0;
}

static void to_encoding(const tok_enc *e, est_encoding *out) {
  out->n = e->n;
  out->ids = e->ids;
  out->type_ids = e->type_ids;
  out->special_tokens_mask = e->special;
  out->attention_mask = e->attention;
  out->offset_start = e->os;
  out->offset_end = e->oe;
  out->tokens = (const char *const *)e->tokens;
}

est_status tok_pipeline_encode(tok_pipeline *p, const char *text, size_t len, const char *pair, size_t pair_len,
                               bool add_special, est_encoding *out) {
  tok_enc a = {0}, b = {0};
  enc_free(&p->out);
  free_overflowing(p);
  est_status st = encode_one(p, text, len, 0, &a);
  if (!st && pair) st = encode_one(p, pair, pair_len, 1, &b);
  win one_a = {0, a.n}, one_b = {0, b.n};
  wins wa = {&one_a, 1}, wb = {&one_b, 1};
  wins ta = {NULL, 0}, tb = {NULL, 0};
  if (!st && p->trunc.enabled) {
    size_t added = add_special ? postproc_added(p->post, pair != NULL) : 0;
    if (p->trunc.max_length < added) st = est_error(EST_ERR_INVALID_ARGUMENT, "truncation max_length %zu is less than "
                                                    "the %zu special tokens added", p->trunc.max_length, added);
    else st = truncate_pair(&p->trunc, p->trunc.max_length - added, &a, pair ? &b : NULL, &ta, &tb);
    if (ta.n) wa = ta;
    if (tb.n) wb = tb;
  }
  const tok_enc *pb = pair ? &b : NULL;
  if (!st && !assemble(p, &a, wa.v[0], false, pb, wb.v[0], false, add_special, &p->out))
    st = est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  /* Encoding::merge_with's order: each overflowing window of a with b's window, then with
   * each of b's overflowing ones; then a's window with each of b's overflowing ones */
  size_t nover = (wa.n - 1) * wb.n + (wb.n - 1);
  if (!st && nover && !(p->over = calloc(nover, sizeof *p->over)))
    st = est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  for (size_t i = 1; !st && i < wa.n; i++)
    for (size_t j = 0; !st && j < wb.n; j++)
      if (!assemble(p, &a, wa.v[i], true, pb, wb.v[j], j > 0, add_special, &p->over[p->nover++]))
        st = est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  for (size_t j = 1; !st && j < wb.n; j++)
    if (!assemble(p, &a, wa.v[0], false, pb, wb.v[j], true, add_special, &p->over[p->nover++]))
      st = est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  free(ta.v);
  free(tb.v);
  enc_free(&a);
  enc_free(&b);
  if (st) return st;
  to_encoding(&p->out, out);
  return EST_OK;
}

size_t tok_pipeline_num_overflowing(const tok_pipeline *p) { return p->nover; }

bool tok_pipeline_overflowing(const tok_pipeline *p, size_t i, est_encoding *out) {
  if (i >= p->nover) return false;
  to_encoding(&p->over[i], out);
  return true;
}

est_status tok_pipeline_twin(tok_pipeline **out, const tok_pipeline *p) {
  /* normalizer, pre-tokenizer, model, post-processor, decoder and added tokens are only read
   * while encoding (their functions take them const); the encoding is the one thing written */
  *out = malloc(sizeof **out);
  if (!*out) return est_error(EST_ERR_NO_MEMORY, "tokenizer twin");
  **out = *p;
  memset(&(*out)->out, 0, sizeof (*out)->out);
  (*out)->over = NULL;
  (*out)->nover = 0;
  (*out)->twin = true;
  return EST_OK;
}

est_truncation *tok_pipeline_truncation(tok_pipeline *p) { return &p->trunc; }
est_padding *tok_pipeline_padding(tok_pipeline *p) { return &p->pad; }
const char *tok_pipeline_model_type(const tok_pipeline *p) { return model_type(p->model); }
bool tok_pipeline_lowercases(const tok_pipeline *p) { return normalizer_lowercases(p->norm); }
int32_t tok_pipeline_size(const tok_pipeline *p) { return p->nid; }
const char *tok_pipeline_token(const tok_pipeline *p, int32_t id) { return id >= 0 && id < p->nid ? p->id_tok[id] : NULL; }

/* Tokenizer.decode (tokenizer/mod.rs): each id's token (added tokens first; an id with no
 * token is left out; with skip_special, tokens equal to a special added token's content
 * too), through the decoder, joined; no decoder: joined with ' '. */
est_status tok_pipeline_decode(const tok_pipeline *p, const int32_t *ids, size_t n, bool skip_special, char **out,
                               size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  tok_strs l = {0};
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    const char *t = tok_pipeline_token(p, ids[i]);
    if (!t) continue;
    bool skip = false;
    for (size_t k = 0; skip_special && k < p->nadd && !skip; k++) skip = p->add[k].special && !strcmp(p->own[k], t);
    if (!skip) ok = strs_push(&l, t, strlen(t));
  }
  if (ok && p->dec) ok = decoder_chain(p->dec, &l);
  size_t len = 0;
  for (size_t i = 0; i < l.n; i++) len += l.len[i] + 1;
  char *s = ok ? malloc(len + 1) : NULL;
  if (s) {
    size_t k = 0;
    for (size_t i = 0; i < l.n; i++) {
      if (i && !p->dec) s[k++] = ' ';
      size_t m = l.len[i];
      memcpy(s + k, l.v[i], m);
      k += m;
    }
    s[k] = 0;
    *out_len = k;
  }
  strs_free(&l);
  if (!s) return est_error(EST_ERR_NO_MEMORY, "decode: out of memory");
  *out = s;
  return EST_OK;
}
