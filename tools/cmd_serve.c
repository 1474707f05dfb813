/* `est serve`: an exported classifier behind TF Serving's REST API (serve_internal.h).
 * Flags carry tensorflow_model_server's names; the batching ones are its
 * BatchingParameters' fields. SIGTERM / SIGINT: stop accepting, answer what is in flight,
 * exit 0. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "est/flags.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/threads.h"
#include "serve_internal.h"

static const char usage[] =
    "usage: est serve --model_base_path=DIR [--model_name=NAME] [--rest_api_port=8501]\n"
    "                 [--rest_api_address=127.0.0.1] [--enable_batching] [flags...]\n\n"
    "Serves the newest version under DIR (written by `est run_classifier --do_export`) with\n"
    "TensorFlow Serving's REST API, and swaps in newer versions as they appear:\n"
    "  GET  /v1/models/NAME[/versions/V][/metadata]\n"
    "  POST /v1/models/NAME[/versions/V]:predict   {\"instances\": [\"text\", {\"text_a\": .., \"text_b\": ..},\n"
    "                                               {\"input_ids\": [..], \"input_mask\": [..], \"segment_ids\": [..]}]}\n"
    "  POST /v1/models/NAME[/versions/V]:classify  {\"examples\": [{\"text_a\": ..}]}\n"
    "  (an export of `est run_squad --do_export` answers questions instead:\n"
    "   :predict {\"instances\": [{\"question\": .., \"context\": ..}]} -> {\"answer\", \"start\", \"end\", \"score\"})\n"
    "  GET  /monitoring/prometheus/metrics\n"
    "An embedding export (est embed --export_dir) also answers TEI's and OpenAI's embedding APIs:\n"
    "  POST /embed           {\"inputs\": \"text\" | [\"text\", ...], \"normalize\": true, \"truncate\": false}\n"
    "  POST /v1/embeddings   {\"input\": \"text\" | [\"text\", ...], \"model\": \"name\"}\n"
    "HuggingFace text-embeddings-inference's other routes (docs/serving.md section 5), by the model:\n"
    "  GET /health, /info, /metrics; POST /tokenize, /decode; POST /similarity (embeddings);\n"
    "  POST /predict, /rerank (a classifier; one label: a cross-encoder)\n"
    "Prints 'listening on ADDRESS:PORT' once ready (with --rest_api_port=0, the port the kernel chose).\n"
    "Limits: --max_connections (512), --rest_api_timeout_in_ms (30000) for a request to arrive,\n"
    "--max_request_bytes (16 MiB; 413 from the headers), JSON nested at most 64 deep and lists of at\n"
    "most max(queue, max_seq_length) entries (400 before parsing), the queue (503).";

int est_cmd_serve(int argc, char **argv) {
  const char *base = NULL, *name = "default", *address = "127.0.0.1", *precision = NULL; /* NULL: the export's */
  int64_t port = 8501, max_batch = 32, timeout_us = 1000, max_enqueued = 64, max_bytes = 16 << 20;
  int64_t num_threads = 0, max_connections = 512, rest_threads = 0, timeout_ms = 30000;
  int64_t max_batch_tokens = 16384, max_client_batch = 32, max_concurrent = 512;
  double poll = 1;
  bool batching = false, auto_truncate = false;
  est_flag flags[] = {
    EST_FLAG_STRING("model_base_path", &base, "Export base directory (holds <version>/ directories).", 1),
    EST_FLAG_STRING("model_name", &name, "Name of the model in the URLs.", 0),
    EST_FLAG_INT("rest_api_port", &port, "Port of the REST API; 0: any free port (printed).", 0),
    EST_FLAG_STRING("rest_api_address", &address,
                    "IPv4 address to bind. [est] default 127.0.0.1 (TF Serving binds all addresses); "
                    "0.0.0.0 serves every interface.", 0),
    EST_FLAG_INT("rest_api_num_threads", &rest_threads, "Accepted for compatibility; est runs one thread per "
                 "connection.", 0),
    EST_FLAG_BOOL("enable_batching", &batching, "Coalesce concurrent requests into one forward pass.", 0),
    EST_FLAG_INT("max_batch_size", &max_batch, "Examples per forward pass.", 0),
    EST_FLAG_INT("batch_timeout_micros", &timeout_us, "How long a batch waits to fill.", 0),
    EST_FLAG_INT("max_enqueued_batches", &max_enqueued,
                 "Queue bound, in batches of max_batch_size examples; beyond it requests get 503.", 0),
    EST_FLAG_FLOAT("file_system_poll_wait_seconds", &poll, "How often to look for a new version; 0: never.", 0),
    EST_FLAG_INT("max_request_bytes", &max_bytes, "[est] Larger request bodies get 413.", 0),
    EST_FLAG_INT("rest_api_timeout_in_ms", &timeout_ms,
                 "A request must arrive whole (headers and body) within this of the connection's opening or of "
                 "its previous answer, else 408 and the connection is closed; also the idle timeout of a kept-alive "
                 "connection. [est] It does not cover the wait for the model (the queue is bounded instead).", 0),
    EST_FLAG_INT("max_connections", &max_connections, "[est] Concurrent connections (one thread each); beyond "
                 "it new connections are refused until one closes.", 0),
    EST_FLAG_INT("max_batch_tokens", &max_batch_tokens, "[TEI] Real tokens per forward pass: a batch stops "
                 "taking requests before their tokens pass it (the oldest request always runs).", 0),
    EST_FLAG_INT("max_client_batch_size", &max_client_batch, "[TEI] Inputs per request of the TEI routes; beyond "
                 "it 413.", 0),
    EST_FLAG_INT("max_concurrent_requests", &max_concurrent, "[TEI] Inference requests of the TEI routes answered "
                 "at once; beyond it 429.", 0),
    EST_FLAG_BOOL("auto_truncate", &auto_truncate, "[TEI] \"truncate\" defaults to true: inputs over "
                  "max_seq_length are cut instead of refused (413).", 0),
    EST_CLI_RUNTIME_FLAGS(&num_threads, &precision),
  };
  int rc = EST_CLI_PARSE_FLAGS("serve", usage, flags, argc, argv, 0);
  if (rc >= 0) return rc;
  est_flags_result r = EST_FLAGS_OK; /* the checks below turn it into an error */
  const struct {
    const char *flag;
    int64_t v, lo, hi;
  } ranges[] = {{"rest_api_port", port, 0, 65535},         {"max_batch_size", max_batch, 1, 65536},
                {"batch_timeout_micros", timeout_us, 0, 60000000}, {"max_enqueued_batches", max_enqueued, 1, 1 << 20},
                {"max_request_bytes", max_bytes, 1, (int64_t)1 << 40}, {"max_connections", max_connections, 1, 65536},
                {"num_threads", num_threads, 0, 4096}, {"rest_api_timeout_in_ms", timeout_ms, 1, 86400000},
                {"max_batch_tokens", max_batch_tokens, 1, (int64_t)1 << 40},
                {"max_client_batch_size", max_client_batch, 1, 1 << 20},
                {"max_concurrent_requests", max_concurrent, 1, 1 << 20}};
  for (size_t i = 0; r == EST_FLAGS_OK && i < sizeof ranges / sizeof ranges[0]; i++)
    if (ranges[i].v < ranges[i].lo || ranges[i].v > ranges[i].hi)
      r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--%s=%lld: must be in [%lld, %lld]", ranges[i].flag,
                                     (long long)ranges[i].v, (long long)ranges[i].lo, (long long)ranges[i].hi);
  if (r == EST_FLAGS_OK && !(poll >= 0 && poll <= 86400))
    r = EST_FLAGS_ERROR, est_error(EST_ERR_INVALID_ARGUMENT, "--file_system_poll_wait_seconds=%g: must be in [0, 86400]", poll);
  /* It appears in URLs and in the metrics' labels: keep it to characters neither escapes. */
  if (r == EST_FLAGS_OK && (!*name || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                                          strlen(name)))
    r = EST_FLAGS_ERROR,
    est_error(EST_ERR_INVALID_ARGUMENT, "--model_name=%s: must be letters, digits, '_', '.' or '-'", name);
  if ((rc = est_cli_apply_runtime_flags("serve", r == EST_FLAGS_OK, precision, num_threads)) >= 0) return rc;

  /* Signals go to sigwait below, not to whichever thread happens to run. */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  serve_options opt = {.model_base_path = base, .model_name = name, .enable_batching = batching,
                       .max_batch_size = (int)max_batch, .batch_timeout_micros = timeout_us,
                       .max_enqueued_batches = (int)max_enqueued, .poll_wait_seconds = poll,
                       .max_request_bytes = (size_t)max_bytes, .max_connections = (int)max_connections,
                       .timeout_seconds = (double)timeout_ms / 1000, .precision = precision,
                       .max_batch_tokens = max_batch_tokens, .max_client_batch_size = (int)max_client_batch,
                       .max_concurrent_requests = (int)max_concurrent, .auto_truncate = auto_truncate};
  static serve_server server;
  static serve_http http;
  est_status st = serve_server_start(&server, &opt);
  if (st == EST_OK) st = serve_http_start(&http, &server, address, (int)port);
  if (st != EST_OK) {
    fprintf(stderr, "est serve: error: %s\n", est_error_message());
    return 1;
  }
  EST_LOG_INFO("batching %s (max_batch_size %d, batch_timeout_micros %lld, queue %lld examples)",
               batching ? "on" : "off", opt.max_batch_size, (long long)timeout_us,
               (long long)max_enqueued * max_batch);
  printf("est serve: listening on %s:%d\n", address, http.port);
  fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  EST_LOG_INFO("%s: no new connections; finishing the requests in flight", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  serve_http_quiesce(&http);
  serve_server_drain(&server);
  serve_http_wait_idle(&http, 30);
  serve_http_stop(&http);
  serve_server_stop(&server);
  EST_LOG_INFO("stopped");
  return 0;
}
