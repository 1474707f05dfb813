/* est/est.h — everything public in one include. */
#ifndef EST_EST_H
#define EST_EST_H

#include "est/status.h"
#include "est/log.h"
#include "est/float_format.h"
#include "est/tensor.h"
#include "est/file.h"
#include "est/rng.h"
#include "est/flags.h"
#include "est/crc32c.h"
#include "est/tfrecord.h"
#include "est/example.h"
#include "est/tfevents.h"
#include "est/ckpt.h"
#include "est/safetensors.h"
#include "est/variables.h"
#include "est/dataset.h"
#include "est/metrics.h"
#include "est/optimizer.h"
#include "est/run_config.h"
#include "est/estimator.h"
#include "est/dist.h"
#include "est/threads.h"
#include "est/nn.h"
#include "est/bert_model.h"
#include "est/tokenizer.h"
#include "est/processors.h"
#include "est/features.h"

#endif
