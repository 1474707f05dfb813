/* Internal: what the request parsers (request.c, embed_request.c) share. */
#ifndef EST_SERVE_REQUEST_INTERNAL_H
#define EST_SERVE_REQUEST_INTERNAL_H

#include <jansson.h>

#include "est/serving.h"

/* Before jansson builds a tree: refuses a body nested deeper than EST_REQUEST_MAX_DEPTH or
 * holding a list or object longer than the limits allow (est_request_parse's rule), with
 * the byte offset. */
est_status est_request_prescan(const char *body, size_t size, const est_request_limits *limits);
/* The pre-scan, then the body parsed into *root (NULL when it is not JSON), which must be an
 * object; errors name the byte, or the line and column. *root is the caller's to free. */
est_status est_request_load(json_t **root, const char *body, size_t size, const est_request_limits *limits);

#endif
