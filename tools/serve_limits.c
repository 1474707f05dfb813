/* `est serve`'s arrival deadline (serve_internal.h): a request must arrive whole, headers and
 * body, within --rest_api_timeout_in_ms of its first byte (of the connection's opening, or of
 * the previous answer on a kept-alive connection); past it the connection is answered 408 and
 * shut down.
 *
 * Why: libmicrohttpd runs one thread per connection and its own timeout
 * (MHD_OPTION_CONNECTION_TIMEOUT) only counts silence, so a client trickling one header byte
 * every few seconds (slowloris) would hold a thread and a --max_connections slot for ever.
 * This file keeps one entry per open connection (MHD_OPTION_NOTIFY_CONNECTION) and one reaper
 * thread that, a few times per deadline, shuts down the connections still arriving past
 * theirs. A request that has fully arrived has no deadline here: it waits for the batcher,
 * whose queue is bounded (503 beyond it).
 *
 * The reaper only calls send() and shutdown() on a socket, never close(): libmicrohttpd's
 * connection thread then reads end-of-file and closes it the usual way. An entry leaves the
 * list under the lock in the CLOSED notification, which libmicrohttpd gives before it closes
 * the socket, so the reaper never touches a descriptor that was closed and reused. While a
 * connection is arriving its thread only reads (the previous answer was sent in full before
 * the completion callback), so the reaper's one send() of the 408 does not interleave with
 * libmicrohttpd's writes. */
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve_internal.h"

typedef struct conn_entry {
  int fd;
  bool arriving;                   /* a request is on its way (or the connection is idle) */
  bool cut;                        /* shut down by the reaper */
  double since;                    /* when the current arrival began (CLOCK_MONOTONIC) */
  struct conn_entry *prev, *next;
} conn_entry;

struct serve_conns {
  double deadline;                 /* seconds */
  pthread_mutex_t lock;
  pthread_cond_t cv;
  conn_entry *head;
  int open;                        /* entries in the list */
  uint64_t timed_out;              /* connections cut, in all */
  bool stopping;
  pthread_t reaper;
};

static double mono_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void cut_connection(conn_entry *e, double deadline) {
  char body[160], msg[320];
  int bn = snprintf(body, sizeof body,
                    "{\"error\": \"the request did not arrive within --rest_api_timeout_in_ms=%.0f\"}\n",
                    deadline * 1000);
  int n = snprintf(msg, sizeof msg,
                   "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n%s", bn, body);
  /* Best effort: a full send buffer means the client is not reading anyway. */
  ssize_t w = send(e->fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
  (void)w;
  shutdown(e->fd, SHUT_RDWR);
  e->cut = true;
}

static void *reaper_main(void *arg) {
  serve_conns *k = arg;
  /* Checked four times per deadline (at most every 250 ms): a connection lives at most
   * 1.25 deadlines. */
  double tick = k->deadline / 4 < 0.25 ? k->deadline / 4 : 0.25;
  pthread_mutex_lock(&k->lock);
  while (!k->stopping) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    long long ns = t.tv_nsec + (long long)(tick * 1e9);
    t.tv_sec += (time_t)(ns / 1000000000LL);
    t.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&k->cv, &k->lock, &t);
    double now = mono_seconds();
    for (conn_entry *e = k->head; e && !k->stopping; e = e->next)
      if (e->arriving && !e->cut && now - e->since > k->deadline) {
        cut_connection(e, k->deadline);
        k->timed_out++;
      }
  }
  pthread_mutex_unlock(&k->lock);
  return NULL;
}

est_status serve_conns_start(serve_conns **out, double deadline_seconds) {
  serve_conns *k = calloc(1, sizeof *k);
  if (!k) return est_error(EST_ERR_NO_MEMORY, "connection list");
  k->deadline = deadline_seconds;
  pthread_mutex_init(&k->lock, NULL);
  pthread_cond_init(&k->cv, NULL);
  if (pthread_create(&k->reaper, NULL, reaper_main, k) != 0) {
    free(k);
    return est_error(EST_ERR_INTERNAL, "cannot start the connection reaper thread");
  }
  *out = k;
  return EST_OK;
}

void serve_conns_stop(serve_conns *k) {
  if (!k) return;
  pthread_mutex_lock(&k->lock);
  k->stopping = true;
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->lock);
  pthread_join(k->reaper, NULL);
  /* The daemon is stopped first, so every connection has had its CLOSED notification. */
  for (conn_entry *e = k->head, *next; e; e = next) next = e->next, free(e);
  free(k);
}

void serve_conns_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code) {
  serve_conns *k = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    conn_entry *e = info ? calloc(1, sizeof *e) : NULL;
    *socket_context = e;
    if (!e) return; /* untracked: only libmicrohttpd's own idle timeout applies */
    e->fd = info->connect_fd;
    e->arriving = true;
    e->since = mono_seconds();
    pthread_mutex_lock(&k->lock);
    e->next = k->head;
    if (k->head) k->head->prev = e;
    k->head = e;
    k->open++;
    pthread_mutex_unlock(&k->lock);
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_entry *e = *socket_context;
    if (!e) return;
    pthread_mutex_lock(&k->lock);
    if (e->prev) e->prev->next = e->next;
    else k->head = e->next;
    if (e->next) e->next->prev = e->prev;
    k->open--;
    pthread_mutex_unlock(&k->lock);
    free(e);
    *socket_context = NULL;
  }
}

static void set_arriving(serve_conns *k, struct MHD_Connection *c, bool arriving, bool restart) {
  const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  conn_entry *e = info ? info->socket_context : NULL;
  if (!e) return;
  pthread_mutex_lock(&k->lock);
  e->arriving = arriving;
  if (restart) e->since = mono_seconds();
  pthread_mutex_unlock(&k->lock);
}

void serve_conns_request_arrived(serve_conns *k, struct MHD_Connection *c) { set_arriving(k, c, false, false); }
void serve_conns_request_answered(serve_conns *k, struct MHD_Connection *c) { set_arriving(k, c, true, true); }

uint64_t serve_conns_timed_out(serve_conns *k) {
  pthread_mutex_lock(&k->lock);
  uint64_t n = k->timed_out;
  pthread_mutex_unlock(&k->lock);
  return n;
}

int serve_conns_open(serve_conns *k) {
  pthread_mutex_lock(&k->lock);
  int n = k->open;
  pthread_mutex_unlock(&k->lock);
  return n;
}
