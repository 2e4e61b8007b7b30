#!/usr/bin/env bash
# Run a command as on a CPU without some feature flags: a private mount namespace (root, util-linux's
# unshare) in which /proc/cpuinfo lists this CPU's flags minus the named ones. Every process the
# command starts (the accelerate workers among them) reads the same file, so the worker's dtype
# check (scorekeeper/worker/model.py, resolve_dtype) decides as it would on such a machine.
#   scripts/without_cpu_flags.sh avx512_bf16,amx_bf16,bf16 ./test.sh
set -euo pipefail
flags=$1
shift
masked=$(mktemp)
trap 'rm -f "$masked"' EXIT
pattern=$(echo "$flags" | sed 's/,/|/g')
sed -E "s/ ($pattern)\b//g" /proc/cpuinfo >"$masked"
unshare -m bash -c 'mount --bind "$0" /proc/cpuinfo && exec "$@"' "$masked" "$@"
