#!/usr/bin/env bash
# Builds fuzz/out/fuzz_c_api: the libFuzzer harness with ASan + UBSan, the runtime, the generated
# entry points and the baseline (ISA level 0) kernels compiled straight into the binary, so the
# sanitizers see every line. clang has no OpenMP runtime here, so the kernels run single-threaded
# (they promise identical results for any thread count).
# Usage: fuzz/build.sh            (from anywhere; objects go to fuzz/out/obj, ~2 min on 2 cores)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/fuzz/out"
mkdir -p "$out/obj"
CXX="${CXX:-clang++}"
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -Wno-unknown-pragmas -Wno-unknown-warning-option -DACLNN_ISA_LEVEL=0 -I"$root/include")
objs=()
pids=()
for src in "$root"/runtime/*.cpp "$root"/runtime/generated/*.cpp "$root"/ops/*.cpp; do
  rel="${src#$root/}"
  obj="$out/obj/${rel//\//_}.o"
  objs+=("$obj")
  extra=()
  if [[ ! -f "$obj" || "$src" -nt "$obj" || -n "$(find "$root/include" -newer "$obj" -name '*.h' | head -1)" ]]; then
    "$CXX" "${flags[@]}" "${extra[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    # Two compilers at a time (two cores).
    if (( ${#pids[@]} >= 2 )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
"$CXX" "${flags[@]/fuzzer-no-link/fuzzer}" "$root/fuzz/fuzz_c_api.cpp" "${objs[@]}" -o "$out/fuzz_c_api"
echo "built $out/fuzz_c_api"
