#!/bin/sh
# bp-run end to end: compile, check against eager and save; load the saved
# file and check again; a corrupt file is rejected with its reason and
# compiled instead; the transformer and ResNet examples check against eager.
# Usage: bp_run_check.sh BP_RUN EXAMPLES_DIR OUT_DIR
set -eu
r=$1 g=$2 out=$3
mkdir -p "$out"
fail() { echo "bp_run_check: $*" >&2; exit 1; }
"$r" "$g/mlp.bpg" --sym B=4 --check --quiet --save "$out/mlp.bpx" > "$out/save.txt"
grep -q 'check against eager on cpu:0: ok' "$out/save.txt" || fail "save run: $(cat "$out/save.txt")"
"$r" "$g/mlp.bpg" --sym B=4 --check --quiet --load "$out/mlp.bpx" > "$out/load.txt"
grep -q '^loaded ' "$out/load.txt" || fail "not loaded: $(cat "$out/load.txt")"
grep -q 'check against eager on cpu:0: ok' "$out/load.txt" || fail "loaded run: $(cat "$out/load.txt")"
printf 'garbage' > "$out/bad.bpx"
"$r" "$g/mlp.bpg" --sym B=4 --check --quiet --load "$out/bad.bpx" > "$out/bad.txt" 2> "$out/bad.err"
grep -q 'rejected (DATA_LOSS)' "$out/bad.err" || fail "corrupt file not rejected: $(cat "$out/bad.err")"
grep -q 'check against eager on cpu:0: ok' "$out/bad.txt" || fail "recompiled run: $(cat "$out/bad.txt")"
"$r" "$g/transformer_block.bpg" --sym S=8 --check --report "$out/tb.json" > "$out/tb.txt"
grep -q 'check against eager on cpu:0: ok' "$out/tb.txt" || fail "transformer: $(cat "$out/tb.txt")"
grep -q '"kind": "epilogue"' "$out/tb.json" || fail "transformer report has no fusion"
"$r" "$g/resnet_block.bpg" --sym N=1 --check --quiet > "$out/rn.txt"
grep -q 'check against eager on cpu:0: ok' "$out/rn.txt" || fail "resnet: $(cat "$out/rn.txt")"
echo "bp_run_check: ok"
