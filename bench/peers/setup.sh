#!/bin/sh
# Makes bench/peers/.venv (or $PEERS_VENV) for bench/run_peers.sh: PyPI's torch, onnx and
# onnxruntime pinned in bench/peers/requirements.txt (every transitive package pinned too;
# first time ~3 GB, the CUDA libraries torch's PyPI wheel depends on included, a few minutes),
# and tcmalloc for the PyTorch rows: when Debian's libtcmalloc-minimal4 is not installed, its
# .deb is fetched with `apt-get download` and unpacked into the venv (nothing is installed
# system-wide). Re-installs when requirements.txt changes (a copy is kept in the venv).
# Nothing here is needed by the product, `make test` or the rest of `make bench`.
#
#   sh bench/peers/setup.sh            PEERS_PYTHON=python3.11 to choose the interpreter
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv=${PEERS_VENV:-$here/.venv}
python=${PEERS_PYTHON:-python3}
req=$here/requirements.txt
if [ ! -x "$venv/bin/python" ]; then
  echo "peers: creating $venv with $($python --version 2>&1)"
  "$python" -m venv "$venv"
fi
if ! cmp -s "$req" "$venv/requirements.installed"; then
  echo "peers: installing bench/peers/requirements.txt"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.installed"
fi
lib=usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
if [ ! -e "/$lib" ] && [ ! -e "$venv/tcmalloc/$lib" ]; then
  tmp=$(mktemp -d)
  if (cd "$tmp" && apt-get download libtcmalloc-minimal4 >/dev/null 2>&1); then
    dpkg -x "$tmp"/libtcmalloc-minimal4_*.deb "$venv/tcmalloc"
    echo "peers: unpacked $(basename "$tmp"/libtcmalloc-minimal4_*.deb) into $venv/tcmalloc"
  else
    echo "peers: libtcmalloc-minimal4 not available: the PyTorch rows will use glibc malloc"
  fi
  rm -rf "$tmp"
fi
echo "peers: ready ($("$venv/bin/python" -c 'import torch, onnxruntime; print("torch", torch.__version__, "onnxruntime", onnxruntime.__version__)'))"
