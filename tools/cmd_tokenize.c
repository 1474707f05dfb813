/* `est tokenize --vocab_file=F [--do_lower_case=B] [--output=tokens|ids]`: BERT's
 * FullTokenizer as a filter; `est tokenize --tokenizer_file=tokenizer.json [--pair]
 * [--max_length=N --truncation=S --stride=K] [--output=json|ids|tokens]`: HuggingFace
 * `tokenizers`' Tokenizer.encode (docs/tokenizer.md §8); with --decode, Tokenizer.decode of
 * lines of ids (§8.2).
 *
 * The vocab_file form: one input per stdin line ('\n' separated), one output line each:
 * WordPiece tokens or their ids, separated by single spaces (an empty line for no tokens).
 * A '\r' before the '\n' is left in the text: the tokenizer treats it as whitespace, as the
 * reference would, so CRLF input gives the same tokens as LF input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "est/flags.h"
#include "est/tokenizer.h"

static const char *USAGE =
    "usage: est tokenize --vocab_file=vocab.txt [--do_lower_case=true|false] [--output=tokens|ids] < text\n\n"
    "Tokenizes each line of standard input with BERT's FullTokenizer (tokenization.py) and prints\n"
    "one line per input line: the WordPiece tokens, or their vocab ids, separated by spaces.\n"
    "Lines end at '\\n' only; a '\\r' before it is whitespace to the tokenizer, so CRLF input gives\n"
    "the same tokens. Invalid UTF-8 bytes are dropped, as the reference's decode(errors=\"ignore\").\n\n"
    "   or: est tokenize --tokenizer_file=tokenizer.json [--pair] [--max_length=N\n"
    "         --truncation=longest_first|only_first|only_second [--stride=K]] [--output=json|ids|tokens] < text\n\n"
    "Prints what HuggingFace tokenizers' Tokenizer.encode(line) gives (with special tokens; the file's\n"
    "own truncation and padding apply unless --max_length overrides the truncation). --pair reads\n"
    "text_a<TAB>text_b lines. --output=json prints one object a line: ids, tokens, type_ids,\n"
    "attention_mask, special_tokens_mask and offsets (code points of the input, of text_b for its tokens),\n"
    "and \"overflowing\": [the same for each window truncation left out] when there are any\n"
    "(Encoding.overflowing: --stride=K tokens repeat from one window to the next).\n\n"
    "   or: est tokenize --tokenizer_file=tokenizer.json --decode [--skip_special_tokens] [--output=json] < ids\n\n"
    "Prints Tokenizer.decode(ids) for each line of space-separated ids, through the file's decoder: the\n"
    "text, or with --output=json the text as a JSON string (so a decoded newline stays on its line).\n";

static void put_json_bytes(const char *s, size_t n) {
  putchar_unlocked('"');
  for (const char *end = s + n; s < end; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') putchar_unlocked('\\'), putchar_unlocked((int)c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar_unlocked((int)c);
  }
  putchar_unlocked('"');
}

static void put_json_string(const char *s) { put_json_bytes(s, strlen(s)); }

static void put_ints(const char *name, const int32_t *v, size_t n, bool first) {
  printf("%s\"%s\":[", first ? "" : ",", name);
  for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", v[i]);
  putchar_unlocked(']');
}

/* --decode: one text a line of ids. */
static int decode_lines(est_tokenizer *tok, bool json, bool skip_special) {
  char *line = NULL;
  size_t cap = 0, lineno = 0, nid = 0, idcap = 0;
  int32_t *ids = NULL;
  ssize_t len;
  int rc = 0;
  while (rc == 0 && (len = getline(&line, &cap, stdin)) >= 0) {
    lineno++;
    nid = 0;
    for (char *p = line, *end; rc == 0; p = end) {
      while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
      if (!*p) break;
      long v = strtol(p, &end, 10);
      if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ' ' && *end != '\t' && *end != '\r' && *end != '\n')) {
        fprintf(stderr, "est tokenize: line %zu: --decode expects space-separated non-negative ids\n", lineno);
        rc = 1;
        break;
      }
      if (nid == idcap) {
        idcap = idcap ? 2 * idcap : 64;
        int32_t *q = realloc(ids, idcap * sizeof *q);
        if (!q) {
          fprintf(stderr, "est tokenize: out of memory\n");
          rc = 1;
          break;
        }
        ids = q;
      }
      ids[nid++] = (int32_t)v;
    }
    if (rc) break;
    char *text;
    size_t tlen;
    if (est_tokenizer_decode(tok, ids, nid, skip_special, &text, &tlen) != EST_OK) {
      fprintf(stderr, "est tokenize: line %zu: %s\n", lineno, est_error_message());
      rc = 1;
      break;
    }
    if (json) put_json_bytes(text, tlen);
    else fwrite(text, 1, tlen, stdout);
    putchar_unlocked('\n');
    free(text);
  }
  free(ids);
  free(line);
  return rc;
}

