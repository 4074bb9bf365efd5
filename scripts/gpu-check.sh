#!/usr/bin/env bash
# Builds and runs the CUDA suites on a machine with a GPU: the one a session is lent through the
# device tool (which has nvcc, CMake and ninja but no GoogleTest), or any other.
#
#   scripts/gpu-check.sh --prepare [MODEL...]
#                                      here, before the call: copies Debian's GoogleTest sources
#                                      and nlohmann-json (libcommon, for test-decode) into .gpu/
#                                      (ignored by git) so that they can travel, with the golden
#                                      models named (../shared/models/MODEL.gguf and
#                                      golden/ppl/MODEL.kld) in .gpu/shared; without names the
#                                      first group below and golden/quants.gguf (test-quants-blocks)
#   scripts/gpu-check.sh               there: configure with KILN_CUDA=ON, build the suites with
#                                      every core, print the GPU, run them; logs go to $OUT
#                                      (the device tool's) or build-gpu/out
#
# With the device tool: run(command="bash scripts/gpu-check.sh", carry=[".gpu"]). Extra
# arguments are passed to test-cuda-ops (e.g. --gtest_filter=CudaOps.FlashAttention).
# A call carries 64 MiB at most: the nine golden models (about 160 MB with their bases) take four
# calls, each with --prepare run here first: (1) no names: stories260K synth-qwen3-f16
# synth-gemma3-f16 (test-decode's models among them), (2) synth-qwen35-f16 synth-qwen3moe-f16,
# (3) synth-deepseek2-f16 synth-glm4moe-f16, (4) synth-gpt-oss-f16 synth-qwen35moe-f16.
# test-cuda-golden runs the carried models' cases, test-decode runs when its two models travel.
# KILN_GPU_SANITIZE=1 also runs the op suite under compute-sanitizer (memcheck).
# KILN_NCCL=ON configures with NCCL: test-cuda-nccl then sums across the GPUs (two or more), also
# as -sm graph's collective step through the scheduler; with one GPU it checks the refusals only.
# KILN_GPU_BENCH=1 then builds llama-gguf, llama-quantize and llama-sweep-bench (nlohmann-json
# carried), synthesizes Q4_K_M models of the Qwen3-0.6B and Qwen3-30B-A3B (4 layers) shapes there
# and runs sweep-bench: fully offloaded, experts in host memory (-ot exps=CPU, with and without the
# prompt offload), fully offloaded with KILN_CUDA_EXPERTS_BATCHED=0 (prompt expert products on the
# per-pair kernel: the batched path's gain), the CPU alone, and -sm layer / -sm graph over two virtual CUDA devices (one GPU:
# the reduce's overhead, not a speed-up); tables in $out/bench-*.txt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

