// ONNX Runtime (npm onnxruntime-node, CPU) as the reference of the quantized-operator and
// control-flow tests (tests/infer/test_quant_ort.py, test_control_flow.py): runs MODEL.onnx once on the inputs IN_DIR/NAME.npy and
// writes every output as OUT_DIR/NAME.npy.
//   NODE_PATH=DIR/node_modules node ort_run.js MODEL.onnx IN_DIR OUT_DIR [disabled|all]
// The last argument is ONNX Runtime's graph optimization level (default all: its QDQ
// fusions on; disabled: every node as the file has it).
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const DTYPES = { '<f4': ['float32', Float32Array], '<f2': ['float16', Uint16Array],
                 '|u1': ['uint8', Uint8Array],
                 '|i1': ['int8', Int8Array], '<i4': ['int32', Int32Array],
                 '<i8': ['int64', BigInt64Array], '<f8': ['float64', Float64Array],
                 '|b1': ['bool', Uint8Array] };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${file}: Fortran order`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map(s => s.trim())
    .filter(s => s).map(Number);
  const body = buf.subarray(start + hlen);
  if (/^<U\d+$/.test(descr)) return new ort.Tensor('string', readUnicode(body, descr), shape);
  const entry = DTYPES[descr];
  if (!entry) throw new Error(`${file}: dtype ${descr} is not handled`);
  const [type, Arr] = entry;
  const data = new Arr(body.buffer.slice(body.byteOffset, body.byteOffset + body.length));
  return new ort.Tensor(type, data, shape);
}

// numpy's '<Un' strings (the string-operator tests): n UTF-32LE code units per element,
// NUL-padded
function readUnicode(body, descr) {
  const n = Number(descr.slice(2)), out = [];
  for (let at = 0; at + 4 * n <= body.length; at += 4 * n) {
    let s = '';
    for (let k = 0; k < n; k++) {
      const cp = body.readUInt32LE(at + 4 * k);
      if (cp === 0) break;
      s += String.fromCodePoint(cp);
    }
    out.push(s);
  }
  return out;
}

function unicodeBody(strings) {
  const cps = strings.map(s => Array.from(s, c => c.codePointAt(0)));
  const n = Math.max(1, ...cps.map(c => c.length));
  const body = Buffer.alloc(4 * n * strings.length);
  cps.forEach((c, i) => c.forEach((cp, k) => body.writeUInt32LE(cp, 4 * (n * i + k))));
  return [`<U${n}`, body];
}

function writeNpy(file, tensor) {
  let descr = Object.keys(DTYPES).find(k => DTYPES[k][0] === tensor.type), strings = null;
  if (tensor.type === 'string') [descr, strings] = unicodeBody(tensor.data);
  if (!descr) throw new Error(`output type ${tensor.type} is not handled`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n'; // 64-byte aligned data
  const head = Buffer.alloc(10);
  Buffer.from('\x93NUMPY', 'latin1').copy(head, 0);
  head[6] = 1; head[7] = 0; head.writeUInt16LE(header.length, 8);
  const data = strings ||
    Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const [model, inDir, outDir, level = 'all'] = process.argv.slice(2);
  if (!outDir) throw new Error('usage: ort_run.js MODEL.onnx IN_DIR OUT_DIR [disabled|all]');
  const session = await ort.InferenceSession.create(model, {
    graphOptimizationLevel: level, intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = {};
  for (const name of session.inputNames) feeds[name] = readNpy(path.join(inDir, `${name}.npy`));
  const outs = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) writeNpy(path.join(outDir, `${name}.npy`), outs[name]);
}

main().catch(e => { console.error(`ort_run: ${e.message}`); process.exit(1); });
