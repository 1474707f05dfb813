/* est/dist.h in one process (every build, with or without MPI): shard arithmetic, the
 * in-order interleave of gathered rows, and the one-rank behaviour of every collective. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "est/dist.h"
#include "est/estimator.h"
#include "test_util.h"

static void test_shard_rows_and_local_batch(void **state) {
  (void)state;
  /* Dataset.shard(3, r) of 10 rows: r0 {0,3,6,9}, r1 {1,4,7}, r2 {2,5,8} */
  assert_int_equal(est_dist_shard_rows(10, 0, 3), 4);
  assert_int_equal(est_dist_shard_rows(10, 1, 3), 3);
  assert_int_equal(est_dist_shard_rows(10, 2, 3), 3);
  assert_int_equal(est_dist_shard_rows(2, 2, 3), 0);
  assert_int_equal(est_dist_shard_rows(0, 0, 1), 0);
  assert_int_equal(est_dist_shard_rows(5, 3, 3), 0); /* not a rank */
  assert_int_equal(est_dist_local_batch(32, 0, 8), 4);
  assert_int_equal(est_dist_local_batch(7, 0, 2), 4);
  assert_int_equal(est_dist_local_batch(7, 1, 2), 3);
  int64_t sum = 0;
  for (int r = 0; r < 5; r++) sum += est_dist_local_batch(13, r, 5);
  assert_int_equal(sum, 13);
  assert_int_equal(est_dist_local_batch(13, 5, 5), 0);
}

static void test_interleave_rows(void **state) {
  (void)state;
  int16_t r0[] = {0, 3, 6, 9}, r1[] = {1, 4, 7}, r2[] = {2, 5, 8};
  const void *blocks[3] = {r0, r1, r2};
  size_t counts[3] = {4, 3, 3};
  int16_t out[10];
  assert_int_equal(est_dist_interleave_rows(blocks, counts, 3, sizeof(int16_t), out), EST_OK);
  for (int i = 0; i < 10; i++) assert_int_equal(out[i], i);
  /* counts no single input could give (rank 1 has more than rank 0) */
  size_t bad[3] = {3, 4, 3};
  assert_int_equal(est_dist_interleave_rows(blocks, bad, 3, sizeof(int16_t), out), EST_ERR_FAILED_PRECONDITION);
  assert_non_null(strstr(est_error_message(), "rank 0 produced 3 rows"));
}

static void test_single_process_collectives(void **state) {
  (void)state;
  int argc = 1;
  char *args[] = {"test", NULL}, **argv = args;
  assert_int_equal(est_dist_init(&argc, &argv), EST_OK);
  assert_int_equal(est_dist_world_size(), 1);
  assert_int_equal(est_dist_rank(), 0);
  assert_true(est_dist_is_chief());
  assert_false(est_dist_active());
  float f[3] = {1, 2, 3};
  assert_int_equal(est_dist_allreduce_f32(f, 3, EST_DIST_MEAN), EST_OK);
  assert_true(f[0] == 1 && f[1] == 2 && f[2] == 3);
  double d[1] = {0.25};
  assert_int_equal(est_dist_allreduce_sum_f64(d, 1), EST_OK);
  assert_true(d[0] == 0.25);
  int64_t send[2] = {4, 5}, recv[2];
  assert_int_equal(est_dist_allgather_i64(send, 2, recv), EST_OK);
  assert_true(recv[0] == 4 && recv[1] == 5);
  assert_int_equal(est_dist_broadcast(f, sizeof f, 1), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dist_barrier(), EST_OK);
  void *rows = NULL;
  size_t total = 0;
  assert_int_equal(est_dist_gather_rows(f, 3, sizeof(float), &rows, &total), EST_OK);
  assert_int_equal(total, 3);
  assert_memory_equal(rows, f, sizeof f);
  free(rows);

  est_distribution hook;
  est_dist_make_distribution(&hook);
  assert_int_equal(hook.world_size, 1);
  assert_int_equal(hook.rank, 0);
  assert_int_equal(hook.allreduce_mean(hook.ctx, f, 3), EST_OK);
  assert_true(f[2] == 3);
  est_dist_finalize();
}

