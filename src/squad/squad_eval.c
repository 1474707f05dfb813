/* The official SQuAD evaluation scripts, evaluate-v1.1.py and evaluate-v2.0.py (docs/squad.md
 * §3-§4), re-implemented from their behaviour. tests/reference/squad_eval_reference.py runs the
 * unchanged scripts on the fixtures of tests/data/squad/ under Python 3.11, 3.12 and 3.13;
 * tests/test_squad_eval.c compares est's output with theirs, text for text.
 *
 * What decides the last digit: each score is a Python int (0 / 1 from compute_exact, the
 * no-answer F1, an F1 with nothing in common) or a float (a partial F1, a thresholded
 * score); v1.1 and find_best_thresh add them with `+=`, make_eval_dict with sum(), whose
 * float algorithm depends on the Python version (est_squad_python_sum). Dicts keep first
 * insertion order, so every sum runs in the order the script's dicts hold the questions. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_error.h"
#include "est/log.h"
#include "squad/squad_internal.h"

est_squad_eval_config est_squad_eval_config_default(void) {
  est_squad_eval_config c = {0};
  c.na_prob_thresh = 1.0;
  c.version = EST_SQUAD_EVAL_AUTO;
  c.python_sum = EST_SQUAD_SUM_PY311;
  return c;
}

est_status est_squad_python_sum_parse(const char *version, est_squad_python_sum *out) {
  int major = 0, minor = 0;
  char tail = 0;
  if (!version || sscanf(version, "%d.%d%c", &major, &minor, &tail) != 2 || major < 2 || major > 3 || minor < 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "python version \"%s\": expected MAJOR.MINOR, e.g. 3.11 or 3.12",
                     version ? version : "");
  if (major == 2 || minor <= 11) *out = EST_SQUAD_SUM_PY311;
  else if (minor <= 13) *out = EST_SQUAD_SUM_PY312;
  else *out = EST_SQUAD_SUM_PY314;
  return EST_OK;
}

void est_squad_eval_result_free(est_squad_eval_result *r) { (void)r; }

/* ---- Python numbers --------------------------------------------------------------------- */

/* A score as the script holds it: an int or a float. */
typedef struct score {
  double v;
  bool is_int;
} score;

/* Python's max() over a sequence: the first of the largest (int 1 beats a later float 1.0). */
static score score_max(score a, score b) { return b.v > a.v ? b : a; }

/* sum(values) with the start value int 0, as CPython's builtin_sum does it (the fast paths
 * of Python/bltinmodule.c; docs/squad.md §4.4): ints add exactly while no float has come;
 * the first float turns the sum into float(int sum) + x; from there floats add plainly
 * (<= 3.11) or by Neumaier's compensated sum (>= 3.12), and ints add plainly (3.12, 3.13) or
 * compensated (>= 3.14). Ints here are 0 and 1, so their int phase is exact in a double. */
static double py_sum(const score *s, size_t n, est_squad_python_sum mode) {
  size_t i = 0;
  double f = 0.0;
  for (; i < n && s[i].is_int; i++) f += s[i].v;
  if (i == n) return f;
  f += s[i++].v;                                      /* int + float */
  if (mode == EST_SQUAD_SUM_PY311) {
    for (; i < n; i++) f += s[i].v;
    return f;
  }
  double c = 0.0;
  for (; i < n; i++) {
    double x = s[i].v;
    if (s[i].is_int && mode == EST_SQUAD_SUM_PY312) {
      f += x;
      continue;
    }
    double t = f + x;
    if (fabs(f) >= fabs(x)) c += (f - t) + x;
    else c += (x - t) + f;
    f = t;
  }
  if (c != 0.0 && isfinite(c)) f += c;
  return f;
}

/* ---- files -------------------------------------------------------------------------------- */

