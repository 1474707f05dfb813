/* What every `est` command does with its flags (commands.h): parse, --help, the usage
 * error's shape, and the runtime flags of the commands that run the model. */
#include <stdio.h>

#include "commands.h"
#include "est/log.h"
#include "est/precision.h"
#include "est/serving.h"
#include "est/threads.h"

int est_cli_parse(const char *cmd, const char *usage, est_flag *flags, int nflags, int argc, char **argv, char **pos,
                  int *npos, int max_pos, int usage_on_error) {
  int ignored = 0;
  est_flags_result r = est_flags_parse(flags, nflags, argc - 1, argv + 1, pos, npos ? npos : &ignored, max_pos);
  if (r == EST_FLAGS_HELP) {
    est_flags_print_help(stdout, usage, flags, nflags);
    return 0;
  }
  if (r == EST_FLAGS_OK) return -1;
  if (usage_on_error) fprintf(stderr, "est %s: %s\n\n%s", cmd, est_error_message(), usage);
  else fprintf(stderr, "est %s: %s\n", cmd, est_error_message());
  return 2;
}

int est_cli_apply_runtime_flags(const char *cmd, int flags_ok, const char *precision, int64_t num_threads) {
  /* NULL: the model's own, applied once it is loaded (est_cli_apply_model_precision) */
  est_precision checked; /* its logs now; each model is set from it when it loads */
  if (flags_ok && precision && est_precision_apply_flag(precision, &checked) != EST_OK) flags_ok = 0;
  if (!flags_ok) {
    fprintf(stderr, "est %s: %s\n", cmd, est_error_message());
    return 2;
  }
  if (num_threads > 0) est_set_num_threads((int)num_threads);
  return -1;
}

est_status est_cli_apply_model_precision(const char *flag, est_servable *s) {
  est_precision p = EST_PRECISION_FP32;
  est_status st = EST_OK;
  if (flag) { /* --precision given: checked and logged by est_cli_apply_runtime_flags */
    est_precision_parse(flag, &p);
  } else {
    const est_model_meta *meta = est_servable_meta(s);
    EST_LOG_INFO("precision %s, as %s's est_model.json records (--precision overrides)", meta->precision,
                 meta->task[0] ? meta->task : "the export");
    st = est_precision_apply_flag(meta->precision, &p);
  }
  if (st == EST_OK) est_servable_set_precision(s, p);
  return st == EST_OK ? est_servable_check_precision(s) : st; /* an int8 export runs only int8 */
}
