#!/usr/bin/env bash
# split_blob.sh BLOB METADATA_OUT PAYLOAD_OUT: writes the metadata JSON and the engine payload
# of a delegate blob (docs/formats/delegate_blob.md; offsets and sizes are little-endian u64 in the
# header), the seeds of the metadata and portable payload fuzzers.
set -euo pipefail
u64() { od -An -tu8 -j "$2" -N 8 --endian=little "$1" | tr -d ' '; }
blob=$1
dd if="$blob" of="$2" bs=1 skip="$(u64 "$blob" 24)" count="$(u64 "$blob" 32)" status=none
dd if="$blob" of="$3" bs=1 skip="$(u64 "$blob" 40)" count="$(u64 "$blob" 48)" status=none
