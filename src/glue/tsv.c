/* _read_tsv: csv.reader(f, delimiter="\t", quotechar=None) over TF GFile lines.
 *
 * GFile yields lines split at '\n'; the csv module then ends the record at the first '\r'
 * or '\n' and raises "new-line character seen in unquoted field" if anything but more
 * line-end characters follows. With quoting off, '"' is an ordinary character and fields are
 * just the text between tabs. Python csv also caps a field at 131072 characters. */
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/processors.h"
#include "text/unicode.h"

#define CSV_FIELD_LIMIT 131072

void est_tsv_free(est_tsv *t) {
  free(t->data);
  free(t->rows);
  free(t->ncols);
  free(t->fields);
  memset(t, 0, sizeof *t);
}

/* Checks one line (without its '\n'): strict UTF-8 (GFile decodes strictly), no NUL, no
 * '\r' except at the end. Returns the line length without trailing '\r's, or SIZE_MAX with
 * the error recorded. */
static size_t check_line(const char *path, size_t lineno, const char *s, size_t n) {
  size_t end = n;
  while (end > 0 && s[end - 1] == '\r') end--;
  for (size_t i = 0; i < end;) {
    uint8_t b = (uint8_t)s[i];
    if (b == 0) {
      est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: NUL byte at column %zu", path, lineno, i + 1);
      return SIZE_MAX;
    }
    if (b == '\r') {
      est_error(EST_ERR_INVALID_ARGUMENT,
                "%s:%zu: carriage return inside the line at byte %zu (Python's csv module refuses "
                "it: \"new-line character seen in unquoted field\")", path, lineno, i + 1);
      return SIZE_MAX;
    }
    if (b < 0x80) {
      i++;
      continue;
    }
    size_t adv;
    if (tok_utf8_next((const uint8_t *)s + i, end - i, &adv) == UINT32_MAX) {
      est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: invalid UTF-8 at byte %zu of the line", path, lineno,
                i + 1);
      return SIZE_MAX;
    }
    i += adv;
  }
  return end;
}

/* Code points in s[0..n) (valid UTF-8): bytes that are not continuation bytes. */
static size_t count_chars(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((uint8_t)s[i] & 0xC0) != 0x80;
  return c;
}

est_status est_tsv_read(est_tsv *out, const char *path) {
  memset(out, 0, sizeof *out);
  uint8_t *raw;
  size_t size;
  est_status st = est_read_file(path, &raw, &size);
  if (st != EST_OK) return st;
  char *data = (char *)raw;             /* NUL-terminated by est_read_file */
  const char *utf16 = tok_utf16_bom(raw, size);
  if (utf16) {
    free(raw);
    return est_error(EST_ERR_INVALID_ARGUMENT, "%s:1: the file is %s (it starts with a byte-order mark); TSV files "
                     "are read as UTF-8: convert it, e.g. iconv -f UTF-16 -t UTF-8", path, utf16);
  }
  size_t nlines = 0, ntabs = 0;
  for (size_t i = 0; i < size; i++) {
    nlines += data[i] == '\n';
    ntabs += data[i] == '\t';
  }
  if (size > 0 && data[size - 1] != '\n') nlines++;
  out->data = data;
  out->rows = malloc((nlines + 1) * sizeof *out->rows);
  out->ncols = malloc((nlines + 1) * sizeof *out->ncols);
  out->fields = malloc((nlines + ntabs + 1) * sizeof *out->fields);
  if (!out->rows || !out->ncols || !out->fields) {
    est_tsv_free(out);
    return est_error(EST_ERR_NO_MEMORY, "reading %s", path);
  }
  size_t pos = 0, nf = 0;
  for (size_t line = 0; line < nlines; line++) {
    char *s = data + pos;
    char *nl = memchr(s, '\n', size - pos);
    size_t n = nl ? (size_t)(nl - s) : size - pos;
    pos += n + 1;
    size_t len = check_line(path, line + 1, s, n);
    if (len == SIZE_MAX) {
      est_tsv_free(out);
      return est_error_code();
    }
    s[len] = 0;                         /* overwrites '\r' or '\n' (or the final NUL) */
    out->rows[line] = out->fields + nf;
    out->ncols[line] = 0;
    if (len == 0) continue;             /* csv yields [] for an empty line */
    char *f = s;
    for (;;) {
      char *tab = memchr(f, '\t', (size_t)(s + len - f));
      size_t flen = tab ? (size_t)(tab - f) : (size_t)(s + len - f);
      if (flen > CSV_FIELD_LIMIT && count_chars(f, flen) > CSV_FIELD_LIMIT) {
        size_t field = out->ncols[line] + 1;
        est_tsv_free(out);
        return est_error(EST_ERR_INVALID_ARGUMENT, "%s:%zu: field %zu larger than field limit (%d)", path,
                         line + 1, field, CSV_FIELD_LIMIT);
      }
      out->fields[nf++] = f;
      out->ncols[line]++;
      if (!tab) break;
      *tab = 0;
      f = tab + 1;
    }
  }
  out->nrows = nlines;
  return EST_OK;
}