/* One rank: finish() leaves weight * gradient (the sum over one rank). */
static void test_single_process_grad_sync(void **state) {
  (void)state;
  float g[100];
  for (int i = 0; i < 100; i++) g[i] = (float)i;
  est_dist_grad_sync *s;
  est_dist_grad_sync_config cfg = {.bucket_bytes = 40};
  assert_int_equal(est_dist_grad_sync_create(&s, g, 100, &cfg), EST_OK);
  assert_int_equal(est_dist_grad_sync_ready(s, 0, 10), EST_ERR_FAILED_PRECONDITION); /* no begin */
  assert_int_equal(est_dist_grad_sync_begin(s, 0.0), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dist_grad_sync_begin(s, 0.5), EST_OK);
  assert_int_equal(est_dist_grad_sync_begin(s, 0.5), EST_ERR_FAILED_PRECONDITION);
  assert_int_equal(est_dist_grad_sync_ready(s, 90, 11), EST_ERR_INVALID_ARGUMENT);
  assert_int_equal(est_dist_grad_sync_ready(s, 50, 50), EST_OK);
  assert_int_equal(est_dist_grad_sync_finish(s), EST_OK);
  for (int i = 0; i < 100; i++) assert_true(g[i] == 0.5f * (float)i);
  assert_int_equal(est_dist_grad_sync_finish(s), EST_ERR_FAILED_PRECONDITION);
  est_dist_grad_sync_stats st = est_dist_grad_sync_get_stats(s);
  assert_int_equal(st.steps, 1);
  est_dist_grad_sync_free(s);
}

/* One process: the run config is left exactly as it was (no hook, batch sizes global). */
static void test_configure_single_process(void **state) {
  (void)state;
  est_run_config rc = est_run_config_default();
  rc.train_batch_size = 7;
  rc.eval_batch_size = 5;
  est_distribution hook;
  assert_int_equal(est_dist_configure_run_config(&rc, &hook), EST_OK);
  assert_null(rc.distribution);
  assert_int_equal(rc.train_batch_size, 7);
  assert_int_equal(rc.eval_batch_size, 5);
}

/* The Estimator hook has every entry; its gradient entries run a grad_sync over the
 * var store's buffer (one rank: finish leaves weight x gradient); the run config accepts
 * the gradient entries only as a set and grad_reduction only as MEAN or SUM. */
static void test_hook_entries_and_validation(void **state) {
  (void)state;
  est_distribution hook;
  est_dist_make_distribution(&hook);
  assert_non_null(hook.barrier);
  assert_non_null(hook.gather_rows);
  assert_non_null(hook.abort);
  assert_non_null(hook.grads_begin);
  assert_non_null(hook.grads_ready);
  assert_non_null(hook.grads_finish);
  assert_int_equal(hook.barrier(hook.ctx), EST_OK);
  hook.abort(hook.ctx, 3); /* one process: returns */

  est_var_store *vs;
  int a, b;
  assert_int_equal(est_vars_create(&vs), EST_OK);
  assert_int_equal(est_vars_declare(vs, "a", 1, (int64_t[]){5}, est_init_zeros(), &a), EST_OK);
  assert_int_equal(est_vars_declare(vs, "b", 1, (int64_t[]){3}, est_init_zeros(), &b), EST_OK);
  assert_int_equal(est_vars_finalize(vs, 1), EST_OK);
  float *ga = est_vars_grad(vs, (size_t)a), *gb = est_vars_grad(vs, (size_t)b);
  for (int i = 0; i < 5; i++) ga[i] = (float)(i + 1);
  for (int i = 0; i < 3; i++) gb[i] = -2.0f;
  assert_int_equal(hook.grads_begin(hook.ctx, vs, 0.25), EST_OK);
  assert_int_equal(hook.grads_ready(hook.ctx, est_vars_at(vs, (size_t)b)->offset, 3), EST_OK);
  assert_int_equal(hook.grads_finish(hook.ctx), EST_OK);
  for (int i = 0; i < 5; i++) assert_true(ga[i] == 0.25f * (float)(i + 1));
  for (int i = 0; i < 3; i++) assert_true(gb[i] == -0.5f);
  assert_int_equal(est_dist_hook_grad_stats().steps, 1);
  est_dist_finalize(); /* frees the hook's sync */
  assert_int_equal(est_dist_hook_grad_stats().steps, 0);
  est_vars_free(vs);

  /* a model reporting outside a step, or with no notifier, is harmless */
  assert_int_equal(est_grads_ready(NULL, 0, 1), EST_OK);

  est_run_config rc = est_run_config_default();
  rc.model_dir = "unused";
  est_dist_make_distribution(&hook);
  hook.world_size = 2; /* validation only: never used for a collective */
  rc.distribution = &hook;
  assert_int_equal(est_run_config_validate(&rc), EST_OK);
  hook.grads_ready = NULL;
  assert_int_equal(est_run_config_validate(&rc), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "grads_begin, grads_ready and grads_finish"));
  hook.grads_begin = NULL, hook.grads_finish = NULL;
  assert_int_equal(est_run_config_validate(&rc), EST_OK);
  rc.grad_reduction = (est_grad_reduction)7;
  assert_int_equal(est_run_config_validate(&rc), EST_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(est_error_message(), "grad_reduction is 7"));
  rc.grad_reduction = EST_GRAD_SUM;
  assert_int_equal(est_run_config_validate(&rc), EST_OK);
}