if [ "${1:-}" = "--prepare" ]; then
    shift
    [ -f /usr/src/googletest/CMakeLists.txt ] || { echo "gpu-check: /usr/src/googletest missing (libgtest-dev)"; exit 1; }
    mkdir -p "$root/.gpu"
    rm -rf "$root/.gpu/googletest" "$root/.gpu/nlohmann" "$root/.gpu/shared"
    cp -r /usr/src/googletest "$root/.gpu/googletest"
    if [ -f /usr/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake ]; then
        mkdir -p "$root/.gpu/nlohmann/include" "$root/.gpu/nlohmann/share/cmake"
        cp -r /usr/include/nlohmann "$root/.gpu/nlohmann/include/"
        cp -r /usr/share/cmake/nlohmann_json "$root/.gpu/nlohmann/share/cmake/"
    fi
    shared="$(cd "$root/.." && pwd)/shared"
    mkdir -p "$root/.gpu/shared/models" "$root/.gpu/shared/golden/ppl"
    if [ $# -eq 0 ]; then
        cp "$shared/golden/quants.gguf" "$root/.gpu/shared/golden/"
        set -- stories260K synth-qwen3-f16 synth-gemma3-f16
    fi
    for m in "$@"; do
        [ -f "$shared/models/$m.gguf" ] && [ -f "$shared/golden/ppl/$m.kld" ] ||
            { echo "gpu-check: no $shared/models/$m.gguf or golden/ppl/$m.kld"; exit 1; }
        cp "$shared/models/$m.gguf" "$root/.gpu/shared/models/"
        cp "$shared/golden/ppl/$m.kld" "$root/.gpu/shared/golden/ppl/"
    done
    exclude="$(git -C "$root" rev-parse --git-path info/exclude)"
    case "$exclude" in /*) ;; *) exclude="$root/$exclude" ;; esac
    mkdir -p "$(dirname "$exclude")"
    grep -qxF '/.gpu/' "$exclude" 2>/dev/null || echo '/.gpu/' >>"$exclude"
    echo "gpu-check: GoogleTest, nlohmann-json and the models $* in .gpu/ ($(du -sh "$root/.gpu" | cut -f1), the limit is 64 MiB with the tree); carry .gpu"
    exit 0
fi

build="${KILN_GPU_BUILD_DIR:-$root/build-gpu}"
out="${OUT:-$build/out}"
mkdir -p "$out"
gtest_src="$root/.gpu/googletest"
[ -f "$gtest_src/CMakeLists.txt" ] || gtest_src=/usr/src/googletest
export PATH="$PATH:/usr/local/cuda/bin"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/gpu.txt" || true
start=$SECONDS
gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
json=()
[ -d "$root/.gpu/nlohmann" ] && json=(-Dnlohmann_json_DIR="$root/.gpu/nlohmann/share/cmake/nlohmann_json")
# the golden models carried (--prepare): test-cuda-golden's cases for them, and test-decode
models=()
if [ -d "$root/.gpu/shared/models" ]; then
    export KILN_SHARED_DIR="$root/.gpu/shared"
    for f in "$KILN_SHARED_DIR"/models/*.gguf; do [ -f "$f" ] && models+=("$(basename "$f" .gguf)"); done
fi
targets=(test-cuda-devices test-cuda-virtual test-cuda-sched test-cuda-nccl test-cuda-ops test-quants-blocks test-cuda-golden)
has_decode_models=0
[ -f "${KILN_SHARED_DIR:-/nonexistent}/models/stories260K.gguf" ] && [ -f "$KILN_SHARED_DIR/models/synth-qwen3-f16.gguf" ] &&
    has_decode_models=1
[ $has_decode_models = 1 ] && [ ${#json[@]} -gt 0 ] && targets+=(test-decode)
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA=ON \
    -DKILN_CUDA_ARCHS="${KILN_CUDA_ARCHS:-90}" -DKILN_NCCL="${KILN_NCCL:-OFF}" -DKILN_GTEST_SOURCE_DIR="$gtest_src" "${json[@]}" >"$out/configure.log" 2>&1 ||
    { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1 ||
    { grep -E "error|Error" "$out/build.log" | head -40; exit 1; }
echo "gpu-check: built in $((SECONDS - start)) s"

status=0
run_suite() {   # name, binary arguments...: output to $out/name.log, summary printed
    local name="$1"
    shift
    local rc=0
    "$@" >"$out/$name.log" 2>&1 || rc=$?
    case $rc in
        0) echo "gpu-check: $name passed" ;;
        77) echo "gpu-check: $name skipped (status 77: no usable GPU)" ;;   # counted below
        *) echo "gpu-check: $name FAILED"; status=1 ;;
    esac
    grep -E "^\[  (FAILED|SKIPPED) |Failure|squared error|^CUDA" "$out/$name.log" | head -60 || true
}
if [ -f "${KILN_SHARED_DIR:-$root/../shared}/golden/quants.gguf" ]; then
    run_suite quants-blocks "$build/bin/test-quants-blocks"
else
    echo "gpu-check: golden/quants.gguf not carried (--prepare without model names): test-quants-blocks not run"
fi
run_suite cuda-devices "$build/bin/test-cuda-devices"
# KILN_VIRTUAL_CUDA_DEVICES=3 (the suite sets it): a split across three devices over this one GPU
run_suite cuda-virtual "$build/bin/test-cuda-virtual" --gtest_filter=-VirtualCuda.WithoutGpuNoDeviceIsListed
# the scheduler's asynchronous copies (copy streams, peer and 2D copies) over two virtual devices
run_suite cuda-sched "$build/bin/test-cuda-sched"
# the NCCL all-reduce: its refusals here, its sums with KILN_NCCL=ON and two GPUs or more
run_suite cuda-nccl "$build/bin/test-cuda-nccl"
run_suite cuda-ops "$build/bin/test-cuda-ops" --gtest_output="xml:$out/cuda-ops.xml" "$@"
# the golden models: every node on the GPU, KLD against the reference fully offloaded, with the
# experts in host memory, and split over two (virtual) CUDA devices; then test-decode's
# consistency checks with every model on the GPU
golden_logs=()
if [ ${#models[@]} -gt 0 ]; then
    filter=""
    for m in "${models[@]}"; do filter+="${filter:+:}*/${m//[^a-zA-Z0-9]/_}"; done
    run_suite cuda-golden "$build/bin/test-cuda-golden" --gtest_filter="$filter"
    golden_logs+=("$out/cuda-golden.log")
else
    echo "gpu-check: no golden models carried (scripts/gpu-check.sh --prepare): test-cuda-golden not run"
fi
if [ $has_decode_models = 1 ] && [ -x "$build/bin/test-decode" ]; then
    run_suite decode env KILN_TEST_REQUIRE_GPU=1 "$build/bin/test-decode"
    golden_logs+=("$out/decode.log")
else
    echo "gpu-check: test-decode not built (needs stories260K and synth-qwen3-f16 carried, and nlohmann-json)"
fi
# here the point is to run them: a skipped GPU test means the GPU was not usable
if grep -q "^\[  SKIPPED \]\|^skipped:" "$out/cuda-ops.log" "$out/cuda-devices.log" "$out/cuda-virtual.log" "$out/cuda-sched.log" "${golden_logs[@]}"; then
    echo "gpu-check: GPU tests were skipped: no usable GPU here"
    status=1
fi
if [ "${KILN_GPU_SANITIZE:-0}" = "1" ] && command -v compute-sanitizer >/dev/null 2>&1; then
    run_suite memcheck compute-sanitizer --tool memcheck --error-exitcode 3 "$build/bin/test-cuda-ops" "$@"
    # the attention kernel shares decoded K/V rows between a warp's lanes and the block's threads
    run_suite racecheck compute-sanitizer --tool racecheck --error-exitcode 3 "$build/bin/test-cuda-ops" \
        --gtest_filter='CudaOps.FlashAttention*'
fi
if [ "${KILN_GPU_BENCH:-0}" = "1" ]; then
    if [ ${#json[@]} -eq 0 ]; then
        echo "gpu-check: KILN_GPU_BENCH needs nlohmann-json carried (--prepare): no benchmarks"
    elif cmake --build "$build" -j "$(nproc)" --target llama-gguf llama-quantize llama-sweep-bench >"$out/build-bench.log" 2>&1; then
        bin="$build/bin" models="$build/bench-models"
        mkdir -p "$models"
        synth() {   # name, preset, synth options...: $models/name-Q4_K_M.gguf
            local name="$1" preset="$2"
            shift 2
            [ -f "$models/$name-Q4_K_M.gguf" ] && return 0
            "$bin/llama-gguf" synth "$preset" -o "$models/$name-f16.gguf" "$@" >/dev/null &&
                "$bin/llama-quantize" "$models/$name-f16.gguf" "$models/$name-Q4_K_M.gguf" Q4_K_M >/dev/null &&
                rm -f "$models/$name-f16.gguf"
        }
        sweep() {   # table name, model, extra arguments...
            local name="$1" model="$2"
            shift 2
            echo "== $name: llama-sweep-bench -m $(basename "$model") -c 2048 -n 64 $*" | tee "$out/bench-$name.txt"
            "$bin/llama-sweep-bench" -m "$model" -c 2048 -n 64 "$@" 2>"$out/bench-$name.log" | tee -a "$out/bench-$name.txt" ||
                echo "gpu-check: sweep $name FAILED (see bench-$name.log)"
        }
        if synth q06 "${KILN_GPU_BENCH_DENSE:-qwen3-0.6b}" && synth moe "${KILN_GPU_BENCH_MOE:-qwen3-30b-a3b}" --layers 4; then
            q06="$models/q06-Q4_K_M.gguf" moe="$models/moe-Q4_K_M.gguf" t="$(nproc)"
            sweep q06-gpu "$q06" -t "$t" -ngl 99
            sweep q06-cpu "$q06" -t "$t" -ngl 0
            sweep moe-gpu "$moe" -t "$t" -ngl 99
            # the expert products of prompt batches without the batched path (per-pair kernel): its gain
            KILN_CUDA_EXPERTS_BATCHED=0 sweep moe-gpu-per-pair "$moe" -t "$t" -ngl 99
            sweep moe-exps-cpu "$moe" -t "$t" -ngl 99 -ot exps=CPU
            sweep moe-exps-cpu-no-op-offload "$moe" -t "$t" -ngl 99 -ot exps=CPU --no-op-offload
            sweep moe-cpu "$moe" -t "$t" -ngl 0
            export KILN_VIRTUAL_CUDA_DEVICES=2
            sweep q06-sm-layer "$q06" -t "$t" -ngl 99 -sm layer
            sweep q06-sm-graph "$q06" -t "$t" -ngl 99 -sm graph
            sweep moe-sm-graph "$moe" -t "$t" -ngl 99 -sm graph
            unset KILN_VIRTUAL_CUDA_DEVICES
        else
            echo "gpu-check: could not synthesize the benchmark models"
        fi
    else
        echo "gpu-check: building the benchmark tools FAILED (see build-bench.log)"
    fi
fi
echo "gpu-check: $([ $status -eq 0 ] && echo passed || echo FAILED) in $((SECONDS - start)) s; logs in $out"
exit $status