static est_status load_json(const char *path, const char *flag, json_t **out) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return est_error(errno == ENOENT ? EST_ERR_NOT_FOUND : EST_ERR_IO, "%s=%s: cannot open: %s", flag, path,
                     strerror(errno));
  json_error_t jerr;
  *out = json_loadf(f, JSON_DECODE_ANY, &jerr);
  fclose(f);
  if (!*out)
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s=%s:%d:%d: not valid JSON: %s", flag, path, jerr.line, jerr.column,
                     est_json_error_text(&jerr));
  return EST_OK;
}

/* One question of the data file, in file order. */
typedef struct question {
  const char *id;
  const json_t *answers;          /* the list (v2.0 reads only its texts) */
  size_t uniq;                    /* index among distinct ids (first occurrence order) */
} question;

/* Distinct question ids, first-occurrence order (a Python dict's keys), with an open
 * addressing index. */
typedef struct idset {
  const char **ids;
  size_t n, cap;
  size_t *slots;                  /* index + 1; 0 empty */
  size_t nslots;
} idset;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The index of id, adding it when new (*added set). SIZE_MAX for lack of memory. */
static size_t idset_put(idset *s, const char *id, bool *added) {
  if (2 * (s->n + 1) > s->nslots) {
    size_t ns = s->nslots ? 2 * s->nslots : 1024;
    size_t *slots = calloc(ns, sizeof *slots);
    if (!slots) return SIZE_MAX;
    for (size_t i = 0; i < s->n; i++) {
      size_t h = hash_str(s->ids[i]) & (ns - 1);
      while (slots[h]) h = (h + 1) & (ns - 1);
      slots[h] = i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = ns;
  }
  size_t h = hash_str(id) & (s->nslots - 1);
  for (; s->slots[h]; h = (h + 1) & (s->nslots - 1))
    if (!strcmp(s->ids[s->slots[h] - 1], id)) {
      *added = false;
      return s->slots[h] - 1;
    }
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 1024;
    const char **ids = realloc(s->ids, cap * sizeof *ids);
    if (!ids) return SIZE_MAX;
    s->ids = ids;
    s->cap = cap;
  }
  s->ids[s->n] = id;
  s->slots[h] = s->n + 1;
  *added = true;
  return s->n++;
}

/* The index of id, or SIZE_MAX. */
static size_t idset_find(const idset *s, const char *id) {
  if (!s->nslots) return SIZE_MAX;
  for (size_t h = hash_str(id) & (s->nslots - 1); s->slots[h]; h = (h + 1) & (s->nslots - 1))
    if (!strcmp(s->ids[s->slots[h] - 1], id)) return s->slots[h] - 1;
  return SIZE_MAX;
}

static void idset_free(idset *s) {
  free(s->ids);
  free(s->slots);
}

/* Everything one evaluation holds. */
typedef struct eval {
  const est_squad_eval_config *cfg;
  json_t *data_root, *preds, *na_probs;
  question *q;
  size_t nq;
  idset uniq;
  squad_buf a, b;                 /* scratch for normalize_answer */
} eval;

