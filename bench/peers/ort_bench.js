// ONNX inference peer harness: ONNX Runtime (CPU, npm onnxruntime-node) timing a model, the
// peer of `ak bench`, run by bench/infer/vs_peers.sh (which installs the package):
//   NODE_PATH=DIR/node_modules node ort_bench.js MODEL.onnx [THREADS=1] [RUNS=50] [--dim NAME=VALUE ...] [--profile]
// Inputs are seeded random data in the model's declared shapes (a symbolic dimension takes
// its --dim value, else 1). After 5 untimed runs, RUNS timed ones; prints one JSON line
// with the load time and the p50/p90/p99/mean latency in ms. --profile turns on ORT's
// profiler and adds "profile_ms": {op type: ms per run} (its node events summed over every
// run, warm-up included, divided by the runs), as `AK_PROFILE=1 ak bench` counts.
const ort = require('onnxruntime-node');

// A seeded linear congruential generator: uniform numbers in [0, 1).
function uniform(seed) {
  let state = seed >>> 0;
  return () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 4294967296;
}

const ARRAYS = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array,
                 int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array };

function parseArgs(argv) {
  const dims = {}, rest = [];
  let profile = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--profile') { profile = true; continue; }
    if (argv[i] !== '--dim') { rest.push(argv[i]); continue; }
    const [name, value] = (argv[++i] || '').split('=');
    if (!name || !(Number(value) > 0)) throw new Error(`--dim wants NAME=VALUE, got '${argv[i]}'`);
    dims[name] = Number(value);
  }
  const [model, threads = '1', runs = '50'] = rest;
  if (!model) throw new Error('usage: ort_bench.js MODEL.onnx [THREADS] [RUNS] [--dim NAME=VALUE ...]');
  return { model, threads: Number(threads), runs: Number(runs), dims, profile };
}

function randomFeeds(session, dims, next) {
  const feeds = {};
  for (const input of session.inputMetadata) {
    const shape = input.shape.map(d => (typeof d === 'number' && d >= 0 ? d : dims[d] ?? 1));
    const Array_ = ARRAYS[input.type];
    if (!Array_) throw new Error(`input ${input.name}: type ${input.type} is not handled`);
    const data = new Array_(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) {
      if (Array_ === BigInt64Array) data[i] = BigInt(Math.floor(next() * 100));
      else if (Array_ === Float32Array || Array_ === Float64Array) data[i] = next() * 2 - 1;
      else data[i] = Math.floor(next() * 2);
    }
    feeds[input.name] = new ort.Tensor(input.type, data, shape);
  }
  return feeds;
}

const ms = since => Number(process.hrtime.bigint() - since) / 1e6;

/* ORT's profile (a Chrome trace written at endProfiling) summed per op type, ms per run */
function profileByOp(prefix, runs) {
  const fs = require('fs'), path = require('path');
  const dir = path.dirname(prefix), stem = path.basename(prefix);
  const file = fs.readdirSync(dir).filter(f => f.startsWith(stem) && f.endsWith('.json'))
                 .map(f => path.join(dir, f)).sort().pop();
  if (!file) throw new Error(`--profile: ONNX Runtime wrote no profile under ${prefix}*`);
  const perOp = {};
  for (const e of JSON.parse(fs.readFileSync(file, 'utf8'))) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !e.args || !e.args.op_name) continue;
    perOp[e.args.op_name] = (perOp[e.args.op_name] || 0) + e.dur / 1000 / runs;
  }
  fs.rmSync(dir, { recursive: true, force: true });
  for (const k of Object.keys(perOp)) perOp[k] = Number(perOp[k].toFixed(4));
  return perOp;
}

async function main() {
  const { model, threads, runs, dims, profile } = parseArgs(process.argv.slice(2));
  const prefix = profile ? require('path').join(require('fs').mkdtempSync(
    require('path').join(require('os').tmpdir(), 'ortprof-')), 'profile') : undefined;
  const start = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    enableProfiling: profile, profileFilePrefix: prefix });
  const loadMs = ms(start);
  const feeds = randomFeeds(session, dims, uniform(42));
  for (let i = 0; i < 5; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    await session.run(feeds);
    times.push(ms(t));
  }
  if (profile) session.endProfiling();
  times.sort((a, b) => a - b);
  const quantile = q => times[Math.min(times.length - 1, Math.floor(q * times.length))];
  const round = x => Number(x.toFixed(3));
  console.log(JSON.stringify({
    peer: `onnxruntime-node ${require('onnxruntime-node/package.json').version}`, model, threads,
    iters: runs, load_ms: Number(loadMs.toFixed(1)), p50_ms: round(quantile(0.5)),
    p90_ms: round(quantile(0.9)), p99_ms: round(quantile(0.99)),
    mean_ms: round(times.reduce((a, b) => a + b, 0) / times.length),
    ...(profile ? { profile_ms: profileByOp(prefix, runs + 5) } : {}) }));
}

main().catch(e => { console.error(`ort_bench: ${e.message}`); process.exit(1); });
