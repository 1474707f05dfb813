/* Post-processors (tokenizers' processors/, docs/tokenizer.md §8): TemplateProcessing,
 * BertProcessing, RobertaProcessing (trim_offsets), ByteLevel (trim_offsets) and Sequence.
 * Special tokens get offsets (0, 0) and special_tokens_mask 1; without a post-processor the
 * pair is simply joined (the second sequence keeps type id 1). */
#include <stdlib.h>
#include <string.h>

#include "text/hf_internal.h"

bool enc_push(tok_enc *e, int32_t id, int32_t type_id, const char *token, int32_t os, int32_t oe, int special) {
  if (e->n == e->cap) {
    size_t c = e->cap ? e->cap * 2 : 32;
    int32_t **arr[] = {&e->ids, &e->type_ids, &e->special, &e->attention, &e->os, &e->oe};
    for (int i = 0; i < 6; i++) {
      int32_t *p = realloc(*arr[i], c * sizeof *p);
      if (!p) return false;
      *arr[i] = p;
    }
    char **t = realloc(e->tokens, c * sizeof *t);
    if (!t) return false;
    e->tokens = t;
    e->cap = c;
  }
  size_t i = e->n++;
  e->ids[i] = id;
  e->type_ids[i] = type_id;
  e->tokens[i] = (char *)token;
  e->os[i] = os;
  e->oe[i] = oe;
  e->special[i] = special;
  e->attention[i] = 1;
  return true;
}

void enc_free(tok_enc *e) {
  free(e->ids);
  free(e->type_ids);
  free(e->special);
  free(e->attention);
  free(e->os);
  free(e->oe);
  free(e->tokens);
  memset(e, 0, sizeof *e);
}

typedef struct piece {
  int seq;            /* -1: a special token; 0: $A; 1: $B */
  int32_t type_id;
  size_t special;     /* index into specials */
} piece;

typedef struct special {
  char *name;
  int32_t *ids;
  char **tokens;
  size_t n;
} special;

enum { PP_TEMPLATE, PP_BERT, PP_ROBERTA, PP_BYTELEVEL, PP_SEQ };

struct tok_postproc {
  int kind;
  piece *single, *pair;
  size_t nsingle, npair;
  special *sp;
  size_t nsp;
  bool trim_offsets, add_prefix_space;
  tok_postproc **seq;
  size_t nseq;
};

void postproc_free(tok_postproc *p) {
  if (!p) return;
  for (size_t i = 0; i < p->nsp; i++) {
    free(p->sp[i].name);
    free(p->sp[i].ids);
    for (size_t k = 0; k < p->sp[i].n; k++) free(p->sp[i].tokens[k]);
    free(p->sp[i].tokens);
  }
  free(p->sp);
  free(p->single);
  free(p->pair);
  for (size_t i = 0; i < p->nseq; i++) postproc_free(p->seq[i]);
  free(p->seq);
  free(p);
}

static size_t add_special(tok_postproc *p, const char *name, const int32_t *ids, const char *const *tokens, size_t n) {
  for (size_t i = 0; i < p->nsp; i++)
    if (!strcmp(p->sp[i].name, name)) return i;
  special *s = realloc(p->sp, (p->nsp + 1) * sizeof *s);
  if (!s) return SIZE_MAX;
  p->sp = s;
  special *x = &p->sp[p->nsp];
  x->name = strdup(name);
  x->ids = malloc((n + 1) * sizeof *x->ids);
  x->tokens = calloc(n + 1, sizeof *x->tokens);
  x->n = n;
  for (size_t i = 0; x->ids && x->tokens && i < n; i++) x->ids[i] = ids[i], x->tokens[i] = strdup(tokens[i]);
  return p->nsp++;
}

