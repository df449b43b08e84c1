#!/usr/bin/env bash
# The README's test command beside four CPU-bound processes, to show that no test's verdict depends on
# how busy the machine is (issue 29). Usage: bench/stress_tests.sh [tox arguments, e.g. -e numpy,torch]
# Prints the command's exit status and wall time; the busy processes stop when it ends.
set -uo pipefail
cd "$(dirname "$0")/.."
hogs=()
for _ in 1 2 3 4; do
    (while :; do :; done) &
    hogs+=($!)
done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
start=$(date +%s)
if [ $# -gt 0 ]; then tox -p --parallel-live "$@"; else tox -p --parallel-live; fi
status=$?
echo "tox -p beside ${#hogs[@]} busy processes on $(nproc) cores: exit ${status} after $(( $(date +%s) - start )) s"
exit "${status}"
