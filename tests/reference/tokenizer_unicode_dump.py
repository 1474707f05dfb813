#!/usr/bin/env python3
"""CPython's side of tokenizer_unicode_dump.c (see there). The sigma probes read Python's
Case_Ignorable exactly, and Cased for code points that are not case-ignorable (the only
ones str.lower()'s final-sigma rule can observe)."""
import unicodedata, sys
sys.path.insert(0, __import__('os').path.dirname(__file__))
import bert_tokenizer_ref as r
out=[]
for c in range(0x110000):
    if 0xD800<=c<=0xDFFF: continue
    ch=chr(c)
    ign = ("A"+ch+"\u03a3").lower()[-1]=='\u03c2' and not ((ch+"\u03a3").lower()[-1]=='\u03c2')
    # "A" c SIGMA is final iff c is ignorable or cased; c SIGMA iff cased and not ignorable
    cased_ni = (ch+"\u03a3").lower()[-1]=='\u03c2'
    low=ch.lower()
    nfd=''.join(x for x in unicodedata.normalize('NFD',low) if unicodedata.category(x)!='Mn')
    out.append("%X %d%d%d%d%d %d %s %s"%(c, ch.isspace(), r.is_whitespace(ch), r.is_control(ch), r.is_punctuation(ch), ign, cased_ni, ''.join('%X.'%ord(x) for x in low), ''.join('%X.'%ord(x) for x in nfd)))
print("\n".join(out))
