/* `est serve`'s REST front (serve_internal.h): TF Serving's URLs and JSON
 * (tensorflow_serving/g3doc/api_rest.md) on libmicrohttpd, which does all of HTTP.
 *   GET  /v1/models/NAME[/versions/V]            model status
 *   GET  /v1/models/NAME[/versions/V]/metadata   the serving_default signature
 *   POST /v1/models/NAME[/versions/V]:predict    {"instances"|"inputs": ...}
 *   POST /v1/models/NAME[/versions/V]:classify   {"examples": [...]}
 *   GET  /monitoring/prometheus/metrics
 *   POST /embed, /v1/embeddings                  an embedding export (serve_embed.c)
 *   text-embeddings-inference's other routes     /health, /info, /metrics, /tokenize, /decode,
 *                                                /predict, /rerank, /similarity, ... (serve_tei.c)
 * Errors are {"error": "..."}: 400 bad request, 404 unknown model/version/path, 405 wrong
 * method, 408 a request slower to arrive than --rest_api_timeout_in_ms (serve_limits.c), 413
 * body over max_request_bytes, 503 queue full or shutting down. */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve_internal.h"

typedef struct http_req {
  char *body;
  size_t len, cap;
  bool preparing;              /* a POST announced to the batcher (serve_prepare_begin) */
  double t0;
} http_req;

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void end_preparing(serve_http *h, http_req *r) {
  if (r->preparing) serve_prepare_abandon(h->server);
  r->preparing = false;
}

