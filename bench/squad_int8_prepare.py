"""The SQuAD files of bench/README.md's "SQuAD F1 in int8": a training set cut from a
truncated copy of SQuAD 1.1's train-v1.1.json, and the answerable questions of the project's
SQuAD 2.0 dev sample as a v1.1 file.

  python3 bench/squad_int8_prepare.py TRAIN_TRUNCATED.json OUT_DIR

TRAIN_TRUNCATED.json: train-v1.1.json as committed at ermeba/jupiter_bert @ 6bed297d
(`git show 6bed297d:train-v1.1.json`), the first 1,280,000 bytes of the official file, which
end inside an article. Kept: every article that ends before the cut (11 articles, 3807
questions, from University_of_Notre_Dame to 2008_Sichuan_earthquake). Writes
OUT_DIR/train_part.json and OUT_DIR/dev5_v1.json (tests/data/squad/squad2_dev_first5.json's
705 answerable questions, 5 articles none of which is in the training set). Standard library
only."""
import json
import os
import sys


def complete_articles(text):
    # an article ends with '}]}' (its last paragraph's qas list, the paragraph, the list) and
    # the next one starts '{"title"'; cut after the last such boundary and close the file
    end = text.rfind(']}, {"title"')
    if end < 0:
        sys.exit("no complete article before the cut")
    return json.loads(text[: end + 2] + '], "version": "1.1"}')


def answerable_v1(path):
    data = json.load(open(path, encoding="utf-8"))
    out = []
    for article in data["data"]:
        paragraphs = []
        for p in article["paragraphs"]:
            qas = [{k: q[k] for k in ("id", "question", "answers")} for q in p["qas"] if not q.get("is_impossible")]
            if qas:
                paragraphs.append({"context": p["context"], "qas": qas})
        out.append({"title": article["title"], "paragraphs": paragraphs})
    return {"version": "1.1", "data": out}


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    train = complete_articles(open(sys.argv[1], encoding="utf-8").read())
    here = os.path.dirname(os.path.abspath(__file__))
    dev = answerable_v1(os.path.join(here, "..", "tests", "data", "squad", "squad2_dev_first5.json"))
    train_titles = {a["title"] for a in train["data"]}
    assert not train_titles & {a["title"] for a in dev["data"]}
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, obj in (("train_part.json", train), ("dev5_v1.json", dev)):
        json.dump(obj, open(os.path.join(sys.argv[2], name), "w", encoding="utf-8"))
        n = sum(len(p["qas"]) for a in obj["data"] for p in a["paragraphs"])
        print(f"{name}: {len(obj['data'])} articles, {n} questions")


main()
