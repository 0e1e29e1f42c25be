#!/usr/bin/python3
import sys, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main/analysis")
import bench_record as br
trees = {"old": Path("/tmp/old"), "new": Path("/work/main")}
arms = [("old", "buffered"), ("new", "buffered"), ("old", "direct"), ("new", "direct")]
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
events = int(sys.argv[2]) if len(sys.argv) > 2 else 16000
payload = int(sys.argv[3]) if len(sys.argv) > 3 else 16384
work = Path(tempfile.mkdtemp(prefix="ab-"))
disk = Path(tempfile.mkdtemp(prefix="ab-disk-", dir="/var/tmp"))
res = {a: [] for a in arms}
for r in range(rounds):
    order = arms if r % 2 == 0 else arms[::-1]
    for a in order:
        br.DAQRUN = trees[a[0]] / "deploy" / "daqrun"
        x = br.daqrun(work, f"{a[0]}-{a[1]}-{r}", events=events, payload=payload, rate=0, record=disk, io=a[1])
        br.clean(disk)
        res[a].append(x)
        print(a, r, {q: (round(v, 2) if isinstance(v, float) else v) for q, v in x.items() if q in ("failed", "events_per_s", "data_mb_per_s", "builder_cpu_us_per_fragment", "cpu_us_per_fragment", "p99_us", "direct_bytes")}, flush=True)
    print("dd", round(br.dd_mb_per_s(disk, 1024)), flush=True)
for a in arms:
    print(a, "median MB/s", round(br.median(res[a], "data_mb_per_s"), 1), "ev/s", round(br.median(res[a], "events_per_s")),
          "builder us/frag", round(br.median(res[a], "builder_cpu_us_per_fragment"), 3), "all us/frag", round(br.median(res[a], "cpu_us_per_fragment"), 2))
