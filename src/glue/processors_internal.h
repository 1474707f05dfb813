/* Internals shared by processors.c and processors_examples.c. */
#ifndef EST_BERT_PROCESSORS_INTERNAL_H
#define EST_BERT_PROCESSORS_INTERNAL_H

#include <stdbool.h>

#include "est/processors.h"

/* Takes ownership of a malloc'ed block, freed with the list. false: out of memory. */
bool est_examples_adopt_block(est_examples *ex, void *block);
/* Appends a zeroed example whose strings the caller points into ex's storage; NULL: no memory. */
est_input_example *est_examples_push(est_examples *ex);

#endif