/* An Encoding's fields as JSON, from '{' up to its closing '}' (left to the caller). */
static void put_encoding(const est_encoding *e) {
  putchar_unlocked('{');
  put_ints("ids", e->ids, e->n, true);
  fputs(",\"tokens\":[", stdout);
  for (size_t i = 0; i < e->n; i++) {
    if (i) putchar_unlocked(',');
    put_json_string(e->tokens[i]);
  }
  putchar_unlocked(']');
  put_ints("type_ids", e->type_ids, e->n, false);
  put_ints("attention_mask", e->attention_mask, e->n, false);
  put_ints("special_tokens_mask", e->special_tokens_mask, e->n, false);
  fputs(",\"offsets\":[", stdout);
  for (size_t i = 0; i < e->n; i++) printf(i ? ",[%d,%d]" : "[%d,%d]", e->offset_start[i], e->offset_end[i]);
  putchar_unlocked(']');
}

/* --tokenizer_file: one encoding a line. */
static int encode_lines(est_tokenizer *tok, const char *output, bool pair) {
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t len;
  int rc = 0;
  while ((len = getline(&line, &cap, stdin)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') len--;
    const char *b = NULL;
    size_t alen = (size_t)len, blen = 0;
    if (pair) {
      char *tab = memchr(line, '\t', (size_t)len);
      if (!tab) {
        fprintf(stderr, "est tokenize: line %zu: --pair expects text_a<TAB>text_b\n", lineno);
        rc = 1;
        break;
      }
      alen = (size_t)(tab - line);
      b = tab + 1;
      blen = (size_t)len - alen - 1;
    }
    est_encoding e;
    if (est_tokenizer_encode_pair(tok, line, alen, b, blen, true, &e) != EST_OK) {
      fprintf(stderr, "est tokenize: line %zu: %s\n", lineno, est_error_message());
      rc = 1;
      break;
    }
    if (!strcmp(output, "json")) {
      put_encoding(&e);
      size_t nover = est_tokenizer_num_overflowing(tok);
      if (nover) fputs(",\"overflowing\":[", stdout);
      for (size_t k = 0; k < nover; k++) {
        est_encoding o;
        est_tokenizer_overflowing(tok, k, &o);
        if (k) putchar_unlocked(',');
        put_encoding(&o);
        putchar_unlocked('}');
      }
      puts(nover ? "]}" : "}");
      continue;
    }
    bool ids = !strcmp(output, "ids");
    for (size_t i = 0; i < e.n; i++) {
      if (i) putchar_unlocked(' ');
      if (ids) printf("%d", e.ids[i]);
      else fputs(e.tokens[i], stdout);
    }
    putchar_unlocked('\n');
  }
  free(line);
  return rc;
}

int est_cmd_tokenize(int argc, char **argv) {
  const char *vocab_file = NULL, *output = "tokens", *tokenizer_file = NULL, *truncation = NULL;
  bool lower = true, pair = false, decode = false, skip_special = false;
  int64_t max_length = -1, stride = 0;
  est_flag flags[] = {
    EST_FLAG_STRING("vocab_file", &vocab_file, "The WordPiece vocabulary (one token per line).", 0),
    EST_FLAG_STRING("tokenizer_file", &tokenizer_file, "A HuggingFace tokenizer.json (instead of --vocab_file).", 0),
    EST_FLAG_BOOL("pair", &pair, "Lines are text_a<TAB>text_b (--tokenizer_file).", 0),
    EST_FLAG_BOOL("decode", &decode, "Lines are ids; print Tokenizer.decode (--tokenizer_file).", 0),
    EST_FLAG_BOOL("skip_special_tokens", &skip_special, "With --decode: leave the special tokens out.", 0),
    EST_FLAG_INT("max_length", &max_length, "Truncate to this many tokens (--tokenizer_file; -1: the file's).", 0),
    EST_FLAG_STRING("truncation", &truncation, "longest_first, only_first or only_second (with --max_length).", 0),
    EST_FLAG_INT("stride", &stride, "Truncation stride (with --max_length).", 0),
    EST_FLAG_BOOL("do_lower_case", &lower, "Lower-case and strip accents (true for uncased models).", 0),
    EST_FLAG_STRING("output", &output, "What to print per line: tokens or ids (json with --tokenizer_file).", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  int rc = est_cli_parse("tokenize", USAGE, flags, nflags, argc, argv, NULL, NULL, 0, 1);
  if (rc >= 0) return rc;
  if (!vocab_file == !tokenizer_file) {
    fprintf(stderr, "est tokenize: give one of --vocab_file or --tokenizer_file\n");
    return 2;
  }
  if (tokenizer_file) {
    if (strcmp(output, "json") && strcmp(output, "ids") && strcmp(output, "tokens")) {
      fprintf(stderr, "est tokenize: --output=%s: expected json, ids or tokens\n", output);
      return 2;
    }
    if ((truncation || stride) && max_length < 0) {
      fprintf(stderr, "est tokenize: --truncation and --stride go with --max_length\n");
      return 2;
    }
    est_truncation_strategy strategy = EST_TRUNCATE_LONGEST_FIRST;
    if (truncation && !strcmp(truncation, "only_first")) strategy = EST_TRUNCATE_ONLY_FIRST;
    else if (truncation && !strcmp(truncation, "only_second")) strategy = EST_TRUNCATE_ONLY_SECOND;
    else if (truncation && strcmp(truncation, "longest_first")) {
      fprintf(stderr, "est tokenize: --truncation=%s: expected longest_first, only_first or only_second\n", truncation);
      return 2;
    }
    if (stride < 0) {
      fprintf(stderr, "est tokenize: --stride=%lld must be >= 0\n", (long long)stride);
      return 2;
    }
    est_tokenizer *tok;
    if (est_tokenizer_from_json(&tok, tokenizer_file) != EST_OK) {
      fprintf(stderr, "est tokenize: %s\n", est_error_message());
      return 1;
    }
    if (max_length >= 0) {
      est_truncation *t = est_tokenizer_truncation(tok);
      bool left = t->enabled && t->left;
      *t = (est_truncation){.enabled = true, .max_length = (size_t)max_length, .strategy = strategy,
                            .stride = (size_t)stride, .left = left};
    }
    if (decode && (pair || max_length >= 0 || !strcmp(output, "ids"))) {
      fprintf(stderr, "est tokenize: --decode takes no --pair, --max_length or --output=ids\n");
      est_tokenizer_free(tok);
      return 2;
    }
    rc = decode ? decode_lines(tok, !strcmp(output, "json"), skip_special) : encode_lines(tok, output, pair);
    est_tokenizer_free(tok);
    if (fflush(stdout) != 0) {
      perror("est tokenize: writing output");
      rc = 1;
    }
    return rc;
  }
  if (pair || max_length >= 0 || truncation || decode || skip_special) {
    fprintf(stderr, "est tokenize: --pair, --max_length, --truncation and --decode need --tokenizer_file\n");
    return 2;
  }
  bool ids_out = !strcmp(output, "ids");
  if (!ids_out && strcmp(output, "tokens")) {
    fprintf(stderr, "est tokenize: --output=%s: expected tokens or ids\n", output);
    return 2;
  }
  est_tokenizer *tok;
  if (est_tokenizer_open_any(&tok, vocab_file, lower) != EST_OK) {
    fprintf(stderr, "est tokenize: %s\n", est_error_message());
    return 1;
  }
  const est_vocab *v = est_tokenizer_vocab(tok);
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t len;
  rc = 0;
  while ((len = getline(&line, &cap, stdin)) >= 0) {
    lineno++;
    if (len > 0 && line[len - 1] == '\n') len--;
    const int32_t *ids;
    size_t n;
    if (est_tokenizer_encode(tok, line, (size_t)len, &ids, &n) != EST_OK) {
      fprintf(stderr, "est tokenize: line %zu: %s\n", lineno, est_error_message());
      rc = 1;
      break;
    }
    for (size_t i = 0; i < n; i++) {
      if (i) putchar_unlocked(' ');
      if (!ids_out) {
        const char *t = v ? est_vocab_token(v, ids[i]) : est_tokenizer_id_to_token(tok, ids[i]);
        fputs(t ? t : "", stdout);
      } else if (ids[i] == EST_TOKEN_UNK_MISSING) {
        fflush(stdout);
        fprintf(stderr, "est tokenize: line %zu: token [UNK] is not in vocab %s (no id to print)\n", lineno,
                vocab_file);
        rc = 1;
        goto done;
      } else {
        /* ids are small and non-negative: a hand-rolled itoa beats printf here. */
        char buf[12];
        int k = 12;
        uint32_t x = (uint32_t)ids[i];
        do buf[--k] = (char)('0' + x % 10); while ((x /= 10) != 0);
        fwrite(buf + k, 1, (size_t)(12 - k), stdout);
      }
    }
    putchar_unlocked('\n');
  }
done:
  free(line);
  est_tokenizer_free(tok);
  if (fflush(stdout) != 0) {
    perror("est tokenize: writing output");
    rc = 1;
  }
  return rc;
}