static enum MHD_Result respond(struct MHD_Connection *c, serve_http *h, http_req *r, unsigned status, char *body,
                               const char *content_type) {
  end_preparing(h, r);
  if (!body) {
    status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    body = strdup("{\"error\": \"out of memory\"}");
    if (!body) return MHD_NO;
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  enum MHD_Result ret = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  serve_metrics_request(h->server, (int)status, now_seconds() - r->t0);
  return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, serve_http *h, http_req *r, unsigned status, json_t *j) {
  char *text = json_dumps(j, JSON_INDENT(1));
  json_decref(j);
  return respond(c, h, r, status, text, "application/json");
}

static enum MHD_Result respond_error(struct MHD_Connection *c, serve_http *h, http_req *r, unsigned status,
                                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static enum MHD_Result respond_error(struct MHD_Connection *c, serve_http *h, http_req *r, unsigned status,
                                     const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_t *j = json_object();
  json_object_set_new(j, "error", json_string(msg));
  return respond_json(c, h, r, status, j);
}

/* ---- status and metadata ---------------------------------------------------------------- */

static json_t *model_status(int64_t version) {
  char v[32];
  snprintf(v, sizeof v, "%lld", (long long)version);
  return json_pack("{s:[{s:s,s:s,s:{s:s,s:s}}]}", "model_version_status", "version", v, "state", "AVAILABLE",
                   "status", "error_code", "OK", "error_message", "");
}

/* The serving_default signature: the head's inputs (its texts as strings, run_classifier's
 * features as [-1, max_seq_length] ints), its outputs and any metadata of its own
 * (est/served_head.h). */
static json_t *model_metadata(const serve_http *h, const served_model *m) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  char v[32];
  snprintf(v, sizeof v, "%lld", (long long)m->version);
  json_t *inputs = json_object();
  for (int k = 0; k < EST_SERVED_MAX_TEXTS && head->inputs.texts[k]; k++)
    json_object_set_new(inputs, head->inputs.texts[k], est_served_tensor_info(head->inputs.texts[k], "DT_STRING", -1, 0));
  static const char *const TOKENS[3] = {"input_ids", "input_mask", "segment_ids"};
  for (int k = 0; head->inputs.tokens && k < 3; k++)
    json_object_set_new(inputs, TOKENS[k], est_served_tensor_info(TOKENS[k], "DT_INT32", -1, meta->max_seq_length));
  json_t *outputs = json_object(), *metadata = json_object();
  head->signature(meta, est_servable_row_width(m->servable), outputs, metadata);
  json_t *sig = json_pack("{s:o,s:o,s:s}", "inputs", inputs, "outputs", outputs, "method_name",
                          "tensorflow/serving/predict");
  json_t *signature_def = json_pack("{s:{s:o}}", "signature_def", "serving_default", sig);
  /* "signature_def" first, then the head's keys ("labels") */
  json_t *ordered = json_pack("{s:o}", "signature_def", signature_def);
  json_object_update(ordered, metadata);
  json_decref(metadata);
  return json_pack("{s:{s:s,s:s,s:s},s:o}", "model_spec", "name", h->opt->model_name, "signature_name", "",
                   "version", v, "metadata", ordered);
}

/* ---- predict / classify --------------------------------------------------------------------- */

/* A request's instances as the head's batch: its rows, run by the batcher, and its answers in
 * the response's shape (TF Serving's "predictions", "outputs" by columns, "results" for
 * :classify). *preparing is cleared when the job is queued (serve_run_job then ends the
 * request's announcement). */
static est_status answer_request(serve_http *h, served_model *m, const est_request *req, est_request_kind kind,
                                 bool *preparing, char **text) {
  *text = NULL;
  est_served_batch *b = NULL;
  serve_job job = {.model = m};
  est_status st = est_served_batch_create(&b, m->servable, NULL, NULL);
  for (size_t i = 0; st == EST_OK && i < req->count; i++) st = est_served_batch_add_instance(b, &req->instances[i]);
  est_served_rows rows = {0};
  if (st == EST_OK) st = est_served_batch_rows(b, &rows);
  if (st == EST_OK) {
    job.n = rows.n;
    job.ids = (int32_t *)rows.input_ids, job.mask = (int32_t *)rows.input_mask, job.segs = (int32_t *)rows.segment_ids;
    job.longest = rows.longest;
    for (size_t k = 0; k < (size_t)rows.n * (size_t)est_servable_meta(m->servable)->max_seq_length; k++)
      job.tokens += rows.input_mask[k] != 0;
    job.probs = malloc(((size_t)job.n + 1) * (size_t)est_servable_row_width(m->servable) * sizeof(float));
    if (!job.probs) st = est_error(EST_ERR_NO_MEMORY, "request of %d rows", job.n);
  }
  if (st == EST_OK && job.n > 0) { /* e.g. contexts without a word have no window to run */
    *preparing = false;            /* serve_run_job takes the announcement over */
    st = serve_run_job(h->server, &job);
  }
  if (st == EST_OK) st = est_served_batch_answer(b, job.probs);
  if (st == EST_OK) {
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f) st = est_error(EST_ERR_NO_MEMORY, "answer");
    const est_served_form form = kind == EST_REQUEST_CLASSIFY ? EST_SERVED_CLASSIFY : EST_SERVED_PREDICT;
    if (f) fputs(kind == EST_REQUEST_CLASSIFY ? "{\"results\": [" : req->columnar ? "{\"outputs\": [" : "{\"predictions\": [", f);
    for (size_t i = 0; f && i < req->count; i++) {
      if (i) fputs(", ", f);
      est_served_batch_write(b, i, form, f);
    }
    if (f) fputs("]}\n", f), fclose(f);
  }
  free(job.probs);
  est_served_batch_free(b);
  return st;
}

