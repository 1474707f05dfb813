"""BERT's sequence classifier as a tf.compat.v1 graph, written for these tests from the
architecture's definition (Devlin et al. 2018; the variable names are those of Google's
checkpoints, which est keeps), so that TensorFlow's own Saver restores est's checkpoint
into a model est had no hand in.

  embeddings: word[ids] + token_type[segment_ids] + position[0:S], then LayerNorm
  each layer:  h = LN(x + Dense(MultiHeadSelfAttention(x, mask)))
               x = LN(h + Dense(gelu(Dense(h))))
  pooler:      tanh(Dense(x[:, 0]))
  classifier:  logits = pooled @ output_weights^T + output_bias; probabilities = softmax

LayerNorm has epsilon 1e-12, GELU is the tanh approximation, the attention mask adds -10000
where input_mask is 0 (all as Google's run_classifier.py computes them). Inference only
(no dropout)."""
import math

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def _dense(x, units, name, stddev, seed):
    with v1.variable_scope(name):
        w = v1.get_variable("kernel", [x.shape[-1], units], initializer=v1.truncated_normal_initializer(stddev=stddev, seed=seed))
        b = v1.get_variable("bias", [units], initializer=v1.random_normal_initializer(stddev=stddev, seed=seed + 1))
    return tf.matmul(x, w) + b


def _layer_norm(x, name, stddev, seed):
    with v1.variable_scope(name):
        g = v1.get_variable("gamma", [x.shape[-1]], initializer=v1.random_normal_initializer(1.0, stddev, seed=seed))
        b = v1.get_variable("beta", [x.shape[-1]], initializer=v1.random_normal_initializer(0.0, stddev, seed=seed + 1))
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) * tf.math.rsqrt(var + 1e-12) * g + b


def _gelu(x):
    return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def build_classifier(config, input_ids, input_mask, segment_ids, num_labels, stddev=0.02, seed=1):
    """Builds the graph in the current v1 graph; returns (logits, probabilities).
    input_*: int32 [B, S]. Initializers only matter for write_random_checkpoint."""
    H = config["hidden_size"]
    heads = config["num_attention_heads"]
    d = H // heads
    S = input_ids.shape[1]
    s = [seed]

    def nseed():
        s[0] += 2
        return s[0]

    init = lambda: v1.truncated_normal_initializer(stddev=stddev, seed=nseed())
    with v1.variable_scope("bert"):
        with v1.variable_scope("embeddings"):
            word = v1.get_variable("word_embeddings", [config["vocab_size"], H], initializer=init())
            tt = v1.get_variable("token_type_embeddings", [config["type_vocab_size"], H], initializer=init())
            pos = v1.get_variable("position_embeddings", [config["max_position_embeddings"], H], initializer=init())
            x = tf.gather(word, input_ids) + tf.gather(tt, segment_ids) + pos[None, :S, :]
            x = _layer_norm(x, "LayerNorm", stddev, nseed())
        # [B, 1, 1, S] additive mask: 0 where attended, -10000 where padding
        adder = (1.0 - tf.cast(input_mask, tf.float32))[:, None, None, :] * -10000.0
        with v1.variable_scope("encoder"):
            for i in range(config["num_hidden_layers"]):
                with v1.variable_scope(f"layer_{i}"):
                    with v1.variable_scope("attention"):
                        with v1.variable_scope("self"):
                            def split(t):  # [B, S, H] -> [B, heads, S, d]
                                return tf.transpose(tf.reshape(t, [-1, S, heads, d]), [0, 2, 1, 3])
                            q = split(_dense(x, H, "query", stddev, nseed()))
                            k = split(_dense(x, H, "key", stddev, nseed()))
                            v = split(_dense(x, H, "value", stddev, nseed()))
                            scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(d) + adder
                            ctx = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
                            ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [-1, S, H])
                        with v1.variable_scope("output"):
                            h = _layer_norm(x + _dense(ctx, H, "dense", stddev, nseed()), "LayerNorm", stddev, nseed())
                    with v1.variable_scope("intermediate"):
                        inter = _gelu(_dense(h, config["intermediate_size"], "dense", stddev, nseed()))
                    with v1.variable_scope("output"):
                        x = _layer_norm(h + _dense(inter, H, "dense", stddev, nseed()), "LayerNorm", stddev, nseed())
        with v1.variable_scope("pooler"):
            pooled = tf.tanh(_dense(x[:, 0, :], H, "dense", stddev, nseed()))
    w = v1.get_variable("output_weights", [num_labels, H], initializer=init())
    b = v1.get_variable("output_bias", [num_labels], initializer=v1.zeros_initializer())
    logits = tf.matmul(pooled, w, transpose_b=True) + b
    return logits, tf.nn.softmax(logits, axis=-1)


def write_random_checkpoint(config, prefix, stddev, seed, with_head=False):
    """A pretrained-style checkpoint (bert/* only, as Google ships; with_head: also
    output_weights/output_bias, as run_classifier.py's) written by TF's Saver."""
    g = tf.Graph()
    with g.as_default():
        ids = v1.placeholder(tf.int32, [None, 8])
        build_classifier(config, ids, ids, ids, 2, stddev=stddev, seed=seed)
        bert_vars = [v for v in v1.global_variables() if with_head or v.op.name.startswith("bert/")]
        saver = v1.train.Saver(bert_vars)
        with v1.Session(graph=g) as sess:
            sess.run(v1.global_variables_initializer())
            saver.save(sess, prefix, write_meta_graph=False, write_state=False)


def predict(config, prefix, input_ids, input_mask, segment_ids, num_labels):
    """Restores `prefix` with tf.compat.v1.train.Saver into the graph; returns probabilities
    (float32 [B, num_labels]) for int arrays [B, S]."""
    g = tf.Graph()
    with g.as_default():
        S = input_ids.shape[1]
        ph = [v1.placeholder(tf.int32, [None, S]) for _ in range(3)]
        _, probs = build_classifier(config, *ph, num_labels)
        saver = v1.train.Saver(v1.global_variables())  # every model variable must be in the file
        with v1.Session(graph=g) as sess:
            saver.restore(sess, prefix)
            feed = dict(zip(ph, [np.asarray(a, np.int32) for a in (input_ids, input_mask, segment_ids)]))
            return sess.run(probs, feed)
