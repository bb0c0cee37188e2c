#!/usr/bin/env bash
# Incremental export, the cron way: `stratus changes --output` after each round of writes, one
# run killed with kill -9 in the middle, and a check that the outputs together hold every
# change of the history exactly once.
#
#   samples/incremental-export.sh [WORKDIR]
#
# In WORKDIR (default: a new temporary folder), with the `churn` sample as the writers:
#   1. writer a makes changes in zone Photos; run 1 exports them to export-1.ndjson.
#   2. writer b makes changes; run 2 starts exporting to export-2.ndjson, one change per
#      commit, while writer c writes more; run 2 is killed midway (kill -9).
#   3. run 3 exports to export-3.ndjson: it first cuts export-2.ndjson back to what run 2
#      committed, then continues from run 2's last token.
#   4. `churn verify` reads export-1, -2 and -3 in order and compares them with the writers'
#      logs: every committed change exactly once, each record's changes in commit order, and
#      each record's last exported state equal to its final state.
# Exits 0 when the check passes. Set STRATUS_BIN to a folder holding built `stratus` and
# `churn` binaries to skip the build.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${STRATUS_BIN:-}" ]; then
    swift build >/dev/null
    STRATUS_BIN="$(swift build --show-bin-path)"
fi
stratus="$STRATUS_BIN/stratus"
churn="$STRATUS_BIN/churn"
work="${1:-$(mktemp -d -t stratus-incremental-XXXXXX)}"
mkdir -p "$work"
store=(--store "$work/store.sqlite" --container com.example.churn --database private --user alice)
export_command() {   # export_command N [extra options…]: the cron job's command line
    local n=$1; shift
    command=("$stratus" changes "${store[@]}" --zone Photos --token-file "$work/photos.token"
             --output "$work/export-$n.ndjson" "$@")
}
export_run() { export_command "$@"; "${command[@]}" 2>>"$work/stratus.log"; }
committed_length() { sed -n 's/^output-length=//p' "$work/photos.token"; }
echo "working in $work"

echo "== writes, then run 1"
"$churn" "${store[@]}" --zone Photos --writer a --operations 300 --seed 11 --log "$work/a.log"
export_run 1
echo "run 1: $(wc -l <"$work/export-1.ndjson") changes"

echo "== more writes, then run 2, killed midway while writer c keeps writing"
"$churn" "${store[@]}" --zone Photos --writer b --operations 300 --seed 12 --log "$work/b.log"
"$churn" "${store[@]}" --zone Photos --writer c --operations 200 --seed 13 --pause-ms 3 --log "$work/c.log" &
writer=$!
export_command 2 --batch 1
"${command[@]}" 2>>"$work/stratus.log" &
exporter=$!
sleep 0.4
if kill -9 "$exporter" 2>/dev/null; then
    wait "$exporter" 2>/dev/null || true
    size=$(stat -c %s "$work/export-2.ndjson")
    echo "run 2 killed: export-2.ndjson holds $size bytes, $(committed_length) of them committed"
else
    wait "$exporter"
    echo "run 2 finished before the kill (a fast disk); run the sample again to see a kill land"
fi
wait "$writer"

echo "== run 3"
export_run 3
# A run that finds nothing new creates no file (run 2 may have caught writer c's last change).
[ -e "$work/export-3.ndjson" ] || : >"$work/export-3.ndjson"
echo "run 3: $(wc -l <"$work/export-3.ndjson") changes; export-2.ndjson now $(stat -c %s "$work/export-2.ndjson") bytes"

echo "== check: exports against the writers' logs"
"$churn" verify --log "$work/a.log" --log "$work/b.log" --log "$work/c.log" \
    "$work/export-1.ndjson" "$work/export-2.ndjson" "$work/export-3.ndjson"
