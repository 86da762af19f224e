// transformers.js (@lenml/tokenizers) on a tokenizer folder of our own (tokenizer.json +
// tokenizer_config.json), for the tests that derive tokenizers from the npm ones
// (tok_hf_components.py): for each string of a JSON list, the ids it encodes to without
// added special tokens and the text they decode to (special tokens rendered, no clean-up).
// Prints one JSON list of {ids, text}.
//   usage: node tok_json_transformersjs.js NODE_MODULES_DIR TOKENIZER_DIR STRINGS.json
const fs = require('fs');
const path = require('path');
const [modules, dir, stringsFile] = process.argv.slice(2);
const { TokenizerLoader } = require(path.resolve(modules, '@lenml', 'tokenizers'));
const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: read('tokenizer.json'), tokenizerConfig: read('tokenizer_config.json') });
const out = [];
for (const text of JSON.parse(fs.readFileSync(stringsFile, 'utf8'))) {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const back = ids.length ? tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
  out.push({ ids, text: back });
}
process.stdout.write(JSON.stringify(out));
