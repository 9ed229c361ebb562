#!/usr/bin/env bash
# Installs the peers tools/bench/compare.py runs, into a venv (default target/bench/venv, or
# $VENV): HF transformers on PyTorch CPU, and llama.cpp built from the source inside PyPI's
# llama-cpp-python (its sdist; ~18 min on 2 cores), whose extracted source also gives the
# HF → GGUF converter compare.py uses. Idempotent. Then:
#   $VENV/bin/python tools/bench/compare.py
set -euo pipefail
cd "$(dirname "$0")/../.."
LLAMA_CPP_PYTHON=0.3.36
VENV=${VENV:-target/bench/venv}
SRC=target/bench/llama-cpp-python-src

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install -q -r tools/bench/requirements.txt
if [ ! -d "$SRC/llama_cpp_python-$LLAMA_CPP_PYTHON" ]; then
  mkdir -p "$SRC"
  "$VENV/bin/pip" download -q --no-deps --no-binary llama-cpp-python -d "$SRC" "llama-cpp-python==$LLAMA_CPP_PYTHON"
  tar xzf "$SRC/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" -C "$SRC"
fi
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "building llama.cpp (llama-cpp-python $LLAMA_CPP_PYTHON) from source…"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    "$VENV/bin/pip" install -q "$SRC/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz"
fi
# The converter imports the gguf-py shipped beside it (PyPI's gguf lags the converter).
"$VENV/bin/python" -c "import llama_cpp, transformers, torch; print('peers ready: llama-cpp-python', llama_cpp.__version__, '· transformers', transformers.__version__, '· torch', torch.__version__)"