static est_status parse_template(tok_postproc *p, json_t *a, piece **out, size_t *n, const char *where, const char *key) {
  if (!json_is_array(a)) return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be an array", where, key);
  *out = calloc(json_array_size(a) + 1, sizeof **out);
  if (!*out) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  for (size_t i = 0; i < json_array_size(a); i++) {
    json_t *e = json_array_get(a, i), *sq = json_object_get(e, "Sequence"), *st = json_object_get(e, "SpecialToken");
    json_t *x = sq ? sq : st, *id = json_object_get(x, "id"), *ty = json_object_get(x, "type_id");
    if (!json_is_object(x) || !json_is_string(id) || !json_is_integer(ty))
      return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s[%zu] must be {\"Sequence\"|\"SpecialToken\": {id, type_id}}", where,
                       key, i);
    piece *pc = &(*out)[(*n)++];
    pc->type_id = (int32_t)json_integer_value(ty);
    if (sq) {
      const char *s = json_string_value(id);
      if (strcmp(s, "A") && strcmp(s, "B"))
        return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s[%zu]: Sequence id must be A or B", where, key, i);
      pc->seq = s[0] == 'B';
    } else {
      pc->seq = -1;
      size_t k;
      for (k = 0; k < p->nsp && strcmp(p->sp[k].name, json_string_value(id)); k++) {}
      if (k == p->nsp)
        return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s[%zu]: special token \"%s\" is not in special_tokens", where, key, i,
                         json_string_value(id));
      pc->special = k;
    }
  }
  return EST_OK;
}

/* ["[CLS]", 101] -> a special token of one id */
static est_status pair_special(tok_postproc *p, json_t *o, const char *key, size_t *idx, const char *where) {
  json_t *a = json_object_get(o, key);
  if (!json_is_array(a) || json_array_size(a) != 2 || !json_is_string(json_array_get(a, 0)) ||
      !json_is_integer(json_array_get(a, 1)))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s.%s must be [token, id]", where, key);
  int32_t id = (int32_t)json_integer_value(json_array_get(a, 1));
  const char *tok = json_string_value(json_array_get(a, 0));
  *idx = add_special(p, tok, &id, &tok, 1);
  return *idx == SIZE_MAX ? est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where) : EST_OK;
}

