/* Developer check (not part of `make test`): prints, for every Unicode scalar value, what
 * est's tokenizer computes with utf8proc -- Python isspace(), _is_whitespace, _is_control,
 * _is_punctuation, Case_Ignorable, Cased-and-not-ignorable, str.lower(), and NFD with Mn
 * removed -- in the same format as tokenizer_unicode_dump.py prints CPython's answers.
 *
 *   gcc -O2 -Iinclude -Isrc tests/reference/tokenizer_unicode_dump.c \
 *       src/text/unicode.c -lutf8proc -o /tmp/ucdump && /tmp/ucdump > /tmp/c.txt
 *   python3 tests/reference/tokenizer_unicode_dump.py > /tmp/py.txt
 *   diff /tmp/c.txt /tmp/py.txt   # expect differences only on code points new in Unicode 15
 *
 * Last run (utf8proc 2.8.0 / CPython 3.11.7, Unicode 14.0.0): 134 differing lines, all of them
 * code points unassigned in Unicode 14.0; 0 differences on assigned code points. */
#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include "est/tokenizer.h"
#include "text/unicode.h"
int main(void){
  for (uint32_t c=0;c<=0x10FFFF;c++){
    if (c>=0xD800&&c<=0xDFFF) continue;
    uint32_t low[4], nfd[32]; size_t m=tok_lower(&c,1,low,true); size_t k=tok_nfd_strip_mn(low,m,nfd);
    printf("%X %d%d%d%d%d", c, tok_py_isspace(c), est_tok_is_whitespace(c), est_tok_is_control(c), est_tok_is_punctuation(c), tok_is_case_ignorable(c));
    printf(" %d", tok_is_cased(c) && !tok_is_case_ignorable(c));
    printf(" "); for(size_t i=0;i<m;i++) printf("%X.", low[i]);
    printf(" "); for(size_t i=0;i<k;i++) printf("%X.", nfd[i]);
    printf("\n");
  }
}