static enum MHD_Result handle_predict(struct MHD_Connection *c, serve_http *h, http_req *r, served_model *m,
                                      est_request_kind kind) {
  const est_model_meta *meta = est_servable_meta(m->servable);
  const est_served_head *head = est_model_meta_head(meta);
  if (kind == EST_REQUEST_CLASSIFY && head->no_classify) /* e.g. embeddings: nothing to classify */
    return respond_error(c, h, r, MHD_HTTP_BAD_REQUEST, "%s", head->no_classify);
  est_request_limits lim = {meta->max_seq_length, meta->bert_config.vocab_size, meta->bert_config.type_vocab_size,
                            (size_t)h->opt->max_enqueued_batches * (size_t)h->opt->max_batch_size};
  est_request req;
  if (est_request_parse(&req, kind, &head->inputs, r->body ? r->body : "", r->len, &lim) != EST_OK)
    return respond_error(c, h, r, MHD_HTTP_BAD_REQUEST, "%s", est_error_message());
  if (req.signature_name && *req.signature_name && strcmp(req.signature_name, "serving_default")) {
    enum MHD_Result ret = respond_error(c, h, r, MHD_HTTP_BAD_REQUEST,
                                        "Serving signature name: \"%s\" not found in signature def",
                                        req.signature_name);
    est_request_clear(&req);
    return ret;
  }
  char *text = NULL;
  est_status st = answer_request(h, m, &req, kind, &r->preparing, &text);
  est_request_clear(&req);
  if (st == EST_OK) return respond(c, h, r, MHD_HTTP_OK, text, "application/json");
  free(text);
  return respond_error(c, h, r, st == EST_ERR_ABORTED ? MHD_HTTP_SERVICE_UNAVAILABLE
                                : st == EST_ERR_INVALID_ARGUMENT ? MHD_HTTP_BAD_REQUEST
                                                                 : MHD_HTTP_INTERNAL_SERVER_ERROR,
                       "%s", est_error_message());
}

/* The server's metrics and the connections' (serve_limits.c). */
static char *metrics_text(serve_http *h) {
  char *core = serve_metrics_text(h->server), *text = NULL;
  if (!core) return NULL;
  const char *name = h->opt->model_name;
  if (asprintf(&text, "%s# HELP est_serving_connections_open Connections open now.\n"
                      "# TYPE est_serving_connections_open gauge\nest_serving_connections_open{model_name=\"%s\"} %d\n"
                      "# HELP est_serving_connections_timed_out Connections cut for arriving slower than "
                      "--rest_api_timeout_in_ms.\n# TYPE est_serving_connections_timed_out counter\n"
                      "est_serving_connections_timed_out{model_name=\"%s\"} %llu\n",
               core, name, serve_conns_open(h->conns), name,
               (unsigned long long)serve_conns_timed_out(h->conns)) < 0)
    text = NULL;
  free(core);
  return text;
}

/* ---- routing ------------------------------------------------------------------------------------ */

/* The URL (already %-decoded by libmicrohttpd, so "%2e%2e" and "%2F" arrive as ".." and "/")
 * is matched against fixed forms only: the model name must equal --model_name byte for
 * byte, a version must be 1-18 digits and equal the number of the version in memory
 * (s->current), and nothing of the URL ever reaches a path: no request opens a file, lists
 * a directory or loads a version. Anything else ("..", a second slash, an absolute path, a
 * version like "../1") is a 404 before the model is looked at. */