static void say(eval *e, bool to_stderr, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(eval *e, bool to_stderr, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (e->cfg->message) e->cfg->message(e->cfg->message_ctx, to_stderr, line);
  else EST_LOG_WARN("%s", line);
}


/* Walks data -> paragraphs -> qas, collecting id and answers per question: the fields both
 * scripts read, and no others (context, question, title are not looked at). */
static est_status collect_questions(eval *e) {
  const char *file = e->cfg->data_file;
  const json_t *data = json_is_object(e->data_root) ? json_object_get(e->data_root, "data") : NULL;
  if (!json_is_object(e->data_root))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: the top level must be a JSON object, not %s", file,
                     est_squad_json_type_name(e->data_root));
  if (!data) return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: missing field \"data\"", file);
  if (!json_is_array(data))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: field \"data\" must be an array", file);
  size_t cap = 0;
  for (size_t d = 0; d < json_array_size(data); d++) {
    const json_t *art = json_array_get(data, d), *paras = json_object_get(art, "paragraphs");
    if (!json_is_array(paras))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: data[%zu]: %s \"paragraphs\"", file, d,
                       paras ? "field must be an array:" : "missing field");
    for (size_t p = 0; p < json_array_size(paras); p++) {
      const json_t *para = json_array_get(paras, p), *qas = json_object_get(para, "qas");
      if (!json_is_array(qas))
        return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: data[%zu].paragraphs[%zu]: %s \"qas\"", file, d,
                         p, qas ? "field must be an array:" : "missing field");
      for (size_t k = 0; k < json_array_size(qas); k++) {
        const json_t *qa = json_array_get(qas, k), *id = json_object_get(qa, "id");
        const json_t *answers = json_object_get(qa, "answers");
        char where[128];
        snprintf(where, sizeof where, "data[%zu].paragraphs[%zu].qas[%zu]", d, p, k);
        if (!json_is_string(id))
          return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: %s: %s \"id\"%s", file, where,
                           id ? "field" : "missing field", id ? " must be a string" : "");
        if (!json_is_array(answers))
          return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: %s (id \"%s\"): %s \"answers\"%s", file, where,
                           json_string_value(id), answers ? "field" : "missing field",
                           answers ? " must be an array" : "");
        for (size_t a = 0; a < json_array_size(answers); a++) {
          const json_t *t = json_object_get(json_array_get(answers, a), "text");
          if (!json_is_string(t))
            return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: %s (id \"%s\"): answers[%zu]: %s \"text\"%s",
                             file, where, json_string_value(id), a, t ? "field" : "missing field",
                             t ? " must be a string" : "");
        }
        if (e->nq == cap) {
          cap = cap ? 2 * cap : 1024;
          question *q = realloc(e->q, cap * sizeof *q);
          if (!q) return est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", file);
          e->q = q;
        }
        bool added;
        size_t u = idset_put(&e->uniq, json_string_value(id), &added);
        if (u == SIZE_MAX) return est_error(EST_ERR_NO_MEMORY, "out of memory reading %s", file);
        e->q[e->nq++] = (question){json_string_value(id), answers, u};
      }
    }
  }
  return EST_OK;
}

/* The prediction for id: NULL when absent; an error when it is not a string. */
static est_status prediction(eval *e, const char *id, const char **out) {
  const json_t *v = json_object_get(e->preds, id);
  *out = NULL;
  if (!v) return EST_OK;
  if (!json_is_string(v))
    return est_error(EST_ERR_INVALID_ARGUMENT, "--pred_file=%s: the prediction for \"%s\" must be a string, not %s",
                     e->cfg->pred_file, id, est_squad_json_type_name(v));
  *out = json_string_value(v);
  return EST_OK;
}

static const char *answer_text(const question *q, size_t a) {
  return json_string_value(json_object_get(json_array_get(q->answers, a), "text"));
}

/* ---- normalize_answer, exact match, F1 ------------------------------------------------------ */

