/* Internal: the parts of an export (src/serve/export.c writes one version from them). */
#ifndef EST_SERVE_EXPORT_INTERNAL_H
#define EST_SERVE_EXPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "est/serving.h"

/* export_versions.c: a new version under export_base (created if needed): its number (the
 * current time in seconds, or the next after the newest there) and the hidden directory
 * <base>/.tmp-<version>-<pid> to build it in (removed if left over; not created). */
est_status est_export_version_begin(const char *export_base, char *tmp, size_t size, int64_t *version);
/* Syncs tmp and renames it to <base>/<version> (or the next free number when a concurrent
 * exporter took that one), then syncs the base: the version's path goes to final. */
est_status est_export_version_publish(const char *export_base, const char *tmp, int64_t version, char *final,
                                      size_t size);
/* fsync of a directory, so a rename inside it survives a crash. */
est_status est_export_sync_dir(const char *dir);

/* export_weights.c: the weights the model of meta's shape declares (the encoder and meta's
 * head, as a servable loads them) from the checkpoint ckpt_prefix into the bundle prefix dst
 * (optimizer slots, global_step and est/ tensors stay behind; an int8 export stores the
 * dense layers that run int8 as codes + scales). */
est_status est_export_weights(const char *dst, const char *ckpt_prefix, const est_model_meta *meta);

#endif
