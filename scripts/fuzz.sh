#!/usr/bin/env bash
# Fuzzes every decoder that reads bytes from outside (fuzz/: cargo-fuzz
# targets on libFuzzer, listed in docs/src/contributing.md) for a while each.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   FUZZ_RUNS=N scripts/fuzz.sh SECONDS [TARGET...]
#
# Defaults: 5 seconds (the CI budget), every target, one target per core
# at a time (FUZZ_JOBS=N for N at a time). With FUZZ_RUNS each
# target stops after N executions, or at SECONDS if that comes first (the
# long budget: FUZZ_RUNS=10000000 scripts/fuzz.sh 3600). Needs the nightly
# toolchain (rustup); installs cargo-fuzz into target/tools/ when missing.
# Seeds are read from fuzz/corpus/<target>/ (committed); what a run finds
# goes to fuzz/target/corpus/<target>/ (kept between runs, not committed).
# A crash, a failed assertion, a leak of time (10 s per input) or memory
# fails the script; the input that did it is saved under
# fuzz/artifacts/<target>/ and its path printed. Replay one with
#   fuzz/target/x86_64-unknown-linux-gnu/release/<target> <artifact>
#
# Built without a sanitizer (the workspace forbids unsafe code, and the
# build stays short) but with debug assertions, so arithmetic overflow
# panics.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-5}
shift || true
max_runs=${FUZZ_RUNS:-}
toolchain=${FUZZ_TOOLCHAIN:-nightly}

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    echo "fuzz: the $toolchain toolchain is missing (rustup toolchain install $toolchain)" >&2
    exit 2
fi
tools="$PWD/target/tools"
if [ ! -x "$tools/bin/cargo-fuzz" ]; then
    cargo install cargo-fuzz --locked --root "$tools"
fi
export PATH="$tools/bin:$PATH"

build=(--fuzz-dir fuzz --release --debug-assertions --sanitizer none --codegen-units 16)
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +"$toolchain" fuzz list --fuzz-dir fuzz)
fi
if [ $# -gt 0 ]; then
    for target in "${targets[@]}"; do
        cargo +"$toolchain" fuzz build "${build[@]}" "$target"
    done
else
    cargo +"$toolchain" fuzz build "${build[@]}"
fi

triple=$(rustup run "$toolchain" rustc -vV | sed -n 's/^host: //p')
bin_dir="fuzz/target/$triple/release"
# One target per core at a time (FUZZ_JOBS): each still has a core for its
# SECONDS, and the whole run takes a core count's share of the time.
max_jobs=${FUZZ_JOBS:-$(nproc)}
fuzz_one() {
    local target=$1 status=0
    local scratch="fuzz/target/corpus/$target" artifacts="fuzz/artifacts/$target"
    local log="fuzz/target/logs/$target.log"
    "$bin_dir/$target" "$scratch" "fuzz/corpus/$target" \
        -max_total_time="$seconds" ${max_runs:+-runs="$max_runs"} -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts/" \
        >"$log" 2>&1 || status=$?
    echo "$status" >"$log.status"
}
for target in "${targets[@]}"; do
    mkdir -p "fuzz/target/corpus/$target" "fuzz/artifacts/$target" fuzz/target/logs "fuzz/corpus/$target"
    while [ "$(jobs -rp | wc -l)" -ge "$max_jobs" ]; do
        wait -n || true
    done
    fuzz_one "$target" &
done
wait

failed=()
printf '%-18s %12s %10s  %s\n' target executions exec/s result
for target in "${targets[@]}"; do
    log="fuzz/target/logs/$target.log"
    status=$(cat "$log.status")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ "$status" -eq 0 ]; then
        result=ok
    else
        artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        result="FAILED (exit $status) ${artifact:-no artifact}; log: $log"
        failed+=("$target")
    fi
    printf '%-18s %12s %10s  %s\n' "$target" "${runs:-?}" "${rate:-?}" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
    for target in "${failed[@]}"; do
        echo "--- fuzz/target/logs/$target.log (tail)" >&2
        tail -40 "fuzz/target/logs/$target.log" >&2
    done
    echo "fuzz: failed: ${failed[*]}" >&2
    exit 1
fi
