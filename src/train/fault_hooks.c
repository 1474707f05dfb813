/* The fault-injection seam (est/fault_hooks.h): one process-wide copy of the hooks a test
 * installed. The train loop (estimator_train.c) and the checkpoint manager call them; no
 * library code installs any. */
#include "est/fault_hooks.h"

#include <stddef.h>

static est_fault_hooks installed;
static int have_hooks;

void est_set_fault_hooks(const est_fault_hooks *hooks) {
  have_hooks = hooks != NULL;
  installed = hooks ? *hooks : (est_fault_hooks){0};
}

const est_fault_hooks *est_get_fault_hooks(void) { return have_hooks ? &installed : NULL; }