static est_status normalize(squad_buf *out, const char *s) {
  if (!squad_normalize_answer(s, strlen(s), out)) return est_error(EST_ERR_NO_MEMORY, "out of memory");
  return EST_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Splits a normalized string (single spaces) in place into tokens, sorted. */
static char **tokens_sorted(char *s, size_t *n) {
  size_t count = 0;
  for (char *p = s; *p; p++) count += (p == s || p[-1] == '\0' || p[-1] == ' ') && *p != ' ';
  char **t = malloc((count ? count : 1) * sizeof *t);
  if (!t) return NULL;
  size_t k = 0;
  for (char *p = s; *p;) {
    t[k++] = p;
    char *sp = strchr(p, ' ');
    if (!sp) break;
    *sp = '\0';
    p = sp + 1;
  }
  qsort(t, k, sizeof *t, cmp_str);
  *n = k;
  return t;
}

/* sum((Counter(a) & Counter(b)).values()) over sorted token lists. */
static size_t common_tokens(char **a, size_t na, char **b, size_t nb) {
  size_t i = 0, j = 0, same = 0;
  while (i < na && j < nb) {
    int c = strcmp(a[i], b[j]);
    if (c == 0) {
      same++;
      i++;
      j++;
    } else if (c < 0) {
      i++;
    } else {
      j++;
    }
  }
  return same;
}

/* The F1 of both scripts: precision and recall of the normalized tokens. v1.1's f1_score
 * returns int 0 when nothing is in common; v2.0's compute_f1 first returns
 * int(gold_toks == pred_toks) when either side has no token. */
static est_status f1(eval *e, const char *gold, const char *pred, bool v2, score *out) {
  est_status st;
  if ((st = normalize(&e->a, gold)) || (st = normalize(&e->b, pred))) return st;
  size_t ng, np;
  char **tg = tokens_sorted(e->a.p, &ng), **tp = tokens_sorted(e->b.p, &np);
  if (!tg || !tp) {
    free(tg);
    free(tp);
    return est_error(EST_ERR_NO_MEMORY, "out of memory");
  }
  size_t same = common_tokens(tg, ng, tp, np);
  free(tg);
  free(tp);
  if (v2 && (ng == 0 || np == 0)) {
    /* gold_toks == pred_toks: both empty (a non-empty list never equals an empty one). */
    *out = (score){ng == np ? 1.0 : 0.0, true};
    return EST_OK;
  }
  if (same == 0) {
    *out = (score){0.0, true};
    return EST_OK;
  }
  double precision = 1.0 * (double)same / (double)np;
  double recall = 1.0 * (double)same / (double)ng;
  *out = (score){(2 * precision * recall) / (precision + recall), false};
  return EST_OK;
}

static est_status exact(eval *e, const char *gold, const char *pred, bool *out) {
  est_status st;
  if ((st = normalize(&e->a, gold)) || (st = normalize(&e->b, pred))) return st;
  *out = !strcmp(e->a.p, e->b.p);
  return EST_OK;
}

/* ---- evaluate-v1.1.py ------------------------------------------------------------------------ */

static est_status evaluate_v1(eval *e, est_squad_eval_result *r) {
  /* The script's main(): dataset_json['version'] must exist; a different one is only said. */
  const json_t *ver = json_object_get(e->data_root, "version");
  if (!ver)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: missing field \"version\" (evaluate-v1.1.py reads it; "
                     "its KeyError)", e->cfg->data_file);
  if (!json_is_string(ver) || strcmp(json_string_value(ver), "1.1")) {
    if (!json_is_string(ver))
      return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: field \"version\" must be a string, not %s",
                       e->cfg->data_file, est_squad_json_type_name(ver));
    say(e, true, "Evaluation expects v-1.1, but got dataset with v-%s", json_string_value(ver));
  }
  /* evaluate(): f1 = exact_match = total = 0, then `+=` per question in file order. */
  double f1_sum = 0, em_sum = 0;
  int64_t total = 0;
  est_status st;
  for (size_t i = 0; i < e->nq; i++) {
    const question *q = &e->q[i];
    total++;
    const char *pred;
    if ((st = prediction(e, q->id, &pred))) return st;
    if (!pred) {
      say(e, true, "Unanswered question %s will receive score 0.", q->id);
      r->num_missing++;
      continue;
    }
    size_t na = json_array_size(q->answers);
    if (na == 0)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: question \"%s\" has no answers: evaluate-v1.1.py "
                       "cannot score it (max() of nothing); a SQuAD 2.0 file needs --version_2_with_negative",
                       e->cfg->data_file, q->id);
    bool em = false;
    score best = {0, true};
    for (size_t a = 0; a < na; a++) {
      bool x;
      if ((st = exact(e, answer_text(q, a), pred, &x))) return st;
      em = em || x;
    }
    for (size_t a = 0; a < na; a++) {
      score s;
      if ((st = f1(e, answer_text(q, a), pred, false, &s))) return st;
      best = a == 0 ? s : score_max(best, s);
    }
    em_sum += em;
    f1_sum += best.v;
  }
  if (total == 0)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: no questions (the script divides by their number)",
                     e->cfg->data_file);
  r->exact = 100.0 * em_sum / (double)total;
  r->f1 = 100.0 * f1_sum / (double)total;
  r->total = total;
  return EST_OK;
}

