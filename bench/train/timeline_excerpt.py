#!/usr/bin/python3
"""An excerpt of a Horovod-style timeline (HOROVOD_TIMELINE, a Chrome trace written by
rank 0) as train.timeline results lines (docs/report.md) for `ak report`'s training
section: the last training step's gradient reduction — each tensor's latest negotiation,
fusion copies and communication (lanes by the trace's categories) and the wire-level
allreduces of more than 1024 elements inside that window ("wire") — with times in ms
from the window's start.
  usage: bench/train/timeline_excerpt.py TRACE.json --case ctr --variant ak
                                         [--ak build/ak] [--out DIR] [--max-events 80]
The gradients are told apart as the tensors negotiated most often (once per step)."""
import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results import DEFAULT_OUT, Writer  # noqa: E402

PER_TENSOR = ("negotiate", "fusion_copy_in", "communicate", "fusion_copy_out")
WIRE = re.compile(r"allreduce (\d+) x \w+")


def load(path):
    """The trace's complete events; a file cut short (a killed job) lacks only `]}`."""
    text = Path(path).read_text()
    try:
        doc = json.loads(text)
    except ValueError:
        doc = json.loads(text.rstrip().rstrip(",") + "]}")
    return [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc)
            if e.get("ph") == "X" and "dur" in e]


def excerpt(events, max_events):
    """(window start µs, [(lane, name, start µs, dur µs)]) of the last gradient step: each
    tensor's latest event of each kind, and the wire-level allreduces between them."""
    # the gradients: the tensors reduced most often (once a step); setup broadcasts and
    # the harness's own reductions (bench.*) come fewer times
    count = {}
    for e in events:
        if e.get("cat") == "negotiate":
            count[e["name"]] = count.get(e["name"], 0) + 1
    steps = max(count.values(), default=0)
    latest = {}
    for e in events:
        if e.get("cat") in PER_TENSOR and count.get(e["name"]) == steps:
            key = (e["cat"], e["name"])
            if key not in latest or e["ts"] > latest[key]["ts"]:
                latest[key] = e
    if not latest:
        raise SystemExit("timeline_excerpt: no per-tensor events (negotiate/communicate) in the trace")
    step = sorted(latest.values(), key=lambda e: e["ts"])[-max_events:]
    t0, t1 = step[0]["ts"], max(e["ts"] + e["dur"] for e in step)
    out = [(e["cat"], e["name"], e["ts"], e["dur"]) for e in step]
    for e in events:
        m = WIRE.match(e.get("name", ""))
        if e.get("cat") == "comm" and m and int(m.group(1)) > 1024 and t0 <= e["ts"] <= t1:
            out.append(("wire", e["name"], e["ts"], e["dur"]))
    return t0, sorted(out, key=lambda x: x[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--case", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--ak", default=os.environ.get("AK_BIN", "build/ak"))
    ap.add_argument("--out", default=os.environ.get("AK_BENCH_OUT", DEFAULT_OUT))
    ap.add_argument("--max-events", type=int, default=80)
    a = ap.parse_args()
    t0, rows = excerpt(load(a.trace), a.max_events)
    w = Writer(a.out, "train", a.ak)
    for i, (lane, name, ts, dur) in enumerate(rows):
        w.add("train.timeline", {"case": a.case, "variant": a.variant, "event": i, "lane": lane,
                                 "name": name},
              {"start_ms": round((ts - t0) / 1e3, 3), "dur_ms": round(dur / 1e3, 3)})
    print(f"timeline_excerpt: {len(rows)} events over "
          f"{max(r[2] + r[3] for r in rows) / 1e3 - t0 / 1e3:.1f} ms", file=sys.stderr)


if __name__ == "__main__":
    main()
