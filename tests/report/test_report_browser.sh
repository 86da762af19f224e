#!/usr/bin/env bash
# `ak report` in a real browser: the fixtures' report (two folders compared) and a report
# of one folder with sections lacking data, each loaded in headless Chromium by
# check_report.js (no console or script error, every section rendered, plots with axes and
# series, every number equal to its results line, loaded within 1 s). The screenshots stay
# in the build tree: OUTDIR/report.png, OUTDIR/report-partial.png.
#   usage: test_report_browser.sh path/to/ak OUTDIR
set -u
AK=$1; outdir=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../common/check.sh"
mkdir -p "$outdir"
if ! command -v chromium >/dev/null || [ ! -d "$root/node_modules/puppeteer-core" ]; then
  echo "FAIL: needs Debian's chromium and npm's puppeteer-core in node_modules/: run scripts/setup"
  exit 1
fi
run_check=(env NODE_PATH="$root/node_modules" node "$here/check_report.js")
cd "$here/fixtures" || exit 1
check build-full 0 "$AK" report run-a run-b -o "$outdir/report.html"
check browser-full 0 "${run_check[@]}" "$outdir/report.html" . "$outdir/report.png" \
  --plots sgemm,comm,infer,llm,train,plan \
  --categories 'latency p50 ms, batch 1 (lower is better)=4'  # resnet50 on 1 and 2 threads apart
echo "$out"
check build-partial 0 "$AK" report run-b -o "$outdir/report-partial.html"
check browser-partial 0 "${run_check[@]}" "$outdir/report-partial.html" . "$outdir/report-partial.png" \
  --plots sgemm,comm --empty infer,llm,train,plan,compare
echo "$out"
check_summary
