// HuggingFace `tokenizers` side of bench_tokenizer.sh: a BertWordPieceTokenizer (BERT
// normalizer with lower-casing + accent stripping, BERT pre-tokenizer, WordPiece with the same
// vocab and max_input_chars_per_word 200 like Google's reference; no [CLS]/[SEP]) on one
// thread (RAYON_NUM_THREADS=1). Times encodeBatch over all sentences, best of REPEATS.
//
//   node bench_tokenizer_hf.js VOCAB SENTENCES IDS_OUT [REPEATS]
const fs = require('fs');
const tk = require('tokenizers');

async function main() {
  const [vocabFile, sentFile, idsOut, rep] = process.argv.slice(2);
  const repeats = rep ? parseInt(rep, 10) : 5;
  const model = await tk.WordPiece.fromFile(vocabFile, { unkToken: '[UNK]', maxInputCharsPerWord: 200 });
  const tok = new tk.Tokenizer(model);
  tok.setNormalizer(tk.bertNormalizer({ cleanText: true, handleChineseChars: true, stripAccents: true, lowercase: true }));
  tok.setPreTokenizer(tk.bertPreTokenizer());
  const text = fs.readFileSync(sentFile, 'utf8');
  let lines = text.split('\n');
  if (text.endsWith('\n')) lines.pop();
  let best = 1e30, encs = null;
  for (let r = 0; r < repeats; r++) {
    const t0 = process.hrtime.bigint();
    encs = await tok.encodeBatch(lines, { addSpecialTokens: false });
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    if (dt < best) best = dt;
  }
  let nids = 0;
  const out = encs.map((e) => { const ids = e.getIds(); nids += ids.length; return ids.join(' '); });
  fs.writeFileSync(idsOut, out.join('\n') + '\n');
  const bytes = Buffer.byteLength(text);
  console.log(`hf:  ${lines.length} sentences, ${bytes} bytes, ${nids} ids: best of ${repeats} ${best.toFixed(4)} s = ` +
              `${Math.round(lines.length / best)} sentences/s, ${(bytes / best / 1e6).toFixed(1)} MB/s`);
}
main().catch((e) => { console.error(e); process.exit(1); });
