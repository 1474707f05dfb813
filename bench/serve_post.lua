-- wrk script for bench/serve_bench.sh: one TF Serving :predict request with one short
-- sentence (16 WordPiece tokens with [CLS] and [SEP]), the same body for est and the peer.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"instances": ["the movie was a delight from start to finish , with sharp writing and warm acting"]}'
