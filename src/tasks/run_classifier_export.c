/* run_classifier --do_export (est/run_classifier.h): the newest checkpoint as an est servable
 * whose est_model.json names the classifier head and the task's labels, or (--export_format=hf)
 * as a HuggingFace BertForSequenceClassification directory (docs/hf.md §6). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "est/file.h"
#include "est/hf_model.h"
#include "est/processors.h"
#include "est/run_classifier.h"
#include "est/serving.h"
#include "tasks/run_classifier_internal.h"

est_status est_export_classifier(const est_run_classifier_config *c, const char *export_dir, char *version_dir,
                                 size_t size) {
  if (!c->task_name || !*c->task_name)
    return est_error(EST_ERR_INVALID_ARGUMENT, "--do_export: flag --task_name must be specified");
  est_model_meta meta = {0};
  meta.do_lower_case = c->do_lower_case;
  /* The labels in output order, exactly as run_classifier's processor lists them. */
  est_tsv_task_config tc = est_tsv_task_config_default();
  tc.text_a_column = (int)c->tsv_text_a_column;
  tc.text_b_column = (int)c->tsv_text_b_column;
  tc.label_column = (int)c->tsv_label_column;
  tc.skip_header = c->tsv_skip_header;
  tc.labels = c->tsv_labels;
  tc.multi_label = est_rc_multi_label(c);
  est_processor *proc = NULL;
  est_status st = est_processor_create(&proc, c->task_name, &tc);
  if (st != EST_OK) return est_error_prefix("--task_name: ");
  const char *const *labels;
  size_t nlabels;
  st = est_processor_get_labels(proc, c->data_dir, &labels, &nlabels);
  if (st == EST_OK) {
    snprintf(meta.task, sizeof meta.task, "%s", est_processor_name(proc));
    const est_model_classifier config = {.problem_type = est_rc_multi_label(c) ? EST_PROBLEM_MULTI_LABEL
                                                                               : EST_PROBLEM_SINGLE_LABEL};
    est_model_meta_set_head(&meta, &est_served_classifier, &config);
    meta.labels = calloc(nlabels, sizeof *meta.labels);
    if (!meta.labels) st = est_error(EST_ERR_NO_MEMORY, "export labels");
    for (size_t i = 0; st == EST_OK && i < nlabels; i++, meta.num_labels++)
      if (!(meta.labels[i] = strdup(labels[i]))) st = est_error(EST_ERR_NO_MEMORY, "export labels");
  }
  est_processor_free(proc);

  if (st == EST_OK && c->common.export_format && !strcmp(c->common.export_format, "hf")) {
    /* a HuggingFace BertForSequenceClassification directory (docs/hf.md §6) */
    char ckpt[4096], base[4096];
    st = est_export_prepare(&c->common, c->vocab_file, &meta, ckpt, sizeof ckpt);
    if (st == EST_OK) {
      if (export_dir && *export_dir) snprintf(base, sizeof base, "%s", export_dir);
      else st = est_path_join(base, sizeof base, c->common.output_dir, "hf");
    }
    est_hf_export_params hp = {.cfg = &meta.bert_config, .vocab_file = c->vocab_file,
                               .do_lower_case = c->do_lower_case, .labels = (const char *const *)meta.labels,
                               .num_labels = meta.num_labels,
                               .problem_type = est_rc_multi_label(c) ? "multi_label_classification" : NULL};
    if (st == EST_OK) st = est_hf_export(ckpt, base, &hp);
    if (st == EST_OK && version_dir) snprintf(version_dir, size, "%s", base);
    est_model_meta_clear(&meta);
    return st;
  }
  est_task_flags f = c->common;
  f.export_dir = export_dir;
  if (st == EST_OK) st = est_export_task(&f, c->vocab_file, &meta, version_dir, size);
  est_model_meta_clear(&meta);
  return st;
}