/* ---- evaluate-v2.0.py ------------------------------------------------------------------------ */

/* A na_prob: the JSON number, kept as int or float for printing as best_*_thresh. */
typedef struct na_entry {
  const char *id;
  est_squad_number p;
  double v;                       /* p as a double, for comparisons */
  size_t order;                   /* position in the file: the stable sort's tie-break */
} na_entry;

static int cmp_na(const void *a, const void *b) {
  const na_entry *x = a, *y = b;
  if (x->v != y->v) return x->v < y->v ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

static est_status evaluate_v2(eval *e, est_squad_eval_result *r) {
  const est_squad_eval_config *cfg = e->cfg;
  size_t nu = e->uniq.n;
  est_status st = EST_OK;
  /* Per distinct id: qid_to_has_ans (the last occurrence's), the raw scores (the last
   * occurrence's, for ids with a prediction), the prediction. */
  bool *has_ans = calloc(nu + 1, sizeof *has_ans), *scored = calloc(nu + 1, sizeof *scored);
  score *exact_raw = calloc(nu + 1, sizeof *exact_raw), *f1_raw = calloc(nu + 1, sizeof *f1_raw);
  score *ex_th = calloc(nu + 1, sizeof *ex_th), *f1_th = calloc(nu + 1, sizeof *f1_th);
  const char **pred = calloc(nu + 1, sizeof *pred);
  size_t *scored_order = calloc(nu + 1, sizeof *scored_order), nscored = 0;
  score *tmp_e = calloc(nu + 1, sizeof *tmp_e), *tmp_f = calloc(nu + 1, sizeof *tmp_f);
  na_entry *na = NULL;
  size_t nna = 0;
  double *na_of = NULL;           /* per distinct id: its na_prob, NaN when absent */
  if (!has_ans || !scored || !exact_raw || !f1_raw || !ex_th || !f1_th || !pred || !scored_order || !tmp_e || !tmp_f) {
    st = est_error(EST_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  for (size_t i = 0; i < e->nq; i++) has_ans[e->q[i].uniq] = json_array_size(e->q[i].answers) > 0;

  /* get_raw_scores: every occurrence in file order. */
  for (size_t i = 0; i < e->nq; i++) {
    const question *q = &e->q[i];
    const char *p;
    if ((st = prediction(e, q->id, &p))) goto done;
    if (!p) {
      say(e, false, "Missing prediction for %s", q->id);
      r->num_missing++;
      continue;
    }
    /* gold_answers: the texts that normalize to something, else [""]. */
    size_t ngold = 0;
    score best_e = {0, true}, best_f = {0, true};
    for (size_t a = 0; a < json_array_size(q->answers); a++) {
      const char *t = answer_text(q, a);
      if ((st = normalize(&e->a, t))) goto done;
      if (!e->a.len) continue;
      bool x;
      score s;
      if ((st = exact(e, t, p, &x)) || (st = f1(e, t, p, true, &s))) goto done;
      best_e = ngold == 0 ? (score){x, true} : score_max(best_e, (score){x, true});
      best_f = ngold == 0 ? s : score_max(best_f, s);
      ngold++;
    }
    if (ngold == 0) {
      bool x;
      if ((st = exact(e, "", p, &x)) || (st = f1(e, "", p, true, &best_f))) goto done;
      best_e = (score){x, true};
    }
    size_t u = q->uniq;
    if (!scored[u]) scored_order[nscored++] = u;     /* the dict's first insertion */
    scored[u] = true;
    exact_raw[u] = best_e;
    f1_raw[u] = best_f;
    pred[u] = p;
  }

  /* na_probs: the file's, or {k: 0.0 for k in preds}. */
  const json_t *na_src = cfg->na_prob_file ? e->na_probs : e->preds;
  if (!json_is_object(na_src)) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--na_prob_file=%s: the top level must be a JSON object, not %s",
                   cfg->na_prob_file, est_squad_json_type_name(na_src));
    goto done;
  }
  na = calloc(json_object_size(na_src) + 1, sizeof *na);
  na_of = malloc((nu + 1) * sizeof *na_of);
  if (!na || !na_of) {
    st = est_error(EST_ERR_NO_MEMORY, "out of memory");
    goto done;
  }
  for (size_t u = 0; u < nu; u++) na_of[u] = NAN;
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)na_src, key, val) {
    na_entry *x = &na[nna];
    x->id = key;
    x->order = nna;
    if (!cfg->na_prob_file) {
      x->p = (est_squad_number){false, 0, 0.0};
    } else if (json_is_integer(val)) {
      x->p = (est_squad_number){true, (int64_t)json_integer_value(val), (double)json_integer_value(val)};
    } else if (json_is_real(val)) {
      x->p = (est_squad_number){false, 0, json_real_value(val)};
    } else {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "--na_prob_file=%s: the probability for \"%s\" must be a number, not %s",
                     cfg->na_prob_file, key, est_squad_json_type_name(val));
      goto done;
    }
    x->v = x->p.f;
    nna++;
  }
  /* Index the na_probs by question (ids outside the data file take part in the sort only). */
  for (size_t k = 0; k < nna; k++) {
    size_t u = idset_find(&e->uniq, na[k].id);
    if (u != SIZE_MAX) na_of[u] = na[k].v;
  }

  /* apply_no_ans_threshold, over the scored questions in their dict order. */
  for (size_t s = 0; s < nscored; s++) {
    size_t u = scored_order[s];
    if (isnan(na_of[u])) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "--na_prob_file=%s: no probability for question \"%s\" (the script's "
                     "KeyError)", cfg->na_prob_file, e->uniq.ids[u]);
      goto done;
    }
    bool pred_na = na_of[u] > cfg->na_prob_thresh;
    ex_th[u] = pred_na ? (score){!has_ans[u], false} : exact_raw[u];
    f1_th[u] = pred_na ? (score){!has_ans[u], false} : f1_raw[u];
  }

  /* make_eval_dict: the whole, then HasAns and NoAns in qid_to_has_ans order. */
  if (nscored == 0) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--pred_file=%s: no question of %s has a prediction (the script divides "
                   "by their number)", cfg->pred_file, cfg->data_file);
    goto done;
  }
  for (size_t s = 0; s < nscored; s++) {
    tmp_e[s] = ex_th[scored_order[s]];
    tmp_f[s] = f1_th[scored_order[s]];
  }
  r->total = (int64_t)nscored;
  r->exact = 100.0 * py_sum(tmp_e, nscored, cfg->python_sum) / (double)nscored;
  r->f1 = 100.0 * py_sum(tmp_f, nscored, cfg->python_sum) / (double)nscored;
  for (int want = 1; want >= 0; want--) {
    size_t n = 0;
    for (size_t u = 0; u < nu; u++) {
      if (has_ans[u] != (bool)want) continue;
      if (!scored[u]) {
        st = est_error(EST_ERR_INVALID_ARGUMENT, "--pred_file=%s: no prediction for question \"%s\": evaluate-v2.0.py "
                       "stops here (KeyError) after printing \"Missing prediction for\" lines", cfg->pred_file,
                       e->uniq.ids[u]);
        goto done;
      }
      tmp_e[n] = ex_th[u];
      tmp_f[n] = f1_th[u];
      n++;
    }
    if (n == 0) continue;
    double ex = 100.0 * py_sum(tmp_e, n, cfg->python_sum) / (double)n;
    double fx = 100.0 * py_sum(tmp_f, n, cfg->python_sum) / (double)n;
    if (want) {
      r->has_has_ans = true;
      r->has_ans_exact = ex;
      r->has_ans_f1 = fx;
      r->has_ans_total = (int64_t)n;
    } else {
      r->has_no_ans = true;
      r->no_ans_exact = ex;
      r->no_ans_f1 = fx;
      r->no_ans_total = (int64_t)n;
    }
  }

  /* find_all_best_thresh, only with a na_prob_file: the na_probs sorted by value (stable:
   * ties in file order), the raw scores added up with `+=` from the number of no-answer
   * questions; the best strictly greater total names the threshold. */
  if (cfg->na_prob_file) {
    qsort(na, nna, sizeof *na, cmp_na);
    size_t num_no_ans = 0;
    for (size_t u = 0; u < nu; u++) num_no_ans += !has_ans[u];
    for (int which = 0; which < 2; which++) {
      const score *raw = which == 0 ? exact_raw : f1_raw;
      double cur = (double)num_no_ans, best = cur;
      est_squad_number thresh = {false, 0, 0.0};
      for (size_t k = 0; k < nna; k++) {
        size_t u = idset_find(&e->uniq, na[k].id);
        if (u == SIZE_MAX || !scored[u]) continue;      /* `if qid not in scores: continue` */
        double diff = has_ans[u] ? raw[u].v : (pred[u][0] ? -1.0 : 0.0);
        cur += diff;
        if (cur > best) {
          best = cur;
          thresh = na[k].p;
        }
      }
      double pct = 100.0 * best / (double)nscored;
      if (which == 0) {
        r->best_exact = pct;
        r->best_exact_thresh = thresh;
      } else {
        r->best_f1 = pct;
        r->best_f1_thresh = thresh;
      }
    }
    r->has_best = true;
  }