est_status postproc_from_json(tok_postproc **out, json_t *o, const tok_vocab *v, const char *where) {
  (void)v;
  *out = NULL;
  json_t *type = json_object_get(o, "type");
  if (!json_is_object(o) || !json_is_string(type))
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s: expected an object with a \"type\"", where);
  const char *t = json_string_value(type);
  tok_postproc *p = calloc(1, sizeof *p);
  if (!p) return est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
  est_status st = EST_OK;
  char sub[512];
  if (!strcmp(t, "TemplateProcessing")) {
    p->kind = PP_TEMPLATE;
    json_t *sp = json_object_get(o, "special_tokens");
    const char *name;
    json_t *e;
    if (sp && !json_is_object(sp)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.special_tokens must be an object", where);
    if (json_is_object(sp)) json_object_foreach(sp, name, e) {
      json_t *ids = json_object_get(e, "ids"), *toks = json_object_get(e, "tokens");
      size_t n = json_array_size(ids);
      if (!json_is_array(ids) || !json_is_array(toks) || json_array_size(toks) != n || n > 64) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.special_tokens[\"%s\"] needs ids and tokens of one length", where, name);
        break;
      }
      int32_t idv[64];
      const char *tv[64];
      for (size_t i = 0; i < n; i++) {
        idv[i] = (int32_t)json_integer_value(json_array_get(ids, i));
        tv[i] = json_is_string(json_array_get(toks, i)) ? json_string_value(json_array_get(toks, i)) : "";
      }
      if (add_special(p, name, idv, tv, n) == SIZE_MAX) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
    }
    if (!st) st = parse_template(p, json_object_get(o, "single"), &p->single, &p->nsingle, where, "single");
    if (!st) st = parse_template(p, json_object_get(o, "pair"), &p->pair, &p->npair, where, "pair");
  } else if (!strcmp(t, "BertProcessing") || !strcmp(t, "RobertaProcessing")) {
    bool roberta = t[0] == 'R';
    p->kind = roberta ? PP_ROBERTA : PP_BERT;
    size_t cls, sep;
    p->trim_offsets = p->add_prefix_space = true;
    json_t *tr = json_object_get(o, "trim_offsets"), *ap = json_object_get(o, "add_prefix_space");
    if (json_is_boolean(tr)) p->trim_offsets = json_is_true(tr);
    if (json_is_boolean(ap)) p->add_prefix_space = json_is_true(ap);
    if (!(st = pair_special(p, o, "cls", &cls, where)) && !(st = pair_special(p, o, "sep", &sep, where))) {
      /* [CLS] A [SEP] / [CLS] A [SEP] B [SEP] (Bert, B typed 1); <s> A </s> </s> B </s> (Roberta, all 0) */
      piece s1[] = {{-1, 0, cls}, {0, 0, 0}, {-1, 0, sep}};
      piece b2[] = {{-1, 0, cls}, {0, 0, 0}, {-1, 0, sep}, {1, 1, 0}, {-1, 1, sep}};
      piece r2[] = {{-1, 0, cls}, {0, 0, 0}, {-1, 0, sep}, {-1, 0, sep}, {1, 0, 0}, {-1, 0, sep}};
      p->single = malloc(sizeof s1);
      p->pair = malloc(sizeof r2);
      if (!p->single || !p->pair) st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
      else {
        memcpy(p->single, s1, sizeof s1);
        p->nsingle = 3;
        memcpy(p->pair, roberta ? r2 : b2, roberta ? sizeof r2 : sizeof b2);
        p->npair = roberta ? 6 : 5;
      }
    }
  } else if (!strcmp(t, "ByteLevel")) {
    p->kind = PP_BYTELEVEL;
    p->trim_offsets = p->add_prefix_space = true;
    json_t *tr = json_object_get(o, "trim_offsets"), *ap = json_object_get(o, "add_prefix_space");
    if (json_is_boolean(tr)) p->trim_offsets = json_is_true(tr);
    if (json_is_boolean(ap)) p->add_prefix_space = json_is_true(ap);
  } else if (!strcmp(t, "Sequence")) {
    p->kind = PP_SEQ;
    json_t *a = json_object_get(o, "processors");
    if (!json_is_array(a)) st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.processors must be an array", where);
    else if (!(p->seq = calloc(json_array_size(a) + 1, sizeof *p->seq)))
      st = est_error(EST_ERR_NO_MEMORY, "%s: out of memory", where);
    for (size_t i = 0; !st && i < json_array_size(a); i++, p->nseq++) {
      snprintf(sub, sizeof sub, "%s.processors[%zu]", where, i);
      st = postproc_from_json(&p->seq[i], json_array_get(a, i), v, sub);
    }
  } else {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "%s.type \"%s\": est does not implement this post-processor", where, t);
  }
  if (st) postproc_free(p);
  else *out = p;
  return st;
}

size_t postproc_added(const tok_postproc *p, bool pair) {
  if (!p) return 0;
  size_t n = 0;
  if (p->kind == PP_SEQ) {
    for (size_t i = 0; i < p->nseq; i++) n += postproc_added(p->seq[i], pair);
    return n;
  }
  const piece *t = pair ? p->pair : p->single;
  for (size_t i = 0, m = pair ? p->npair : p->nsingle; i < m; i++)
    if (t[i].seq < 0) n += p->sp[t[i].special].n;
  return n;
}

/* ByteLevel's process_offsets: leading / trailing spaces ('Ġ' or whitespace) leave the offsets,
 * except one leading space of the first token that add_prefix_space put there. */
static void trim(tok_enc *e, bool add_prefix_space) {
  for (size_t i = 0; i < e->n; i++) {
    const char *t = e->tokens[i];
    size_t len = strlen(t), lead = 0, trail = 0, k = 0;
    while (k < len) { /* 'Ġ' is C4 A0 */
      if (!strncmp(t + k, "\xC4\xA0", 2)) k += 2;
      else if (strchr(" \t\n\r\v\f", t[k]) && t[k]) k++;
      else break;
      lead++;
    }
    size_t j = len;
    while (j > 0) {
      if (j >= 2 && !strncmp(t + j - 2, "\xC4\xA0", 2)) j -= 2;
      else if (strchr(" \t\n\r\v\f", t[j - 1])) j--;
      else break;
      trail++;
    }
    if (lead) {
      bool first = i == 0 || e->os[i] == 0;
      if (first && add_prefix_space && lead == 1) lead = 0;
      int32_t s = e->os[i] + (int32_t)lead;
      e->os[i] = s < e->oe[i] ? s : e->oe[i];
    }
    if (trail && e->oe[i] >= (int32_t)trail) {
      int32_t x = e->oe[i] - (int32_t)trail;
      e->oe[i] = x > e->os[i] ? x : e->os[i];
    }
  }
}

