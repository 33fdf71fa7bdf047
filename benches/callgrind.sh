#!/usr/bin/env bash
# Instructions per routed key (callgrind's Ir, counted inside route_batch only), for the
# groupers and layouts given, on the stream of `rust/keysplit-core/examples/route_once.rs`.
# Instruction counts repeat exactly from run to run, however busy the machine: use them to
# compare two builds.
#
#   benches/callgrind.sh [TARGET_DIR] [KEYS] < cases      # cases: "grouper layout workers" lines
#   printf 'key uint64 8\npkg string_view 1024\n' | benches/callgrind.sh
set -euo pipefail
target_dir=${1:-target}
rows=${2:-200000}
cargo build --quiet --release -p keysplit-core --example route_once --target-dir "$target_dir"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
while read -r grouper layout workers; do
    [ -z "$grouper" ] && continue
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" --toggle-collect='keysplit_core::grouper::route_batch' \
        "$target_dir/release/examples/route_once" "$grouper" "$layout" "$workers" "$rows" >/dev/null 2>"$out/log"
    ir=$(grep -E '^summary:|^totals:' "$out/cg" | head -1 | awk '{print $2}')
    awk -v g="$grouper" -v l="$layout" -v n="$workers" -v ir="$ir" -v rows="$rows" \
        'BEGIN { printf "%-12s %-12s n=%-5s %8.1f Ir/key\n", g, l, n, ir / rows }'
done
