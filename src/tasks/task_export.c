/* What every task's --do_export shares (est/bert_task.h): the flags an export needs, the
 * checkpoint to export, and the servable written through est/serving.h. Tasks stand above
 * serve: a task fills est_model.json's head fields and hands the rest to est_export_write. */
#include <stdio.h>
#include <string.h>

#include "est/bert_task.h"
#include "est/ckpt.h"
#include "est/file.h"
#include "est/serving.h"

est_status est_export_prepare(const est_task_flags *f, const char *vocab_file, est_model_meta *meta, char *ckpt,
                              size_t ckpt_size) {
  const struct {
    const char *name, *value;
  } required[] = {{"vocab_file", vocab_file}, {"bert_config_file", f->bert_config_file},
                  {"output_dir", f->output_dir}};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].value || !*required[i].value)
      return est_error(EST_ERR_INVALID_ARGUMENT, "--do_export: flag --%s must be specified", required[i].name);
  est_status st = EST_OK;
  if (f->export_checkpoint) snprintf(ckpt, ckpt_size, "%s", f->export_checkpoint);
  else st = est_ckpt_latest(f->output_dir, ckpt, ckpt_size);
  if (st != EST_OK) return est_error_prefix("--do_export: no checkpoint in --output_dir=%s: ", f->output_dir);
  st = est_bert_config_from_json_file(&meta->bert_config, f->bert_config_file);
  if (st != EST_OK) return est_error_prefix("--bert_config_file: ");
  if (f->max_seq_length < 3 || f->max_seq_length > meta->bert_config.max_position_embeddings)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--max_seq_length=%lld: must be in [3, max_position_embeddings %d]",
                     (long long)f->max_seq_length, meta->bert_config.max_position_embeddings);
  meta->max_seq_length = (int)f->max_seq_length;
  snprintf(meta->precision, sizeof meta->precision, "%s", f->precision ? f->precision : "fp32");
  return EST_OK;
}

est_status est_export_task(const est_task_flags *f, const char *vocab_file, est_model_meta *meta, char *version_dir,
                           size_t size) {
  char ckpt[4096], base[4096];
  est_status st = est_export_prepare(f, vocab_file, meta, ckpt, sizeof ckpt);
  if (st != EST_OK) return st;
  if (f->export_dir && *f->export_dir) snprintf(base, sizeof base, "%s", f->export_dir);
  else if ((st = est_path_join(base, sizeof base, f->output_dir, "export")) != EST_OK) return st;
  return est_export_write(base, ckpt, meta, vocab_file, version_dir, size);
}
