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
  tok_enc out;            /* the last encoding */
};

void tok_pipeline_free(tok_pipeline *p) {
  if (!p) return;
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
  for (size_t at = 0; at < s->n;) {
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

/* Encoding::truncate without the overflowing part (`encode` returns the first window): keeps
 * max tokens. A stride not under a non-zero max is an error (an assert in tokenizers, which
 * panics there). */
static est_status truncate_enc(tok_enc *e, size_t max, size_t stride, bool left) {
  if (e->n <= max) return EST_OK;
  if (max && stride >= max)
    return est_error(EST_ERR_INVALID_ARGUMENT, "Truncation error: stride %zu must be less than the %zu tokens a "
                     "sequence is cut to", stride, max);
  if (left) {
    size_t d = e->n - max;
    int32_t *arr[] = {e->ids, e->type_ids, e->special, e->attention, e->os, e->oe};
    for (int i = 0; i < 6; i++) memmove(arr[i], arr[i] + d, max * sizeof *arr[i]);
    memmove(e->tokens, e->tokens + d, max * sizeof *e->tokens);
  }
  e->n = max;
  return EST_OK;
}

static est_status truncate_pair(const est_truncation *t, size_t max_length, tok_enc *a, tok_enc *b) {
  size_t total = a->n + (b ? b->n : 0);
  if (max_length == 0) {
    truncate_enc(a, 0, 0, t->left);
    if (b) truncate_enc(b, 0, 0, t->left);
    return EST_OK;
  }
  if (total <= max_length) return EST_OK;
  size_t to_remove = total - max_length;
  if (t->strategy == EST_TRUNCATE_LONGEST_FIRST) {
    if (!b) {
      return truncate_enc(a, total - to_remove, t->stride, t->left);
    }
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
    est_status st = truncate_enc(a, n1, t->stride, t->left);
    return st ? st : truncate_enc(b, n2, t->stride, t->left);
  }
  tok_enc *target = t->strategy == EST_TRUNCATE_ONLY_FIRST ? a : b;
  if (!target) return est_error(EST_ERR_INVALID_ARGUMENT, "Truncation error: Second sequence not provided");
  if (target->n <= to_remove)
    return est_error(EST_ERR_INVALID_ARGUMENT, "Truncation error: Sequence to truncate too short to respect the provided max_length");
  return truncate_enc(target, target->n - to_remove, t->stride, t->left);
}

est_status tok_pipeline_encode(tok_pipeline *p, const char *text, size_t len, const char *pair, size_t pair_len,
                               bool add_special, est_encoding *out) {
  tok_enc a = {0}, b = {0};
  enc_free(&p->out);
  est_status st = encode_one(p, text, len, 0, &a);
  if (!st && pair) st = encode_one(p, pair, pair_len, 1, &b);
  if (!st && p->trunc.enabled) {
    size_t added = add_special ? postproc_added(p->post, pair != NULL) : 0;
    if (p->trunc.max_length < added) st = est_error(EST_ERR_INVALID_ARGUMENT, "truncation max_length %zu is less than "
                                                    "the %zu special tokens added", p->trunc.max_length, added);
    else st = truncate_pair(&p->trunc, p->trunc.max_length - added, &a, pair ? &b : NULL);
  }
  if (!st && !postproc_apply(p->post, &a, pair ? &b : NULL, add_special, &p->out))
    st = est_error(EST_ERR_NO_MEMORY, "tokenizing %zu bytes", len);
  enc_free(&a);
  enc_free(&b);
  if (!st && p->pad.enabled) {
    size_t target = p->pad.fixed ? p->pad.fixed : p->out.n;
    if (p->pad.multiple_of && target % p->pad.multiple_of) target += p->pad.multiple_of - target % p->pad.multiple_of;
    size_t have = p->out.n;
    for (size_t i = have; !st && i < target; i++)
      if (!enc_push(&p->out, p->pad.pad_id, p->pad.pad_type_id, p->pad.pad_token, 0, 0, 1))
        st = est_error(EST_ERR_NO_MEMORY, "padding");
    if (!st) {
      for (size_t i = have; i < target; i++) p->out.attention[i] = 0;
      if (p->pad.left && target > have) { /* rotate the pads to the front */
        tok_enc *e = &p->out;
        size_t d = target - have;
        int32_t *arr[] = {e->ids, e->type_ids, e->special, e->attention, e->os, e->oe};
        for (int k = 0; k < 6; k++) {
          int32_t pad = arr[k][have];
          memmove(arr[k] + d, arr[k], have * sizeof *arr[k]);
          for (size_t i = 0; i < d; i++) arr[k][i] = pad;
        }
        memmove(e->tokens + d, e->tokens, have * sizeof *e->tokens);
        for (size_t i = 0; i < d; i++) e->tokens[i] = (char *)p->pad.pad_token;
      }
    }
  }
  if (st) return st;
  out->n = p->out.n;
  out->ids = p->out.ids;
  out->type_ids = p->out.type_ids;
  out->special_tokens_mask = p->out.special;
  out->attention_mask = p->out.attention;
  out->offset_start = p->out.os;
  out->offset_end = p->out.oe;
  out->tokens = (const char *const *)p->out.tokens;
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
