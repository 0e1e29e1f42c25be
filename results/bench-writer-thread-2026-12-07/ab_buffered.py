#!/usr/bin/python3
"""A/B: recording 4 x 16 KiB unpaced, old tree against new, interleaved ABBA;
and the writer alone on tmpfs."""
import sys, json, tempfile, statistics, subprocess
from pathlib import Path
sys.path.insert(0, "/work/main/analysis")
import bench_record as br
trees = {"old": Path("/tmp/old"), "new": Path("/work/main")}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
events = int(sys.argv[2]) if len(sys.argv) > 2 else 16000
payload = int(sys.argv[3]) if len(sys.argv) > 3 else 16384
work = Path(tempfile.mkdtemp(prefix="ab-"))
disk = Path(tempfile.mkdtemp(prefix="ab-disk-", dir="/var/tmp"))
res = {k: [] for k in trees}
for r in range(rounds):
    order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
    for k in order:
        br.DAQRUN = trees[k] / "deploy" / "daqrun"
        x = br.daqrun(work, f"{k}-{r}", events=events, payload=payload, rate=0, record=disk)
        br.clean(disk)
        res[k].append(x)
        print(k, r, {q: (round(v, 2) if isinstance(v, float) else v) for q, v in x.items() if q in ("failed", "events_per_s", "data_mb_per_s", "builder_cpu_us_per_fragment", "cpu_us_per_fragment", "p99_us")}, flush=True)
    dd = br.dd_mb_per_s(disk, 1024)
    print("dd", round(dd), flush=True)
for k in trees:
    print(k, "median MB/s", round(br.median(res[k], "data_mb_per_s"), 1), "ev/s", round(br.median(res[k], "events_per_s")),
          "builder us/frag", round(br.median(res[k], "builder_cpu_us_per_fragment"), 3))