static bool copy_into(tok_enc *out, const tok_enc *a, int32_t type_id, bool keep_type) {
  for (size_t i = 0; i < a->n; i++)
    if (!enc_push(out, a->ids[i], keep_type ? a->type_ids[i] : type_id, a->tokens[i], a->os[i], a->oe[i], a->special[i]))
      return false;
  return true;
}

bool postproc_apply(const tok_postproc *p, const tok_enc *a, const tok_enc *b, bool add_special, unsigned keep,
                    tok_enc *out) {
  tok_enc ta = {0}, tb = {0};
  if (p && (p->kind == PP_BYTELEVEL || p->kind == PP_ROBERTA) && p->trim_offsets) {
    if (!copy_into(&ta, a, 0, true) || (b && !copy_into(&tb, b, 0, true))) return enc_free(&ta), enc_free(&tb), false;
    trim(&ta, p->add_prefix_space);
    if (b) trim(&tb, p->add_prefix_space);
    a = &ta;
    if (b) b = &tb;
  }
  bool ok = true;
  if (p && p->kind == PP_SEQ) {
    /* each processor on the result of the one before; only the last adds tokens here */
    tok_enc cur = {0};
    ok = copy_into(&cur, a, 0, true);
    tok_enc curb = {0};
    if (ok && b) ok = copy_into(&curb, b, 0, true);
    for (size_t i = 0; ok && i < p->nseq; i++) {
      tok_enc next = {0};
      bool last_pair = b && i + 1 < p->nseq && p->seq[i]->kind != PP_TEMPLATE && p->seq[i]->kind != PP_BERT &&
                       p->seq[i]->kind != PP_ROBERTA;
      if (last_pair) { /* a trimming step keeps the pair apart */
        tok_enc na = {0}, nb = {0};
        ok = postproc_apply(p->seq[i], &cur, NULL, add_special, 0, &na) &&
             postproc_apply(p->seq[i], &curb, NULL, add_special, 0, &nb);
        enc_free(&cur), enc_free(&curb);
        cur = na, curb = nb;
        continue;
      }
      ok = postproc_apply(p->seq[i], &cur, b && curb.n + 1 ? &curb : NULL, add_special, keep, &next);
      enc_free(&cur), enc_free(&curb);
      cur = next;
      b = NULL;
    }
    enc_free(&curb);
    *out = cur;
    enc_free(&ta), enc_free(&tb);
    return ok;
  }
  if (!p || p->kind == PP_BYTELEVEL || !add_special) {
    ok = copy_into(out, a, 0, true) && (!b || copy_into(out, b, 1, true));
  } else {
    const piece *t = b ? p->pair : p->single;
    size_t m = b ? p->npair : p->nsingle;
    for (size_t i = 0; ok && i < m; i++) {
      if (t[i].seq >= 0) {
        const tok_enc *src = t[i].seq ? b : a;
        /* template.rs sets the type ids of the sequence's encoding, not of its overflowing
         * ones, which keep the encode's (0 first, 1 second) */
        bool raw = p->kind == PP_TEMPLATE && (keep & (t[i].seq ? 2u : 1u));
        ok = src ? copy_into(out, src, t[i].type_id, raw) : true;
      } else {
        const special *s = &p->sp[t[i].special];
        for (size_t k = 0; ok && k < s->n; k++) ok = enc_push(out, s->ids[k], t[i].type_id, s->tokens[k], 0, 0, 1);
      }
    }
  }
  enc_free(&ta);
  enc_free(&tb);
  return ok;
}
