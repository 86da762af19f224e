// llama.cpp peer measurement through node-llama-cpp (prebuilt llama.cpp CPU libraries), in
// the manner of llama-bench: prompt processing of N_PROMPT tokens in one batch (pp) and
// decoding of N_GEN tokens one at a time (tg), median of REPS runs after one warm-up.
//
//   node llamacpp_bench.mjs MODEL.gguf THREADS [N_PROMPT=128] [N_GEN=64] [REPS=3]
//
// Prints one JSON line: {model, threads, pp_tps, tg_tps, llama_cpp}. Decoding goes through
// sequence.evaluate with greedy sampling, so each token also pays an argmax over the
// vocabulary and a JavaScript hop (well under 1 % of a step for these models).
// LLAMAPEER names the folder whose node_modules holds node-llama-cpp (default
// /tmp/llamapeer; bench/llm/vs_llamacpp.sh installs it there).
import { pathToFileURL } from "node:url";

const peer = process.env.LLAMAPEER ?? "/tmp/llamapeer";
const { getLlama, LlamaLogLevel } = await import(
  pathToFileURL(`${peer}/node_modules/node-llama-cpp/dist/index.js`).href);

const [model, threadsArg, nPromptArg, nGenArg, repsArg] = process.argv.slice(2);
if (!model || !threadsArg) {
  console.error("usage: node llamacpp_bench.mjs MODEL.gguf THREADS [N_PROMPT] [N_GEN] [REPS]");
  process.exit(2);
}
const threads = Number(threadsArg);
const nPrompt = Number(nPromptArg ?? 128);
const nGen = Number(nGenArg ?? 64);
const reps = Number(repsArg ?? 3);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;

// fixed pseudo-random prompt ids below nVocab (3.. skips the llama control tokens)
function promptIds(n, nVocab) {
  let s = 12345;
  return Array.from({ length: n }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return 3 + (s % (nVocab - 3));
  });
}

async function timePrompt(sequence, ids) {
  await sequence.clearHistory();
  const t0 = process.hrtime.bigint();
  await sequence.evaluateWithoutGeneratingNewTokens(ids);
  return ids.length / seconds(t0);
}

async function timeDecode(sequence, first) {
  await sequence.clearHistory();
  const it = sequence.evaluate([first], { temperature: 0 });
  await it.next(); // the first token also evaluates the 1-token prompt: not timed
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < nGen; i++) await it.next();
  const tps = nGen / seconds(t0);
  await it.return();
  return tps;
}

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error,
                               maxThreads: 0 });
const m = await llama.loadModel({ modelPath: model, gpuLayers: 0, useMmap: true });
const ctx = await m.createContext({ contextSize: 1024, batchSize: Math.max(512, nPrompt),
                                    threads, sequences: 1, flashAttention: false });
const seq = ctx.getSequence();
const ids = promptIds(nPrompt, 1000); // any vocabulary has 1000 tokens; ids do not change speed
const pp = [], tg = [];
for (let r = 0; r <= reps; r++) {
  const p = await timePrompt(seq, ids);
  const g = await timeDecode(seq, ids[0]);
  if (r > 0) { pp.push(p); tg.push(g); } // run 0 warms caches and page-faults the mapping
}
console.log(JSON.stringify({ model, threads, n_prompt: nPrompt, n_gen: nGen,
                             pp_tps: median(pp), tg_tps: median(tg),
                             llama_cpp: llama.llamaCppRelease ?? null }));
await ctx.dispose();
await m.dispose();
await llama.dispose();
