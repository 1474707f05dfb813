/* est/nn.h — neural-network ops as forward/backward pairs (the pieces of BERT).
 *
 * Every op is a pair of plain functions over float32 row-major arrays, llm.c style:
 * outputs first, then inputs, then weights, then dimensions. A shape comment sits on
 * each declaration. Nothing here allocates or knows about files or variables.
 *
 *     // y[N,OC] = x[N,IC] . W[IC,OC] + b, then its gradients
 *     est_matmul_forward(y, x, W, b, N, IC, OC, 0, EST_PRECISION_FP32);
 *     est_matmul_backward(dx, dW, db, dy, x, W, N, IC, OC, 0, EST_PRECISION_FP32);   // dx, dW, db all +=
 *
 * Backward has one rule: EVERY gradient a backward produces is ADDED (+=) into the
 * buffer the caller passes, never written over it. That holds for parameter gradients
 * (dW, db, dgamma, dbeta, embedding tables), so gradient accumulation over micro-batches
 * is free, and for input gradients (dinp, dq/dk/dv, dlogits), so a tensor read by two
 * ops (a residual connection, a tied embedding table, Q/K/V reading one input) gets the
 * sum of both gradients by handing both backwards the same buffer. Consequences:
 *   - Zero a gradient buffer yourself before the first backward that adds into it.
 *   - An input gradient may NOT alias the output gradient it is computed from (dinp ==
 *     dout would read what it has already added to).
 *   - Any gradient pointer may be NULL when that gradient is not wanted.
 * tests/test_nn_gradcheck.c checks the rule for every op: a backward into a non-zero
 * buffer gives that buffer plus the gradient.
 *
 * The one exception is asked for by name: the ops that produce an input gradient have a
 * `_mode` twin whose last argument says how that input gradient is delivered,
 * EST_GRAD_ADD (the rule) or EST_GRAD_WRITE (written over, the buffer's old contents
 * never read). The first backward into a buffer may then write it, and the buffer need
 * not be zeroed first: in a small model's training step the zeroing and the reading back
 * of zeros were ~5% of the time (bench/README.md, "Input gradients written, not added").
 * Parameter gradients always add. WRITE gives the same numbers as ADD into zeros.
 *
 * Numerics follow google-research/bert modeling.py (docs/bert.md §2): layer norm eps
 * 1e-12, additive -10000 attention mask applied after the 1/sqrt(Dh) scale, inverted
 * dropout, "gelu" = the tanh approximation.
 *
 * Threads: every op but the GEMMs runs OpenMP loops split by rows or columns, so results
 * are bitwise the same for any thread count (see est/threads.h).
 */
#ifndef EST_NN_H
#define EST_NN_H

#include <stddef.h>
#include <stdint.h>

#include "est/precision.h"
#include "est/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a `_mode` backward delivers its input gradient (see the rule above). */
typedef enum est_grad_mode {
  EST_GRAD_ADD = 0,   /* dinp += gradient */
  EST_GRAD_WRITE = 1, /* dinp = gradient; dinp's old contents are not read (may be garbage) */
} est_grad_mode;

/* ---------------------------------------------------------------------------------- */
/* Dense layer / matmul (CBLAS sgemm).
 * precision (est/precision.h), the last argument of every op that runs a GEMM here and in
 * the attention below: the arithmetic of its products, the model's (est_bert_encoder_precision);
 * bf16 on a CPU without AVX512-BF16 runs fp32.
 * weight_transposed = 0: weight is [IC, OC], TF's tf.layers.dense kernel layout.
 * weight_transposed = 1: weight is [OC, IC], e.g. BERT's classifier output_weights [C, H]. */

/* out[N,OC] = inp[N,IC] . W + bias[OC]   (bias may be NULL) */
void est_matmul_forward(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int IC, int OC, int weight_transposed, est_precision precision);
/* One input through several dense layers (BERT's Q, K and V projections of x): for each j,
 * outs[j].out[N, outs[j].OC] = inp[N,IC] . outs[j].weight + outs[j].bias, the numbers
 * est_matmul_forward gives each; in int8 inp is quantized once for all of them. */
