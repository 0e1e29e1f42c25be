"""The builders of a run of several (docs/BUILDERS.md), for report.py and
compare.py: what each builder recorded (RUN_DIR/builders/B/events.jsonl and
expired.jsonl) and what the hub says of it (metrics.json "builders": per id
its host, assigned, decided, lost, its END report's counters and, where
the hub gives one, its rate). Either source may be absent: a run of one
builder has neither (an empty list), an older hub no "builders" section.

Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "deploy"))
# The launcher's summary reads the same section the same way.
from daqlib.launcher import builders_section, fence_of, figure as find, in_progress  # noqa: E402,F401


def read_times(path: Path, fence: int | None = None) -> tuple[int | None, list[int]]:
    """(records, their t_ns) of a builder's events.jsonl; (None, []) when
    absent. A given-up builder's (fence: launcher.fence_of) count only below
    its fence: the books count the rest lost."""
    try:
        f = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return None, []
    count, times = 0, []
    with f:
        for line in f:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or (fence is not None and
                                             not (isinstance(rec.get("event"), int)
                                                  and rec["event"] < fence)):
                continue
            count += 1
            t = rec.get("t_ns")
            if isinstance(t, int):
                times.append(t)
    return count, times


def count_lines(path: Path, fence: int | None = None) -> int | None:
    try:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip() and
                       (fence is None or json.loads(line).get("event", fence) < fence))
    except (OSError, ValueError):
        return None


def rate_of(times: list[int]) -> float | None:
    """Records per second from the first record's t_ns to the last."""
    if len(times) < 2 or max(times) == min(times):
        return None
    return (len(times) - 1) / ((max(times) - min(times)) / 1e9)


def per_builder(run_dir: Path, metrics: dict | None = None) -> list[dict]:
    """One entry per builder, by id: id, host, recorded (events.jsonl lines),
    expired, assigned, complete, rate (events/s: the hub's where it says,
    else from the records' t_ns), rate_from, times (t_ns, for plots).
    Empty for a run of one builder."""
    section = builders_section(metrics) if isinstance(metrics, dict) else {}
    top = Path(run_dir) / "builders"
    ids = sorted(int(p.name) for p in top.iterdir() if p.is_dir() and p.name.isdigit()) \
        if top.is_dir() else []
    out = []
    for b in sorted(set(ids) | set(section)):
        hub = section.get(b, {})
        fence = fence_of(hub)
        recorded, times = read_times(top / str(b) / "events.jsonl", fence)
        rate = find(hub, "events_per_s", "rate", "accepted_events_per_s")
        host = hub.get("host")
        out.append({
            "id": b, "host": host if isinstance(host, str) else None,
            "recorded": recorded, "expired": count_lines(top / str(b) / "expired.jsonl", fence),
            "fenced_below": fence,
            "assigned": find(hub, "assigned", depth=0),
            "complete": find(hub, "events_complete"),
            "rate": rate if rate is not None else rate_of(times),
            "rate_from": "metrics.json" if rate is not None else
                         "events.jsonl" if rate_of(times) is not None else None,
            "times": times,
        })
    return out
