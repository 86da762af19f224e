"""The table of bench/train/plan_vs_measured.sh: measured vs predicted step time per plan,
then the planner's compute efficiency fitted to those measurements. Each plan also goes as
a plan.best line with its measured time to $AK_BENCH_OUT/plan.jsonl (`ak report`).

The fit: a plan's predicted time is C + R, C its compute terms (GEMM, attention,
elementwise, optimizer: all inversely proportional to the cluster's efficiencies) and R
the rest (communication, bubble). One factor k on gemm_efficiency and
elementwise_efficiency makes it C/k + R; 1/k is the least-squares solution over the
measured plans. Each plan's fitted prediction comes from k fitted on the OTHER plans
(leave-one-out), so the error printed is out of sample. The fitted cluster (k from all
plans) is written beside the calibrated one and the planner re-run on it.

    python3 plan_table.py OUT_DIR AK MODEL GBS
    (OUT_DIR holds calibrated.json, planN.json and trainN.log)
"""
import json
import os
import re
import subprocess
import sys

COMPUTE = ("gemm_s", "attention_s", "elementwise_s", "optimizer_s")


def measured(log):
    text = open(log).read()
    return (float(re.search(r"measured\s+([0-9.]+) s", text).group(1)),
            re.search(r"plan \d+: (.*?)  \(", text).group(1))


def forced_flags(p):
    rc = p["recompute"] + (f":{p['recompute_layers']}" if p["recompute"] == "hybrid" else "")
    return ["--tp", str(p["tp"]), "--pp", str(p["pp"]), "--dp", str(p["dp"]), "--vp",
            str(p["vp"]), "--mbs", str(p["mbs"]), "--sp", "on" if p["sequence_parallel"]
            else "off", "--recompute", rc, "--zero", str(p["zero"]), "--offload", "none"]


def plan(ak, model, cluster, gbs, extra):
    out = subprocess.run([ak, "plan", "--model", model, "--cluster", cluster, "--gbs", gbs,
                          "--attention", "standard", "--offload", "none", "--json",
                          "--top", "1", *extra], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)["plans"][0]


def split(p):
    bd = p["breakdown"]
    c = sum(bd[k] for k in COMPUTE)
    return c, p["time_per_iter_s"] - c


def fit_inverse_k(rows):
    """1/k minimizing sum (meas - R - C/k)^2."""
    num = sum(c * (m - r) for c, r, m in rows)
    den = sum(c * c for c, r, m in rows)
    return num / den


def record(ak, model, gbs, rows):
    """Each measured plan as a plan.best line (docs/report.md) with its prediction, its
    breakdown and measured_time_per_iter_s, to $AK_BENCH_OUT/plan.jsonl for `ak report`."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from results import DEFAULT_OUT, Writer
    w = Writer(os.environ.get("AK_BENCH_OUT", DEFAULT_OUT), "plan", ak)
    for k, desc, p, meas in rows:
        w.add("plan.best", {"model": os.path.basename(model), "cluster": "this machine, calibrated",
                            "devices": p["tp"] * p["pp"] * p["dp"], "gbs": int(gbs), "rank": k + 1,
                            "plan": desc},
              {"time_per_iter_s": p["time_per_iter_s"], "measured_time_per_iter_s": round(meas, 4),
               "breakdown": p["breakdown"]})


def main():
    out, ak, model, gbs = sys.argv[1:5]
    rows = []
    n = 0
    while os.path.exists(f"{out}/train{n}.log"):
        p = json.load(open(f"{out}/plan{n}.json"))["plans"][0]
        meas, desc = measured(f"{out}/train{n}.log")
        rows.append((n, desc, p, meas))
        n += 1
    splits = [split(p) + (m,) for _, _, p, m in rows]
    print(f"{'#':>2}  {'plan':<62} {'pred s':>7} {'meas s':>7} {'meas/pred':>9} "
          f"{'fitted s':>8} {'meas/fit':>8}")
    within = within_fit = 0
    for i, (k, desc, p, meas) in enumerate(rows):
        others = [s for j, s in enumerate(splits) if j != i]
        inv = fit_inverse_k(others) if others else 1.0
        c, r, _ = splits[i]
        fitted = c * inv + r
        ratio, ratio_fit = meas / p["time_per_iter_s"], meas / fitted
        within += abs(ratio - 1) <= 0.25
        within_fit += abs(ratio_fit - 1) <= 0.25
        print(f"{k:>2}  {desc:<62} {p['time_per_iter_s']:>7.3f} {meas:>7.3f} {ratio:>9.3f} "
              f"{fitted:>8.3f} {ratio_fit:>8.3f}")
    record(ak, model, gbs, rows)
    fastest = min(rows, key=lambda r: r[3])
    print(f"within +-25 %: {within} of {len(rows)} plans as calibrated by the micro-benchmarks, "
          f"{within_fit} of {len(rows)} with the efficiency fitted on the other plans")
    print(f"fastest measured: plan {fastest[0]} ({fastest[3]:.3f} s); the planner's best (plan 0) "
          f"measured {rows[0][3]:.3f} s = {rows[0][3] / fastest[3]:.3f}x the fastest")
    print("order by prediction: " + " ".join(str(r[0]) for r in sorted(rows, key=lambda r: r[2]["time_per_iter_s"]))
          + "; by measurement: " + " ".join(str(r[0]) for r in sorted(rows, key=lambda r: r[3])))
    if len(rows) < 2:
        return
    inv = fit_inverse_k(splits)
    cluster = json.load(open(f"{out}/calibrated.json"))
    for key in ("gemm_efficiency", "elementwise_efficiency"):
        cluster[key] = round(min(1.0, cluster[key] / inv), 4)
    cluster["description"] += "; compute efficiency fitted to measured steps (bench/train)"
    fitted_path = f"{out}/fitted.json"
    json.dump(cluster, open(fitted_path, "w"), indent=1)
    best = plan(ak, model, fitted_path, gbs, [])
    same = [r[0] for r in rows if forced_flags(r[2]) == forced_flags(best)]
    print(f"fitted: compute efficiency x {1 / inv:.3f} (gemm_efficiency "
          f"{cluster['gemm_efficiency']}, elementwise_efficiency "
          f"{cluster['elementwise_efficiency']}); the planner's best on it: "
          f"tp={best['tp']} pp={best['pp']} dp={best['dp']} mbs={best['mbs']} "
          f"zero={best['zero']} recompute={best['recompute']} "
          f"({'measured above as plan ' + str(same[0]) if same else 'not among the measured plans'})")


if __name__ == "__main__":
    main()