typedef struct {
  float *out;
  const float *weight, *bias;
  int OC;
} est_dense_output;
void est_matmul_forward_shared(const float *inp, int N, int IC, const est_dense_output *outs, int count,
                               est_precision precision);
/* pre[N,OC] = inp . W + bias and act[N,OC] = tanh-GELU(pre) (est_activation_forward's
 * EST_ACT_GELU values), in one pass: the GELU is the GEMM's epilogue. */
void est_matmul_forward_gelu(float *act, float *pre, const float *inp, const float *weight, const float *bias,
                             int N, int IC, int OC, int weight_transposed, est_precision precision);
/* BERT's feed-forward block: act[N,IM] = tanh-GELU(pre = inp[N,IC] . wi + bi), then
 * out[N,IC] = act . wo + bo: est_matmul_forward_gelu then est_matmul_forward, the same numbers
 * (weights [IC,IM] and [IM,IC], TF's layout). In int8 the first GEMM quantizes act's rows for
 * the second as it writes them (nn/gemm_int8.h, est_sgemm_int8_ffn). */
void est_ffn_forward(float *out, float *act, float *pre, const float *inp, const float *wi, const float *bi,
                     const float *wo, const float *bo, int N, int IC, int IM, est_precision precision);
/* dinp[N,IC] += dout . W^T;  dweight += inp^T . dout (in W's layout);  dbias[OC] += sum_n dout */
void est_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                         const float *weight, int N, int IC, int OC, int weight_transposed, est_precision precision);
/* The same with dinp delivered as `mode` says (dweight, dbias still +=). */
void est_matmul_backward_mode(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                              const float *weight, int N, int IC, int OC, int weight_transposed,
                              est_grad_mode mode, est_precision precision);

/* The backward of out[N,OC] = gelu(pre[N,IC]) . W + bias (BERT's FFN output layer) through
 * the GELU as well, from dout:
 *   dpre[N,IC] = (dout . W^T) * gelu'(pre)   (written, as EST_GRAD_WRITE: not read)
 *   act[N,IC]  = gelu(pre)                   (the forward's activation, recomputed)
 *   dweight += act^T . dout;  dbias += sum_n dout
 * "gelu" is EST_ACT_GELU (the tanh form). The numbers are those of est_activation_forward
 * into act, est_matmul_backward_mode(WRITE) into a d act buffer and
 * est_activation_backward_mode(WRITE) from it, in a row; here d act is never stored: its
 * GEMM's epilogue multiplies each tile by gelu'(pre) and writes act from the same load of
 * pre. dpre and act must not overlap each other or the inputs. */
void est_matmul_backward_gelu(float *dpre, float *act, float *dweight, float *dbias, const float *dout,
                              const float *pre, const float *weight, int N, int IC, int OC, int weight_transposed,
                              est_precision precision);

/* The same with plain loops (double accumulation): the reference the BLAS path is tested
 * against. Slow; never used by the model. */
void est_matmul_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                            int N, int IC, int OC, int weight_transposed);
void est_matmul_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                             const float *weight, int N, int IC, int OC, int weight_transposed);

/* ---------------------------------------------------------------------------------- */
/* Layer norm over the last axis (TF contrib layer_norm, eps = 1e-12, biased variance). */

#define EST_LAYERNORM_EPS 1e-12f

/* out[N,C] = (inp - mean) * rstd * gamma[C] + beta[C]; mean[N], rstd[N] are saved for backward.
 * beta may be NULL (no bias), in the forwards below too; dbeta may be NULL in the backwards. */
void est_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                           const float *beta, int N, int C);
/* x[N,C] += residual, then out = LayerNorm(x) as est_layernorm_forward, in one pass over the
 * rows (x keeps the sum: it is the norm's input that the backward reads). */
void est_layernorm_forward_residual(float *out, float *mean, float *rstd, float *x, const float *residual,
                                    const float *gamma, const float *beta, int N, int C);
/* The same two with the config's eps (layer_norm_eps: 1e-12 BERT, 1e-5 RoBERTa). The two
 * above are these with EST_LAYERNORM_EPS. Backward needs no eps: it reads the saved rstd. */
