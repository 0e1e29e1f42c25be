#!/bin/sh
# raw vs hdf5, interleaved, 5 repeats: 4x16 KiB on /dev/shm and on ext4, 4x64 B on ext4;
# one JSON line per run in runs.jsonl, medians in summary.txt (2026-12-04).
# Run from the repository root, after make build/tests/bench_evwriter.
B=build/tests/bench_evwriter
OUT=results/bench-h5writer-2026-12-04
SHM=/dev/shm/h5b; EXT=.benchdir   # ext4: the repository's own disk
mkdir -p $SHM $EXT
for rep in 1 2 3 4 5; do
  for f in raw hdf5; do
    $B --dir $SHM --format $f --events 20000 --payload 16384 | sed "s/^{/{\"case\": \"16k_shm\", \"rep\": $rep, /" >> $OUT/runs.jsonl
  done
  for f in raw hdf5; do
    $B --dir $EXT --format $f --events 20000 --payload 16384 | sed "s/^{/{\"case\": \"16k_ext4\", \"rep\": $rep, /" >> $OUT/runs.jsonl
  done
  for f in raw hdf5; do
    $B --dir $EXT --format $f --events 1000000 --payload 64 | sed "s/^{/{\"case\": \"64b_ext4\", \"rep\": $rep, /" >> $OUT/runs.jsonl
  done
done
