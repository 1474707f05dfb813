/* `est tokenize --vocab_file=F [--do_lower_case=B] [--output=tokens|ids]`: BERT's
 * FullTokenizer as a filter. One input per stdin line ('\n' separated), one output line each:
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
    "the same tokens. Invalid UTF-8 bytes are dropped, as the reference's decode(errors=\"ignore\").\n";

int est_cmd_tokenize(int argc, char **argv) {
  const char *vocab_file = NULL, *output = "tokens";
  bool lower = true;
  est_flag flags[] = {
    EST_FLAG_STRING("vocab_file", &vocab_file, "The WordPiece vocabulary (one token per line).", 1),
    EST_FLAG_BOOL("do_lower_case", &lower, "Lower-case and strip accents (true for uncased models).", 0),
    EST_FLAG_STRING("output", &output, "What to print per line: tokens or ids.", 0),
  };
  const int nflags = (int)(sizeof flags / sizeof *flags);
  int rc = est_cli_parse("tokenize", USAGE, flags, nflags, argc, argv, NULL, NULL, 0, 1);
  if (rc >= 0) return rc;
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
        fputs(est_vocab_token(v, ids[i]), stdout);
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