void est_layernorm_forward_eps(float *out, float *mean, float *rstd, const float *inp, const float *gamma,
                               const float *beta, int N, int C, float eps);
void est_layernorm_forward_residual_eps(float *out, float *mean, float *rstd, float *x, const float *residual,
                                        const float *gamma, const float *beta, int N, int C, float eps);
/* dinp[N,C] +=; dgamma[C], dbeta[C] +=. dinp must not alias dout. */
void est_layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                            const float *gamma, const float *mean, const float *rstd, int N, int C);
/* The same with dinp delivered as `mode` says (dgamma, dbeta still +=). */
void est_layernorm_backward_mode(float *dinp, float *dgamma, float *dbeta, const float *dout, const float *inp,
                                 const float *gamma, const float *mean, const float *rstd, int N, int C,
                                 est_grad_mode mode);

/* ---------------------------------------------------------------------------------- */
/* Activations (modeling.get_activation). Config spellings, case-insensitive:
 *   "gelu"       the tanh approximation 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))), BERT at HEAD
 *   "gelu_exact" the erf form 0.5x(1+erf(x/sqrt 2)) of BERT's first release (alias "gelu_new"
 *                is NOT accepted: HuggingFace uses that name for the tanh form, too confusing)
 *   "relu", "tanh", "linear" (also "" = linear, as get_activation(None)). */
typedef enum est_activation {
  EST_ACT_LINEAR = 0,
  EST_ACT_RELU,
  EST_ACT_GELU,        /* tanh approximation */
  EST_ACT_GELU_EXACT,  /* erf form */
  EST_ACT_TANH,
} est_activation;

/* Unknown name: EST_ERR_INVALID_ARGUMENT "Unsupported activation: <name>". */
est_status est_activation_from_name(const char *name, est_activation *out);
const char *est_activation_name(est_activation act);

/* out[n] = act(inp[n]); out may alias inp. */
void est_activation_forward(float *out, const float *inp, size_t n, est_activation act);
/* dinp[n] += dout[n] * act'(inp[n]); dinp must not alias dout. */
void est_activation_backward(float *dinp, const float *dout, const float *inp, size_t n, est_activation act);
/* The same with dinp delivered as `mode` says. */
void est_activation_backward_mode(float *dinp, const float *dout, const float *inp, size_t n, est_activation act,
                                  est_grad_mode mode);

/* Scalar reference tanh-GELU and its derivative in double precision, for tests of the
 * vectorised kernels. */
float est_gelu_tanh_ref(float x);
float est_gelu_tanh_grad_ref(float x);

/* ---------------------------------------------------------------------------------- */
/* Dropout, inverted: kept elements are scaled by 1/(1-prob), dropped ones are 0.
 * The mask is a pure function of (seed, step, tensor_id, element index) through Philox:
 * reproducible, and independent of the thread count and of how the work is split. */

/* mask[i] = 1 when element `start + i` of tensor `tensor_id` is kept at `step`. */
void est_dropout_mask(uint8_t *mask, size_t start, size_t n, float prob, uint64_t seed, uint64_t step,
                      uint32_t tensor_id);
/* out[n] = inp * mask / (1-prob); mask[n] is written. prob == 0: out = inp, mask untouched
 * (may be NULL). out may alias inp. */
void est_dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n, float prob, uint64_t seed,
                         uint64_t step, uint32_t tensor_id);
/* The same for elements [first, first + n) of a larger tensor (mask[i] is element
 * first + i's): a batch that is rows of a larger global batch draws that batch's masks. */
void est_dropout_forward_at(float *out, uint8_t *mask, const float *inp, size_t n, size_t first, float prob,
                            uint64_t seed, uint64_t step, uint32_t tensor_id);
/* dinp[n] += dout * mask / (1-prob); dinp must not alias dout. prob == 0: dinp += dout
 * (mask unread; a caller may rather skip the op and use dout itself). */
void est_dropout_backward(float *dinp, const float *dout, const uint8_t *mask, size_t n, float prob);
/* The same with dinp delivered as `mode` says (prob == 0 and WRITE: a copy of dout). */
void est_dropout_backward_mode(float *dinp, const float *dout, const uint8_t *mask, size_t n, float prob,
                               est_grad_mode mode);