done:
  free(has_ans);
  free(scored);
  free(exact_raw);
  free(f1_raw);
  free(ex_th);
  free(f1_th);
  free(pred);
  free(scored_order);
  free(tmp_e);
  free(tmp_f);
  free(na);
  free(na_of);
  return st;
}

/* ---- the entry point --------------------------------------------------------------------------- */

est_status est_squad_evaluate(const est_squad_eval_config *cfg, est_squad_eval_result *out) {
  memset(out, 0, sizeof *out);
  if (!cfg->data_file || !cfg->pred_file)
    return est_error(EST_ERR_INVALID_ARGUMENT, "squad evaluation needs a data file and a prediction file");
  eval e = {.cfg = cfg};
  est_status st;
  if ((st = load_json(cfg->data_file, "--data_file", &e.data_root))) goto done;
  /* Which script: asked for, or by the data's "version". */
  est_squad_eval_version v = cfg->version;
  if (v == EST_SQUAD_EVAL_AUTO) {
    const json_t *ver = json_is_object(e.data_root) ? json_object_get(e.data_root, "version") : NULL;
    const char *s = json_is_string(ver) ? json_string_value(ver) : "";
    if (s[0] == 'v' || s[0] == 'V') s++;
    if (s[0] == '1' && (s[1] == '.' || !s[1])) v = EST_SQUAD_EVAL_V1_1;
    else if (s[0] == '2' && (s[1] == '.' || !s[1])) v = EST_SQUAD_EVAL_V2_0;
    if (v == EST_SQUAD_EVAL_V1_1 && cfg->na_prob_file) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "--na_prob_file is evaluate-v2.0.py's, and --data_file=%s says version "
                     "\"%s\": pass --version_2_with_negative to score it as SQuAD 2.0", cfg->data_file,
                     json_string_value(ver));
      goto done;
    }
    if (v == EST_SQUAD_EVAL_AUTO) {
      st = est_error(EST_ERR_INVALID_ARGUMENT, "--data_file=%s: its \"version\" (%s) says neither 1.x nor 2.x: pass "
                     "--version_2_with_negative=true (evaluate-v2.0.py) or =false (evaluate-v1.1.py)", cfg->data_file,
                     json_is_string(ver) ? json_string_value(ver) : ver ? est_squad_json_type_name(ver) : "missing");
      goto done;
    }
  }
  if (v == EST_SQUAD_EVAL_V1_1 && cfg->na_prob_file) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--na_prob_file works with SQuAD 2.0 scoring only (evaluate-v2.0.py)");
    goto done;
  }
  out->version = v;
  if ((st = collect_questions(&e))) goto done;
  if ((st = load_json(cfg->pred_file, "--pred_file", &e.preds))) goto done;
  if (!json_is_object(e.preds)) {
    st = est_error(EST_ERR_INVALID_ARGUMENT, "--pred_file=%s: the top level must be a JSON object of question id -> "
                   "answer, not %s", cfg->pred_file, est_squad_json_type_name(e.preds));
    goto done;
  }
  if (v == EST_SQUAD_EVAL_V2_0 && cfg->na_prob_file && (st = load_json(cfg->na_prob_file, "--na_prob_file", &e.na_probs)))
    goto done;
  st = v == EST_SQUAD_EVAL_V1_1 ? evaluate_v1(&e, out) : evaluate_v2(&e, out);
