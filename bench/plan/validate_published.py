#!/usr/bin/python3
"""The planner against published training runs: runs the planner's validation tests
(build/tests/test_plan: Megatron-LM Table 1 of Narayanan et al. 2021 with the published
tensor/pipeline/data split forced, and Korthikanti et al. 2022's 530B MFU) and writes each
row as plan.validation lines (docs/report.md) to $AK_BENCH_OUT/plan.jsonl: accelkit's
prediction (with its ratio to the paper) and the published figure as the peer's. `ak
report` draws the ratios with the ±15 % band the planner is held to.
  usage: bench/plan/validate_published.py [build-dir=build]"""
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from results import DEFAULT_OUT, Writer  # noqa: E402

# "megatron-1.7b  t=1 p=1 d=32 vp=1 mbs=16: predicted 140.9 TFLOP/s, published 137 (1.028)"
TABLE1 = re.compile(r"(\S+)\s+(t=.*?): predicted ([\d.]+) TFLOP/s, published ([\d.]+)")
# "530B on 2240 A100: MFU full 0.404 (paper 0.421), selective+SP 0.542 (paper 0.542)"
MFU = re.compile(r"(\S+) on (\d+) A100: MFU full ([\d.]+) \(paper ([\d.]+)\), "
                 r"selective\+SP ([\d.]+) \(paper ([\d.]+)\)")


def rows(text):
    """(params, predicted, published) per validation row the test printed."""
    for line in text.splitlines():
        if m := TABLE1.match(line):
            yield ({"model": m[1], "plan": m[2], "source": "Megatron-LM Table 1",
                    "metric": "TFLOP/s per GPU"}, float(m[3]), float(m[4]))
        elif m := MFU.match(line):
            for recompute, pred, pub in (("full recompute", m[3], m[4]),
                                         ("selective + SP", m[5], m[6])):
                yield ({"model": f"megatron-{m[1].lower()}", "plan": f"{m[2]} A100, {recompute}",
                        "source": "Korthikanti et al. 2022", "metric": "MFU"},
                       float(pred), float(pub))


def main():
    build = Path(sys.argv[1] if len(sys.argv) > 1 else "build")
    out = subprocess.run([str(build / "tests/test_plan")], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"validate_published: test_plan failed:\n{out.stdout[-3000:]}{out.stderr}")
    found = list(rows(out.stdout))
    if not found:
        sys.exit("validate_published: test_plan printed no validation rows")
    w = Writer(os.environ.get("AK_BENCH_OUT", DEFAULT_OUT), "plan", str(build / "ak"))
    print(f"{'model':16} {'plan':36} {'metric':16} {'predicted':>10} {'published':>10} {'ratio':>7}")
    for params, pred, pub in found:
        print(f"{params['model']:16} {params['plan']:36} {params['metric']:16} {pred:10.3f} "
              f"{pub:10.3f} {pred / pub:7.3f}")
        w.add("plan.validation", params, {"value": pred, "ratio_to_published": round(pred / pub, 4)})
        w.add("plan.validation", params, {"value": pub}, peer="published",
              peer_version=params["source"])


if __name__ == "__main__":
    main()
