#!/bin/sh
# `make interop`: TensorFlow, TensorBoard, HuggingFace and safetensors judge est's files
# (tests/interop/*.py under pytest). Usage: sh tests/interop/run.sh BUILD_DIR [pytest args]
#
# The virtual environment (.venv-interop/, or $INTEROP_VENV) is created on first use and
# reused; it is re-installed when requirements.txt changes (a copy of the installed file
# is kept inside the venv). PyPI only; nothing here is needed by the product or `make test`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
case $build in /*) ;; *) build=$root/$build ;; esac
venv=${INTEROP_VENV:-$root/.venv-interop}
python=${INTEROP_PYTHON:-python3}
req=$here/requirements.txt

if [ ! -x "$venv/bin/python" ]; then
  echo "interop: creating $venv with $($python --version 2>&1)"
  "$python" -m venv "$venv"
fi
if ! cmp -s "$req" "$venv/requirements.installed"; then
  echo "interop: installing tests/interop/requirements.txt (first time: ~3 GB, a few minutes)"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.installed"
fi

[ -x "$build/est" ] || { echo "interop: $build/est not built" >&2; exit 1; }
export EST_BIN="$build/est" EST_ROOT="$root"
# test_python*.py import python/est against this build's libest.so (make interop builds it)
export EST_LIBRARY="${EST_LIBRARY:-$build/libest.so}"
# TF: no oneDNN banner or CPU-feature chatter; both libraries on the 2 cores CI has.
export TF_CPP_MIN_LOG_LEVEL=2 TF_ENABLE_ONEDNN_OPTS=0 CUDA_VISIBLE_DEVICES=
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TOKENIZERS_PARALLELISM=false
export PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
set +e
"$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$here" "$@"
rc=$?
set -e
# pytest: 0 all passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage error,
# 5 no test collected. Only 0 is a pass; 5 means the suite silently vanished.
if [ $rc -eq 5 ]; then echo "interop: pytest collected no test" >&2; exit 1; fi
exit $rc