/* ---------------------------------------------------------------------------------- */
/* Gated linear unit (GeGLU with act = GELU; ModernBERT's feed-forward). inp [N, 2 IM] is the
 * first dense layer's output: columns [0, IM) the input x, [IM, 2 IM) the gate g.
 * out[N, IM] = act(x) * g. Backward: dx = dout * g * act'(x), dg = dout * act(x), into
 * dinp [N, 2 IM] as `mode` says. */
void est_glu_forward(float *out, const float *inp, int N, int IM, est_activation act);
void est_glu_backward_mode(float *dinp, const float *dout, const float *inp, int N, int IM, est_activation act,
                           est_grad_mode mode);

/* ---------------------------------------------------------------------------------- */
/* Rotary positions (ModernBERT; transformers' rotate_half form) on Q or K [B, S, N*Dh]: in
 * each head the pair (x[k], x[k + Dh/2]) of the token at position s turns by the angle
 * s * theta^(-2k/Dh). table: est_rotary_table's 2 * P * (Dh/2) floats (cos, then sin, for
 * positions [0, P)), S <= P, Dh even. The forward turns x in place; the backward turns a
 * gradient back in place (a rotation's transpose): dx = R^T dout, written over dout. */
void est_rotary_table(float *table, int P, int Dh, double theta);
void est_rotary_forward(float *x, const float *table, int B, int S, int N, int Dh, int P);
void est_rotary_backward(float *dx, const float *table, int B, int S, int N, int Dh, int P);
/* The reference: out = R x, every angle in double from theta (out must not alias x). */
void est_rotary_forward_ref(float *out, const float *x, int B, int S, int N, int Dh, double theta);

/* ---------------------------------------------------------------------------------- */
/* Multi-head self-attention core (modeling.attention_layer after the Q/K/V dense layers).
 * q, k, v, ctx: [B, S, N*Dh] (the dense outputs; head h = columns h*Dh..(h+1)*Dh-1).
 * scores[b,h,i,j] = (q_i . k_j) / sqrt(Dh) + (1 - input_mask[b,j]) * -10000
 * probs = softmax_j(scores) (saved pre-dropout, [B,N,S,S]); ctx = dropout(probs) . v.
 * input_mask [B,S] may be NULL (all ones). Only keys are masked; a fully masked row
 * gives a uniform row, never NaN.
 * Dropout (prob > 0) needs dropout_mask [B,N,S,S] and scratch; otherwise both may be NULL.
 * scratch: est_attention_scratch_floats(B, N, S) floats, reused by backward. */
size_t est_attention_scratch_floats(int B, int N, int S);
void est_attention_forward(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                           const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                           int Dh, float dropout_prob, uint64_t seed, uint64_t step, uint32_t tensor_id,
                           est_precision precision);
/* The same for examples [first_example, first_example + B) of a larger batch: the
 * dropout mask of example b is the larger batch's for example first_example + b. */
void est_attention_forward_at(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                              const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                              int Dh, float dropout_prob, uint64_t seed, uint64_t step, uint32_t tensor_id,
                              int64_t first_example, est_precision precision);
/* The same with a sliding window (ModernBERT's local layers): query i attends only to keys
 * j with |i - j| <= window, the others get probability 0 (as a -inf score would); window < 0
 * is every key (est_attention_forward_at is this with -1). The backward needs no window:
 * the saved probabilities are 0 outside it, so are their gradients. */
void est_attention_forward_window_at(float *ctx, float *probs, uint8_t *dropout_mask, float *scratch, const float *q,
                                     const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                                     int Dh, int window, float dropout_prob, uint64_t seed, uint64_t step,
                                     uint32_t tensor_id, int64_t first_example, est_precision precision);
/* The same without dropout and without its [B,N,S,S] probabilities: tiles of query rows
 * against tiles of keys with an online softmax (src/nn/attention_tiled.c), memory O(S) per
 * thread, the key tiles outside a window skipped whole. Equal to the above up to the order of
 * fp32 sums; fp32 products whatever the model's precision. The encoder runs it beyond
 * EST_ATTENTION_FULL_MAX_SEQ tokens where no attention dropout is on (docs/bert.md §11). */