/* est_dist_one_rank: rank 0 of 1, every collective the identity. */
static void test_one_rank_distribution(void **state) {
  (void)state;
  const est_distribution *d = est_dist_one_rank();
  assert_int_equal(d->rank, 0);
  assert_int_equal(d->world_size, 1);
  float f[3] = {1, 2, 3};
  double g[2] = {0.5, -1};
  assert_int_equal(d->allreduce_mean(d->ctx, f, 3), EST_OK);
  assert_int_equal(d->allreduce_sum(d->ctx, g, 2), EST_OK);
  assert_int_equal(d->broadcast(d->ctx, f, 3), EST_OK);
  assert_true(f[0] == 1 && f[1] == 2 && f[2] == 3 && g[0] == 0.5 && g[1] == -1);
  int64_t send[2] = {7, 8}, recv[2] = {0, 0};
  assert_int_equal(d->allgather_i64(d->ctx, send, 2, recv), EST_OK);
  assert_true(recv[0] == 7 && recv[1] == 8);
  void *rows;
  size_t total;
  assert_int_equal(d->gather_rows(d->ctx, send, 2, sizeof send[0], &rows, &total), EST_OK);
  assert_int_equal(total, 2);
  assert_memory_equal(rows, send, sizeof send);
  free(rows);
  assert_int_equal(d->barrier(d->ctx), EST_OK);
  assert_int_equal(d->grads_begin(d->ctx, NULL, 1.0), EST_OK);
  assert_int_equal(d->grads_ready(d->ctx, 0, 5), EST_OK);
  assert_int_equal(d->grads_finish(d->ctx), EST_OK);
  assert_int_equal(d->grads_begin(d->ctx, NULL, 0.5), EST_ERR_INVALID_ARGUMENT); /* one rank weighs 1 */
}

static void test_timeout_setting(void **state) {
  (void)state;
  double before = est_dist_timeout();
  assert_true(before > 0);
  est_dist_set_timeout(-1);
  assert_true(est_dist_timeout() == before);
  est_dist_set_timeout(2.5);
  assert_true(est_dist_timeout() == 2.5);
  est_dist_set_timeout(before);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shard_rows_and_local_batch),
      cmocka_unit_test(test_interleave_rows),
      cmocka_unit_test(test_single_process_collectives),
      cmocka_unit_test(test_single_process_grad_sync),
      cmocka_unit_test(test_configure_single_process),
      cmocka_unit_test(test_hook_entries_and_validation),
      cmocka_unit_test(test_timeout_setting),
      cmocka_unit_test(test_one_rank_distribution),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
