/* A model whose evaluation loss at each global step is a known number (SCRIPT), for the
 * tests of early stopping and exporters: one variable, a constant training loss with zero
 * gradients, and an evaluation loss of SCRIPT[global step of the checkpoint]. kill_at (the
 * int64_t params point to): SIGKILL in the middle of that training step (-1: never).
 * Header-only; include after cmocka.h, with estimator_test_model.h. */
#ifndef EST_TESTS_SCRIPTED_EVAL_MODEL_H
#define EST_TESTS_SCRIPTED_EVAL_MODEL_H

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "est/est.h"

enum { MAX_STEPS = 20 };
static const float SCRIPT[MAX_STEPS + 1] = {9, 5.0f, 4.0f, 4.5f, 3.0f, 3.5f, 3.2f, 3.1f, 2.0f, 1.0f, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

typedef struct scripted {
  int w;
  int64_t kill_at;
} scripted;

static est_status sc_build(const est_model_context *ctx, est_var_store *vs, void **out) {
  scripted *m = calloc(1, sizeof *m);
  m->kill_at = *(const int64_t *)ctx->params;
  *out = m;
  return est_vars_declare(vs, "w", 1, (int64_t[]){1}, est_init_zeros(), &m->w);
}

static est_status sc_call(void *model, est_var_store *vs, const est_features *f, est_mode mode, int64_t gs,
                          est_estimator_spec *spec) {
  (void)vs, (void)f;
  const scripted *m = model;
  if (mode == EST_MODE_TRAIN && gs == m->kill_at) raise(SIGKILL);
  spec->loss = mode == EST_MODE_EVAL ? SCRIPT[gs <= MAX_STEPS ? gs : MAX_STEPS] : 1.0f;
  return EST_OK;
}

static est_status sc_optimizer(void *model, est_var_store *vs, est_optimizer **out) {
  (void)model;
  est_adam_weight_decay_config c = bert_awd_config();
  c.init_lr = 0.01;
  c.schedule = est_lr_schedule_bert(MAX_STEPS, 0);
  return est_optimizer_create_adam_weight_decay(out, vs, &c);
}

/* The estimator on the scripted model in `dir`, checkpoints only when asked for; *kill_at
 * must outlive it. */
static est_status scripted_estimator_create(est_estimator **e, const char *dir, int64_t *kill_at) {
  est_model_fn fn = {.name = "scripted", .params = kill_at, .build = sc_build, .create_optimizer = sc_optimizer,
                     .call = sc_call, .destroy = free};
  est_run_config rc = est_run_config_default();
  rc.model_dir = dir, rc.seed = 3, rc.train_batch_size = 4, rc.eval_batch_size = 40;
  rc.save_checkpoints_steps = 1000, rc.log_step_count_steps = 1000, rc.save_summary_steps = 0;
  *e = NULL;
  return est_estimator_create(e, &fn, &rc);
}

/* Runs this test program again as "<name> --killed-child <dir>" (a fresh process: OpenMP's
 * threads do not survive a fork) and checks that it died of SIGKILL (kill_at). */
static void run_killed_child(const char *name, const char *dir) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", name, "--killed-child", dir, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

#endif