static enum MHD_Result route(struct MHD_Connection *c, serve_http *h, http_req *r, const char *url,
                             const char *method) {
  const bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (!strcmp(url, "/monitoring/prometheus/metrics")) {
    if (!get) return respond_error(c, h, r, MHD_HTTP_METHOD_NOT_ALLOWED, "%s %s: use GET", method, url);
    return respond(c, h, r, MHD_HTTP_OK, metrics_text(h), "text/plain; version=0.0.4");
  }
  const int tei = serve_tei_route_of(url);
  if (tei >= 0) { /* text-embeddings-inference's routes (serve_tei*.c, serve_embed.c) */
    const bool want_get = serve_tei_route_get((serve_tei_route)tei);
    if (want_get ? !get : !post)
      return respond_error(c, h, r, MHD_HTTP_METHOD_NOT_ALLOWED, "%s %s: use %s", method, url,
                           want_get ? "GET" : "POST");
    unsigned status;
    bool queued = false;
    const char *type = "application/json";
    char *text = tei == TEI_EMBED || tei == TEI_OPENAI
                   ? serve_embed_answer(h, tei == TEI_EMBED ? EST_EMBED_API_TEI : EST_EMBED_API_OPENAI, r->body,
                                        r->len, &queued, &status)
                   : serve_tei_answer(h, (serve_tei_route)tei, r->body, r->len, &queued, &status, &type);
    if (queued) r->preparing = false; /* serve_run_job took the announcement over */
    serve_tei_count(h, (serve_tei_route)tei, text ? status : 500, now_seconds() - r->t0);
    return respond(c, h, r, status, text, type);
  }
  static const char prefix[] = "/v1/models/";
  if (strncmp(url, prefix, sizeof prefix - 1))
    return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Malformed request: %s %s", method, url);
  const char *p = url + sizeof prefix - 1;
  size_t name_len = strcspn(p, "/:");
  const char *name_end = p + name_len;
  /* Optional /versions/<digits>, then "", "/metadata", ":predict" or ":classify". */
  long long version = -1;
  const char *rest = name_end;
  if (!strncmp(rest, "/versions/", 10)) {
    const char *d = rest + 10;
    size_t nd = strspn(d, "0123456789");
    if (nd == 0 || nd > 18) return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Malformed request: %s %s", method, url);
    version = strtoll(d, NULL, 10);
    rest = d + nd;
  }
  enum { STATUS, METADATA, PREDICT, CLASSIFY } what;
  if (!*rest) what = STATUS;
  else if (!strcmp(rest, "/metadata")) what = METADATA;
  else if (!strcmp(rest, ":predict")) what = PREDICT;
  else if (!strcmp(rest, ":classify")) what = CLASSIFY;
  else if (!strcmp(rest, ":regress"))
    return respond_error(c, h, r, MHD_HTTP_BAD_REQUEST, "the model has no regression signature; use :predict or "
                         ":classify");
  else return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Malformed request: %s %s", method, url);
  if ((what <= METADATA && !get) || (what >= PREDICT && !post))
    return respond_error(c, h, r, MHD_HTTP_METHOD_NOT_ALLOWED, "%s %s: use %s", method, url,
                         what <= METADATA ? "GET" : "POST");
  if (name_len != strlen(h->opt->model_name) || strncmp(p, h->opt->model_name, name_len)) {
    if (version >= 0)
      return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Servable not found for request: Specific(%.*s, %lld)",
                           (int)name_len, p, version);
    return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Servable not found for request: Latest(%.*s)", (int)name_len, p);
  }
  served_model *m = serve_acquire(h->server);
  if (!m || (version >= 0 && version != m->version)) {
    serve_release(h->server, m);
    if (version >= 0)
      return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Servable not found for request: Specific(%s, %lld)",
                           h->opt->model_name, version);
    return respond_error(c, h, r, MHD_HTTP_NOT_FOUND, "Servable not found for request: Latest(%s)", h->opt->model_name);
  }
  enum MHD_Result ret;
  if (what == STATUS) ret = respond_json(c, h, r, MHD_HTTP_OK, model_status(m->version));
  else if (what == METADATA) ret = respond_json(c, h, r, MHD_HTTP_OK, model_metadata(h, m));
  else ret = handle_predict(c, h, r, m, what == PREDICT ? EST_REQUEST_PREDICT : EST_REQUEST_CLASSIFY);
  serve_release(h->server, m);
  return ret;
}

