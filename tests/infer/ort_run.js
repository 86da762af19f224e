// Runs an ONNX model in ONNX Runtime (npm onnxruntime-node 1.30, installed by scripts/setup)
// for the control-flow and opset tests (test_control_flow.py):
//   NODE_PATH=CHECKOUT/node_modules node ort_run.js MODEL.onnx IN.json OUT.json
// IN.json maps input names to {type, dims, data}; OUT.json gets every output the same way
// (int64 values as numbers, exact below 2^53).
const fs = require('fs');
const ort = require('onnxruntime-node');

const ARRAYS = { float32: Float32Array, float64: Float64Array, int64: BigInt64Array,
                 int32: Int32Array, bool: Uint8Array };

async function main() {
  const [model, inPath, outPath] = process.argv.slice(2);
  if (!outPath) throw new Error('usage: ort_run.js MODEL.onnx IN.json OUT.json');
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
  const feeds = {};
  for (const [name, t] of Object.entries(JSON.parse(fs.readFileSync(inPath, 'utf8')))) {
    const Array_ = ARRAYS[t.type];
    if (!Array_) throw new Error(`input ${name}: type ${t.type} is not handled`);
    const data = Array_ === BigInt64Array ? BigInt64Array.from(t.data.map(BigInt))
                                          : Array_.from(t.data);
    feeds[name] = new ort.Tensor(t.type, data, t.dims);
  }
  const results = await session.run(feeds);
  const out = {};
  for (const name of session.outputNames) {
    const t = results[name];
    out[name] = { type: t.type, dims: t.dims, data: Array.from(t.data, Number) };
  }
  fs.writeFileSync(outPath, JSON.stringify(out));
}

main().catch(e => { console.error(e.message || e); process.exit(1); });
