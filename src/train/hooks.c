/* What a hook may ask of the train call it runs in (est/estimator.h, "hooks"). */
#include "train/train_loop.h"

void est_hook_request_stop(est_hook_run *run) { run->stop_requested = 1; }
est_estimator *est_hook_estimator(const est_hook_run *run) { return run->e; }
int64_t est_hook_global_step(const est_hook_run *run) { return run->s.global_step; }
const char *est_hook_last_checkpoint(const est_hook_run *run) { return run->last_saved; }
int est_hook_rank(const est_hook_run *run) { return est_rank(run->e); }