void est_attention_forward_tiled(float *ctx, const float *q, const float *k, const float *v,
                                 const int32_t *input_mask, int B, int S, int N, int Dh, int window);
/* The same saving each query row's log-sum-exp of its scores, lse [B,N,S] (lse may be NULL),
 * what its backward needs instead of the probabilities. */
void est_attention_forward_tiled_lse(float *ctx, float *lse, const float *q, const float *k, const float *v,
                                     const int32_t *input_mask, int B, int S, int N, int Dh, int window);
/* Its backward in O(S) memory (the probabilities computed again per tile from lse): dq, dk, dv
 * [B,S,N*Dh] delivered as `mode` says, from dctx and the forward's q, k, v, ctx, lse, mask and
 * window. Equal to est_attention_backward's up to the order of fp32 sums. No dropout. */
void est_attention_backward_tiled(float *dq, float *dk, float *dv, const float *dctx, const float *q, const float *k,
                                  const float *v, const float *ctx, const float *lse, const int32_t *input_mask,
                                  int B, int S, int N, int Dh, int window, est_grad_mode mode);
#define EST_ATTENTION_FULL_MAX_SEQ 512
/* dq, dk, dv [B,S,N*Dh] += (each may be NULL). scratch as forward's; its contents are
 * overwritten. */
void est_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dctx, const float *q,
                            const float *k, const float *v, const float *probs, const uint8_t *dropout_mask,
                            int B, int S, int N, int Dh, float dropout_prob, est_precision precision);
/* The same with dq, dk, dv delivered as `mode` says. */
void est_attention_backward_mode(float *dq, float *dk, float *dv, float *scratch, const float *dctx,
                                 const float *q, const float *k, const float *v, const float *probs,
                                 const uint8_t *dropout_mask, int B, int S, int N, int Dh, float dropout_prob,
                                 est_grad_mode mode, est_precision precision);
/* Plain-loop references (double accumulation, libm exp), same arguments minus scratch;
 * the dropout mask is read, not drawn (pass the fast forward's mask). The backward adds
 * (+=) into dq, dk, dv like the fast one; none may be NULL. */
void est_attention_forward_ref(float *ctx, float *probs, const uint8_t *dropout_mask, const float *q,
                               const float *k, const float *v, const int32_t *input_mask, int B, int S, int N,
                               int Dh, float dropout_prob);
void est_attention_forward_window_ref(float *ctx, float *probs, const uint8_t *dropout_mask, const float *q,
                                      const float *k, const float *v, const int32_t *input_mask, int B, int S,
                                      int N, int Dh, int window, float dropout_prob);
void est_attention_backward_ref(float *dq, float *dk, float *dv, const float *dctx, const float *q,
                                const float *k, const float *v, const float *probs,
                                const uint8_t *dropout_mask, int B, int S, int N, int Dh, float dropout_prob);

/* ---------------------------------------------------------------------------------- */
/* BERT embeddings before layer norm:
 * out[b,s,:] = word[input_ids[b,s]] + onehot(token_type_ids[b,s], T) . type + pos[s].
 * A token type outside [0,T) contributes zero (TF computes it as a one-hot product);
 * a word id outside [0,V) is an error (EST_ERR_INVALID_ARGUMENT naming [b][s] and the id).
 * token_type_ids may be NULL (all zeros). word [V,H], type [T,H], pos [>=S,H]. */
est_status est_embeddings_forward(float *out, const int32_t *input_ids, const int32_t *token_type_ids,
                                  const float *word, const float *type, const float *pos, int B, int S,
                                  int H, int V, int T);
/* dword, dtype, dpos += (scatter-add: repeated ids add up); each may be NULL. Ids must
 * have passed forward. There is no input gradient (ids are integers). */
void est_embeddings_backward(float *dword, float *dtype, float *dpos, const float *dout,
                             const int32_t *input_ids, const int32_t *token_type_ids, int B, int S, int H,
                             int V, int T);

