/* `est serve` in three parts that meet here:
 *   serve_core.c  the served model (versions, polling, hot swap with reference counts), the
 *                 bounded job queue and the one batching thread that runs every forward
 *                 pass, and the Prometheus counters;
 *   serve_http.c  TF Serving's REST API on libmicrohttpd: routes, bodies, JSON answers;
 *   serve_limits.c the arrival deadline that cuts off slow or idle connections;
 *   cmd_serve.c   flags, start-up, SIGTERM/SIGINT and the graceful stop.
 * Threads: libmicrohttpd runs one thread per connection; each parses and tokenizes its own
 * request, enqueues one job and waits on it; the batcher is the only thread that touches a
 * servable's model (est_servable_predict is not thread-safe), so no forward runs twice at
 * once and no request can see another's rows. */
#ifndef EST_TOOLS_SERVE_INTERNAL_H
#define EST_TOOLS_SERVE_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "est/serving.h"

typedef struct serve_options {
  const char *model_base_path, *model_name;
  bool enable_batching;
  int max_batch_size;              /* examples per forward pass */
  int64_t batch_timeout_micros;    /* how long a batch waits to fill */
  int max_enqueued_batches;        /* queue bound = this x max_batch_size examples */
  double poll_wait_seconds;        /* 0: no polling */
  size_t max_request_bytes;
  int max_connections;             /* beyond it libmicrohttpd refuses new connections */
  double timeout_seconds;          /* --rest_api_timeout_in_ms: a request's arrival deadline */
  const char *precision;           /* --precision; NULL: each version's est_model.json */
  /* text-embeddings-inference's discipline (serve_tei.c): */
  int64_t max_batch_tokens;        /* real tokens per forward pass (the first job always runs) */
  int max_client_batch_size;       /* inputs per TEI request; beyond it 413 */
  int max_concurrent_requests;     /* TEI requests answered at once; beyond it 429 */
  bool auto_truncate;              /* TEI's --auto-truncate: "truncate" defaults to true */
} serve_options;

/* One loaded version, shared by the requests that use it. */
typedef struct served_model {
  est_servable *servable;
  int64_t version;
  int refs;                        /* guarded by the server's lock */
  /* TEI's /tokenize and /decode (serve_tei_tokenize.c): the export's tokenizer with its
   * tokenizers pipeline, made on first use and shared under tokenizer_lock */
  pthread_mutex_t tokenizer_lock;
  est_tokenizer *tokenizer;
} served_model;

/* A request's work: n rows of max_seq_length, answered with n x C floats (the head's outputs). */
typedef struct serve_job {
  served_model *model;
  int n;
  int32_t *ids, *mask, *segs;      /* [n, S] */
  int longest;                     /* real tokens of the longest row */
  int64_t tokens;                  /* real tokens of all its rows (--max_batch_tokens) */
  float *probs;                    /* [n, C] out */
  float *token_out;                /* NULL, or [n, S x hidden_size] out: the encoder's output per token */
  est_status status;
  char error[512];
  bool done;
  struct serve_job *next;
} serve_job;

typedef struct serve_metrics serve_metrics;

typedef struct serve_server {
  serve_options opt;
  pthread_mutex_t lock;
  pthread_cond_t work_cv, done_cv, poll_cv;
  served_model *current;           /* the served version (holds one ref) */
  int64_t failed_version;          /* newest version that failed to load (not retried) */
  serve_job *head, *tail;
  size_t queued;                   /* examples waiting */
  int preparing;                   /* POSTs begun (headers in) and not yet queued or answered */
  bool draining;                   /* batches stop waiting to fill */
  bool stopping;
  pthread_t batcher, poller;
  serve_metrics *metrics;
  int32_t *batch_ids, *batch_mask, *batch_segs;  /* the batcher's gathered rows */
  float *batch_probs;
  size_t batch_cap, batch_probs_cap;   /* elements */
  serve_job **batch_jobs;          /* [max_batch_size] */
} serve_server;

est_status serve_server_start(serve_server *s, const serve_options *opt);
/* From now on batches run as soon as they have a job (for a graceful stop). */
void serve_server_drain(serve_server *s);
/* Stops the poller, answers every queued job, joins the threads, frees the models. */
void serve_server_stop(serve_server *s);

/* The served model with a reference taken (NULL when none); release when done. */
served_model *serve_acquire(serve_server *s);
void serve_release(serve_server *s, served_model *m);

/* A POST announces itself when its headers are in (serve_prepare_begin), so that the batcher
 * waits to fill a batch only while some request is still on its way; it then either queues
 * its job (serve_run_job, which ends the announcement) or ends it (serve_prepare_abandon). */
void serve_prepare_begin(serve_server *s);
void serve_prepare_abandon(serve_server *s);
/* Queues the job and waits for its answer. EST_ERR_ABORTED: the queue is full (503). */
est_status serve_run_job(serve_server *s, serve_job *job);

/* ---- metrics (serve_core.c) ---- */
void serve_metrics_request(serve_server *s, int http_status, double seconds);
/* Examples and real tokens waiting in the queue now. */
void serve_queue_size(serve_server *s, size_t *examples, int64_t *tokens);
/* The batches run so far: how many, and histograms of their examples and tokens appended to
 * f as TEI's te_batch_next_size / te_batch_next_tokens. */
void serve_metrics_batches_tei(serve_server *s, FILE *f);
/* Prometheus text exposition; free() it. */
char *serve_metrics_text(serve_server *s);

/* ---- the arrival deadline (serve_limits.c) ---- */
typedef struct serve_conns serve_conns;

