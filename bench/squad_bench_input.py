"""Makes the inputs of bench/run_squad_features.sh from one SQuAD file: its articles repeated
`repeat` times (question ids suffixed "_r<k>"), as a prediction file (every answer kept) and a
training file (the first answer of each answerable question only: read_squad_examples accepts
exactly one for training).

  squad_bench_input.py SOURCE.json REPEAT PREDICT_OUT.json TRAIN_OUT.json
"""
import copy
import json
import sys


def main():
    source, repeat, predict_out, train_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(source, encoding="utf-8") as f:
        squad = json.load(f)
    data = []
    for k in range(repeat):
        for article in copy.deepcopy(squad["data"]):
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    qa["id"] = f"{qa['id']}_r{k}"
            data.append(article)
    with open(predict_out, "w", encoding="utf-8") as f:
        json.dump({"version": squad.get("version", ""), "data": data}, f, ensure_ascii=False)
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["answers"] = qa["answers"][:1]
    with open(train_out, "w", encoding="utf-8") as f:
        json.dump({"version": squad.get("version", ""), "data": data}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