/* The general form under the encoder's options (est/bert_encoder.h est_encoder_options):
 * out[b,s,:] = word[input_ids[b,s]] + type[t] + pos[position_ids[b,s]], with t as above;
 * type NULL: no token types (DistilBERT); position_ids NULL: row s (BERT's); pos NULL: no
 * positions. pos has P rows: a position id outside [0,P) is an error naming
 * position_ids[b][s], as an id outside the vocabulary is. With position_ids NULL and type
 * given, the very numbers of est_embeddings_forward. */
est_status est_embeddings_forward_ex(float *out, const int32_t *input_ids, const int32_t *token_type_ids,
                                     const int32_t *position_ids, const float *word, const float *type,
                                     const float *pos, int B, int S, int H, int V, int T, int P);
/* dword, dtype, dpos += for the forward above (each may be NULL). A token whose word id is
 * word_pad adds nothing into dword, one whose position id is pos_pad nothing into dpos: the
 * rows torch's nn.Embedding(padding_idx) never trains (-1: none). */
void est_embeddings_backward_ex(float *dword, float *dtype, float *dpos, const float *dout,
                                const int32_t *input_ids, const int32_t *token_type_ids,
                                const int32_t *position_ids, int B, int S, int H, int V, int T,
                                int32_t word_pad, int32_t pos_pad);
/* RoBERTa's position ids (transformers' create_position_ids_from_input_ids): per example,
 * out[b,s] = pad when input_ids[b,s] == pad, else pad + the count of non-pad ids in
 * input_ids[b,0..s]. */
void est_position_ids_after_padding(int32_t *out, const int32_t *input_ids, int B, int S, int32_t pad);
/* DistilBERT's fixed table (create_sinusoidal_embeddings) [P,H]: angle = p / 10000^(2 (j/2) / H)
 * in double, table[p][j] = sin(angle) for even j, cos(angle) for odd j, rounded to float. */
void est_sinusoidal_positions(float *table, int P, int H);

/* ---------------------------------------------------------------------------------- */
/* Softmax and cross-entropy over classes (run_classifier create_model). */

/* out[B,C] = softmax(inp) per row; out may alias inp. */
void est_softmax_forward(float *out, const float *inp, int B, int C);

/* losses[b] = -log_softmax(logits[b])[labels[b]]; probs[B,C] = softmax(logits) saved for
 * backward (may be NULL when no backward follows). A label outside [0,C) is an error. */
est_status est_crossentropy_forward(float *losses, float *probs, const float *logits, const int32_t *labels,
                                    int B, int C);
/* dlogits[B,C] += dloss * (probs - onehot(labels)); dloss is d(total)/d(losses[b]),
 * e.g. 1/B for a batch mean. */
void est_crossentropy_backward(float *dlogits, const float *probs, const int32_t *labels, float dloss, int B,
                               int C);
/* One row: probs[C] = softmax(x), returns the log-normaliser log(sum exp x). _ref is libm
 * exp in double (what rows of fewer than 256 classes use); the other picks the vectorised
 * kernel for vocabulary-sized rows. probs may be NULL only for _ref. For tests. */
float est_crossentropy_row_ref(float *probs, const float *x, int C);
float est_crossentropy_row(float *probs, const float *x, int C);

/* The masked LM's softmax cross-entropy over vocabulary-sized rows (src/nn/vocab_xent.c),
 * the fused form of est_crossentropy_forward + a first-maximum argmax + est_crossentropy_
 * backward that keeps no [N,C] probs and no separate dlogits. Forward reads logits[N,C]
 * twice (max and argmax, then the sum of exp) and keeps per row the max and 1/sum; it gives
 * losses[n] and preds[n] as the reference path does. Backward overwrites logits with
 * dlogits = scale[n] * (softmax - onehot(labels[n])), rows with scale 0 with zeros. */
est_status est_vocab_xent_forward(float *losses, int32_t *preds, float *row_max, float *row_inv,
                                  const float *logits, const int32_t *labels, int N, int C);
void est_vocab_xent_backward_inplace(float *logits, const float *row_max, const float *row_inv,
                                     const int32_t *labels, const float *scale, int N, int C);

#ifdef __cplusplus
}
#endif
#endif