/* Starts the reaper that cuts (408, shutdown) connections still arriving past the deadline. */
est_status serve_conns_start(serve_conns **out, double deadline_seconds);
/* After the daemon has stopped. */
void serve_conns_stop(serve_conns *k);
/* The daemon's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the serve_conns). A connection
 * is arriving from its opening on. */
void serve_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* The request has arrived whole: no deadline while it is answered. */
void serve_conns_request_arrived(serve_conns *k, struct MHD_Connection *c);
/* Its answer has been sent: the next request's arrival (or the idle time) starts now. */
void serve_conns_request_answered(serve_conns *k, struct MHD_Connection *c);
uint64_t serve_conns_timed_out(serve_conns *k);   /* connections cut so far */
int serve_conns_open(serve_conns *k);             /* connections open now */

/* ---- the HTTP front (serve_http.c) ---- */
typedef struct serve_http {
  serve_server *server;
  const serve_options *opt;
  serve_conns *conns;
  struct MHD_Daemon *daemon;
  int port;                        /* the bound port (the kernel's pick for 0) */
  pthread_mutex_t lock;
  pthread_cond_t idle_cv;
  int in_flight;                   /* requests begun and not yet completed */
  int tei_active;                  /* TEI inference requests being answered (under lock) */
  struct serve_tei_metrics *tei;   /* serve_tei.c's counters */
} serve_http;

/* Listens on address:port (IPv4; port 0: any free port), one thread per connection, at most
 * opt.max_connections of them, each cut when a request takes over opt.timeout_seconds to
 * arrive (serve_limits.c). */
est_status serve_http_start(serve_http *h, serve_server *server, const char *address, int port);
/* Stops accepting connections; requests already begun go on. */
void serve_http_quiesce(serve_http *h);

/* ---- the embedding APIs (serve_embed.c) ---- */

/* Answers POST /embed (TEI) or POST /v1/embeddings (OpenAI) with the served model: the
 * JSON body to send (free() it; NULL: no memory) and its HTTP status. *queued: the request
 * became a job (serve_run_job ended its serve_prepare_begin announcement). */
char *serve_embed_answer(serve_http *h, est_embed_api api, const char *body, size_t size, bool *queued,
                         unsigned *status);
/* ---- text-embeddings-inference's other routes (serve_tei*.c, docs/serving.md §6) ---- */

/* TEI's routes, in serve_tei.c's table order. */
typedef enum serve_tei_route {
  TEI_HEALTH, TEI_INFO, TEI_METRICS, TEI_TOKENIZE, TEI_DECODE, TEI_EMBED, TEI_EMBED_ALL, TEI_EMBED_SPARSE,
  TEI_SIMILARITY, TEI_PREDICT, TEI_RERANK, TEI_OPENAI, TEI_NROUTES
} serve_tei_route;

/* The route of a URL, or -1 (then it is TF Serving's or a 404). */
int serve_tei_route_of(const char *url);
/* Whether the route takes GET (else POST). */
bool serve_tei_route_get(serve_tei_route route);
/* Answers a TEI route: the body to send (free() it; NULL: no memory), its status and its
 * Content-Type. *queued: the request became a job (serve_run_job took the announcement). */
char *serve_tei_answer(serve_http *h, serve_tei_route route, const char *body, size_t size, bool *queued,
                       unsigned *status, const char **content_type);
/* Counts a TEI request's answer for /metrics. */
void serve_tei_count(serve_http *h, serve_tei_route route, unsigned status, double seconds);
est_status serve_tei_start(serve_http *h);
void serve_tei_stop(serve_http *h);

/* TEI's error body {"error", "error_type"}; the type follows the status as TEI maps them
 * (400 Empty, 413 Validation, 422 Tokenizer, 424 Backend, 429 Overloaded, 503 Unhealthy). */
char *serve_tei_error(unsigned status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A TEI inference request's permit (--max_concurrent_requests): false when none is free
 * (429); release it after answering. */
bool serve_tei_acquire(serve_http *h);
void serve_tei_release(serve_http *h);

/* The texts (and second texts of pairs, NULL each when single) of a TEI request, as one job
 * of the shared queue: featurized into rows (a text over max_seq_length refused with 413,
 * unless `truncate`), run by the batcher; per_token: the job's token_out too. On failure
 * *status and the message say why. */
est_status serve_tei_run(serve_http *h, served_model *m, const char *const *a, const char *const *b, size_t n,
                         bool truncate, bool per_token, const char *field, serve_job *job, bool *queued,
                         unsigned *status);
void serve_tei_job_free(serve_job *job);

/* The routes' answers (serve_tei_tokenize.c, serve_tei_predict.c, serve_tei_embed.c): each
 * gets the served model and the parsed JSON body. */
char *serve_tei_tokenize(serve_http *h, served_model *m, const struct json_t *root, unsigned *status);
char *serve_tei_decode(serve_http *h, served_model *m, const struct json_t *root, unsigned *status);
char *serve_tei_predict(serve_http *h, served_model *m, const struct json_t *root, bool *queued, unsigned *status);
char *serve_tei_rerank(serve_http *h, served_model *m, const struct json_t *root, bool *queued, unsigned *status);
char *serve_tei_similarity(serve_http *h, served_model *m, const struct json_t *root, bool *queued,
                           unsigned *status);
char *serve_tei_embed_all(serve_http *h, served_model *m, const struct json_t *root, bool *queued, unsigned *status);

/* Waits until no request is in flight, at most max_seconds. */
void serve_http_wait_idle(serve_http *h, double max_seconds);
void serve_http_stop(serve_http *h);

#endif