done:
  json_decref(e.data_root);
  json_decref(e.preds);
  json_decref(e.na_probs);
  free(e.q);
  idset_free(&e.uniq);
  squad_buf_free(&e.a);
  squad_buf_free(&e.b);
  return st;
}

/* ---- printing as json.dumps ----------------------------------------------------------------- */

static bool put_key(squad_buf *b, bool indent, bool *first, const char *key) {
  char head[96];
  snprintf(head, sizeof head, "%s%s\"%s\": ", *first ? "" : ",", indent ? "\n  " : (*first ? "" : " "), key);
  *first = false;
  return squad_buf_append(b, head, strlen(head));
}

static bool put_float(squad_buf *b, bool indent, bool *first, const char *key, double v) {
  char num[40];
  est_squad_format_pyfloat(v, num, sizeof num);
  return put_key(b, indent, first, key) && squad_buf_append(b, num, strlen(num));
}

static bool put_int(squad_buf *b, bool indent, bool *first, const char *key, int64_t v) {
  char num[32];
  snprintf(num, sizeof num, "%lld", (long long)v);
  return put_key(b, indent, first, key) && squad_buf_append(b, num, strlen(num));
}

static bool put_number(squad_buf *b, bool indent, bool *first, const char *key, est_squad_number n) {
  return n.is_int ? put_int(b, indent, first, key, n.i) : put_float(b, indent, first, key, n.f);
}

