/* The heads est serves (est/served_head.h): one line each. Export, `est predict` and
 * `est serve` loop over this table; est_served_head_find is the one place a head's name is
 * compared. The first line is the head of an est_model.json without "head" (exports written
 * before heads were named are classifiers). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "est/served_head.h"

static const est_served_head *const SERVED_HEADS[] = {
  &est_served_classifier,
  &est_served_pooling,
  &est_served_squad,
  &est_served_token_classifier,
};
enum { NUM_SERVED_HEADS = sizeof SERVED_HEADS / sizeof *SERVED_HEADS };

/* Heads a program registered (est_served_head_register), after the table's. */
enum { MAX_REGISTERED = 16 };
static const est_served_head *registered[MAX_REGISTERED];
static size_t num_registered;

size_t est_served_head_count(void) { return NUM_SERVED_HEADS + num_registered; }

const est_served_head *est_served_head_at(size_t i) {
  if (i < NUM_SERVED_HEADS) return SERVED_HEADS[i];
  return i - NUM_SERVED_HEADS < num_registered ? registered[i - NUM_SERVED_HEADS] : NULL;
}

const est_served_head *est_served_head_find(const char *name) {
  for (size_t i = 0; name && i < est_served_head_count(); i++)
    if (!strcmp(est_served_head_at(i)->name, name)) return est_served_head_at(i);
  return NULL;
}

char *est_served_head_names(char *buf, size_t size) {
  size_t len = 0;
  if (size) buf[0] = 0;
  for (size_t i = 0; i < est_served_head_count() && len < size; i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", est_served_head_at(i)->name);
  return buf;
}

est_status est_served_head_register(const est_served_head *h) {
  if (!h || !h->name || !*h->name)
    return est_error(EST_ERR_INVALID_ARGUMENT, "est_served_head_register: a head needs a name");
  if (est_served_head_find(h->name))
    return est_error(EST_ERR_INVALID_ARGUMENT, "est_served_head_register: a head named \"%s\" is served already",
                     h->name);
  const struct {
    const char *member;
    int present;
  } required[] = {{"type with predictions", h->type && h->type->predictions},
                  {"params", h->params != NULL},
                  {"outputs[0]", h->outputs[0] != NULL},
                  {"signature", h->signature != NULL},
                  {"batch_create", h->batch_create != NULL},
                  {"add_instance", h->add_instance != NULL},
                  {"rows", h->rows != NULL},
                  {"answer", h->answer != NULL},
                  {"write", h->write != NULL},
                  {"batch_free", h->batch_free != NULL},
                  {"config_size <= EST_MODEL_HEAD_CONFIG_SIZE", h->config_size <= EST_MODEL_HEAD_CONFIG_SIZE}};
  for (size_t i = 0; i < sizeof required / sizeof *required; i++)
    if (!required[i].present)
      return est_error(EST_ERR_INVALID_ARGUMENT, "est_served_head_register: the \"%s\" head needs %s", h->name,
                       required[i].member);
  if (num_registered == MAX_REGISTERED)
    return est_error(EST_ERR_FAILED_PRECONDITION, "est_served_head_register: at most %d heads", MAX_REGISTERED);
  registered[num_registered++] = h;
  return EST_OK;
}

/* ---- est_model_meta's head ------------------------------------------------------------- */

const est_served_head *est_model_meta_head(const est_model_meta *m) {
  return m->head ? m->head : SERVED_HEADS[0];
}

void est_model_meta_set_head(est_model_meta *m, const est_served_head *head, const void *config) {
  m->head = head;
  memset(m->head_config.bytes, 0, sizeof m->head_config.bytes);
  if (config && head && head->config_size) memcpy(m->head_config.bytes, config, head->config_size);
}

const void *est_model_meta_head_config(const est_model_meta *m) { return m->head_config.bytes; }

/* ---- signatures ---------------------------------------------------------------------------- */

json_t *est_served_tensor_info(const char *name, const char *dtype, long long d0, long long d1) {
  char a[32], b[32], n[80];
  snprintf(a, sizeof a, "%lld", d0);
  snprintf(b, sizeof b, "%lld", d1);
  snprintf(n, sizeof n, "%s:0", name);
  json_t *dims = json_pack("[{s:s,s:s}]", "size", a, "name", "");
  if (d1) json_array_append_new(dims, json_pack("{s:s,s:s}", "size", b, "name", ""));
  return json_pack("{s:s,s:{s:o,s:b},s:s}", "dtype", dtype, "tensor_shape", "dim", dims, "unknown_rank", 0, "name", n);
}
