/* est/status.h — how every est function reports failure.
 *
 * Library functions return an est_status. On failure they also leave a message in a
 * thread-local buffer that names what was at fault (file, byte offset, record, flag):
 *
 *     est_status st = est_tfrecord_reader_open(&r, "train.tf_record", EST_COMPRESSION_NONE);
 *     if (st != EST_OK) fprintf(stderr, "error: %s\n", est_error_message());
 *
 * The codes mirror TensorFlow's where a TF user would expect them (OUT_OF_RANGE is a
 * clean end of data, DATA_LOSS a truncated or corrupted file). The library never exits.
 */
#ifndef EST_STATUS_H
#define EST_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum est_status {
  EST_OK = 0,
  EST_ERR_INVALID_ARGUMENT,    /* bad value from the caller, a flag or a file's contents */
  EST_ERR_NOT_FOUND,           /* a file, key, tensor or feature that does not exist */
  EST_ERR_OUT_OF_RANGE,        /* clean end of data (TF's OutOfRange / "eof") */
  EST_ERR_DATA_LOSS,           /* truncated or corrupted data: bad CRC, cut record */
  EST_ERR_IO,                  /* the operating system refused (open, read, write, rename) */
  EST_ERR_NO_MEMORY,
  EST_ERR_FAILED_PRECONDITION, /* e.g. restoring into a model of another shape */
  EST_ERR_UNIMPLEMENTED,
  EST_ERR_ABORTED,             /* stopped on purpose: NaN loss, a peer rank died */
  EST_ERR_INTERNAL,
  EST_ERR_CANCELLED,           /* stopped on request (SIGTERM): state saved, rerun resumes */
} est_status;

/* Records `code` with a printf-style message for this thread and returns `code`,
 * so a failure site reads `return est_error(EST_ERR_IO, "open %s: %s", p, strerror(errno));`. */
est_status est_error(est_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends context ("reading model.ckpt-10.index: ") to the current message and
 * returns the current code. Use while an error travels up through layers. */
est_status est_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last message recorded on this thread ("" when none). Valid until the next error. */
const char *est_error_message(void);

/* The last code recorded on this thread (EST_OK after est_error_clear). */
est_status est_error_code(void);

void est_error_clear(void);

/* "OK", "INVALID_ARGUMENT", "DATA_LOSS", ... as TensorFlow spells them. */
const char *est_status_name(est_status code);

#ifdef __cplusplus
}
#endif
#endif