char *est_squad_eval_json(const est_squad_eval_result *r, bool indent) {
  squad_buf b = {0};
  bool first = true, ok = squad_buf_append(&b, "{", 1);
  if (r->version == EST_SQUAD_EVAL_V1_1) {
    /* print(json.dumps({'exact_match': ..., 'f1': ...})) */
    ok = ok && put_float(&b, false, &first, "exact_match", r->exact) && put_float(&b, false, &first, "f1", r->f1) &&
         squad_buf_append(&b, "}\n", 2);
  } else {
    ok = ok && put_float(&b, indent, &first, "exact", r->exact) && put_float(&b, indent, &first, "f1", r->f1) &&
         put_int(&b, indent, &first, "total", r->total);
    if (r->has_has_ans)
      ok = ok && put_float(&b, indent, &first, "HasAns_exact", r->has_ans_exact) &&
           put_float(&b, indent, &first, "HasAns_f1", r->has_ans_f1) &&
           put_int(&b, indent, &first, "HasAns_total", r->has_ans_total);
    if (r->has_no_ans)
      ok = ok && put_float(&b, indent, &first, "NoAns_exact", r->no_ans_exact) &&
           put_float(&b, indent, &first, "NoAns_f1", r->no_ans_f1) &&
           put_int(&b, indent, &first, "NoAns_total", r->no_ans_total);
    if (r->has_best)
      ok = ok && put_float(&b, indent, &first, "best_exact", r->best_exact) &&
           put_number(&b, indent, &first, "best_exact_thresh", r->best_exact_thresh) &&
           put_float(&b, indent, &first, "best_f1", r->best_f1) &&
           put_number(&b, indent, &first, "best_f1_thresh", r->best_f1_thresh);
    ok = ok && (indent ? squad_buf_append(&b, "\n}\n", 3) : squad_buf_append(&b, "}", 1));
  }
  if (!ok) {
    squad_buf_free(&b);
    return NULL;
  }
  return b.p;
}