static enum MHD_Result refuse_too_big(struct MHD_Connection *c, serve_http *h, http_req *r, const char *url) {
  if (serve_tei_route_of(url) >= 0) /* TEI's shape: {"error", "error_type": "Validation"} */
    return respond(c, h, r, MHD_HTTP_CONTENT_TOO_LARGE,
                   serve_tei_error(MHD_HTTP_CONTENT_TOO_LARGE, "the request body is over --max_request_bytes=%zu",
                                   h->opt->max_request_bytes),
                   "application/json");
  return respond_error(c, h, r, MHD_HTTP_CONTENT_TOO_LARGE, "the request body is over --max_request_bytes=%zu",
                       h->opt->max_request_bytes);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  (void)version;
  serve_http *h = cls;
  http_req *r = *con_cls;
  if (!r) {
    if (!(r = calloc(1, sizeof *r))) return MHD_NO;
    r->t0 = now_seconds();
    *con_cls = r;
    /* A body announced over the limit is refused now, from its headers, before a byte of it
     * is read; libmicrohttpd then closes the connection (a client sending
     * "Expect: 100-continue", as curl does for large bodies, never sends it at all). */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > h->opt->max_request_bytes) {
      serve_conns_request_arrived(h->conns, c);   /* all of it that will be read */
      return refuse_too_big(c, h, r, url);
    }
    /* From its headers on, a POST may become a job: a batch waiting to fill waits for it. */
    if (!strcmp(method, "POST")) {
      serve_prepare_begin(h->server);
      r->preparing = true;
    }
    return MHD_YES;
  }
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    /* A chunked body (no Content-Length) is cut off where it passes the limit: the
     * connection is closed without reading further (its request ends as a 413 in the
     * metrics, though no answer can be sent in the middle of a body). */
    if (r->len + n > h->opt->max_request_bytes) {
      end_preparing(h, r);
      serve_metrics_request(h->server, MHD_HTTP_CONTENT_TOO_LARGE, now_seconds() - r->t0);
      return MHD_NO;
    }
    if (r->len + n + 1 > r->cap) {
      size_t cap = (r->len + n + 1) * 2;
      if (cap > h->opt->max_request_bytes + 1) cap = h->opt->max_request_bytes + 1;
      char *grown = realloc(r->body, cap);
      if (!grown) return MHD_NO;
      r->body = grown, r->cap = cap;
    }
    memcpy(r->body + r->len, upload_data, n);
    r->len += n;
    r->body[r->len] = 0;
    return MHD_YES;
  }
  serve_conns_request_arrived(h->conns, c);
  return route(c, h, r, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)toe;
  serve_http *h = cls;
  http_req *r = *con_cls;
  if (r) {
    end_preparing(h, r); /* a connection that broke off mid-body */
    free(r->body);
    free(r);
    *con_cls = NULL;
  }
  serve_conns_request_answered(h->conns, c);
  pthread_mutex_lock(&h->lock);
  h->in_flight--;
  pthread_cond_broadcast(&h->idle_cv);
  pthread_mutex_unlock(&h->lock);
}

/* Counts requests from their first byte, so a stop can wait for them. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)uri, (void)c;
  serve_http *h = cls;
  pthread_mutex_lock(&h->lock);
  h->in_flight++;
  pthread_mutex_unlock(&h->lock);
  return NULL;
}

est_status serve_http_start(serve_http *h, serve_server *server, const char *address, int port) {
  memset(h, 0, sizeof *h);
  h->server = server;
  h->opt = &server->opt;
  pthread_mutex_init(&h->lock, NULL);
  pthread_cond_init(&h->idle_cv, NULL);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, address, &addr.sin_addr) != 1)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--rest_api_address=%s: not an IPv4 address", address);
  est_status st = serve_conns_start(&h->conns, h->opt->timeout_seconds);
  if (st == EST_OK) st = serve_tei_start(h);
  if (st != EST_OK) return st;
  /* libmicrohttpd's own timeout counts silence only (whole seconds); the arrival deadline
   * (serve_limits.c) bounds the whole arrival. Both come from --rest_api_timeout_in_ms. */
  unsigned idle = (unsigned)(h->opt->timeout_seconds + 0.999);
  h->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                                   MHD_USE_ERROR_LOG,
                               (uint16_t)port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, &addr,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)h->opt->max_connections,
                               MHD_OPTION_CONNECTION_TIMEOUT, idle > 0 ? idle : 1u, MHD_OPTION_NOTIFY_COMPLETED,
                               on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, serve_conns_notify, h->conns,
                               MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_END);
  if (!h->daemon) return est_error(EST_ERR_IO, "cannot listen on %s:%d", address, port);
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
  h->port = info ? (int)info->port : port;
  return EST_OK;
}

void serve_http_quiesce(serve_http *h) {
  MHD_socket fd = MHD_quiesce_daemon(h->daemon);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

void serve_http_wait_idle(serve_http *h, double max_seconds) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  t.tv_sec += (time_t)max_seconds;
  pthread_mutex_lock(&h->lock);
  while (h->in_flight > 0)
    if (pthread_cond_timedwait(&h->idle_cv, &h->lock, &t) != 0) break;
  pthread_mutex_unlock(&h->lock);
}

void serve_http_stop(serve_http *h) {
  if (h->daemon) MHD_stop_daemon(h->daemon);
  h->daemon = NULL;
  serve_conns_stop(h->conns);
  h->conns = NULL;
  serve_tei_stop(h);
}
