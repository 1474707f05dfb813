#!/usr/bin/env python3
"""Goldens for est squad_eval (developer tool; `make test` does not run it).

Runs the official SQuAD evaluation scripts, unchanged, as programs (`python SCRIPT args`) on
the evaluation fixtures of tests/data/squad/ and records, per run, the arguments, what the
script printed on stdout, the lines it printed on stderr before any traceback, the last line
of the traceback when it failed (its exception), its exit code, and the --out-file it wrote.
The interpreter running this file runs the scripts: the f1 sums of evaluate-v2.0.py depend
on the Python version (docs/squad.md section 4.4), so one golden is written per version.

usage: PYTHON tests/reference/squad_eval_reference.py EVALUATE_V1_1 EVALUATE_V2_0 tests/data/squad \
           > tests/data/squad/eval_golden_pyXY.json
(PYTHON needs numpy, which evaluate-v2.0.py imports.)
"""
import json
import os
import subprocess
import sys
import tempfile

# (name, script, data, predictions, extra arguments)
RUNS = [
    ("v1", "v1.1", "eval_v1.json", "eval_v1_preds.json", []),
    ("v1-version-1.0", "v1.1", "eval_v1_version_1_0.json", "eval_v1_preds.json", []),
    ("v1-no-version", "v1.1", "allennlp_squad.json", "eval_v1_preds.json", []),
    ("v1-on-v2-data", "v1.1", "eval_v2.json", "eval_v2_preds.json", []),
    ("v1-pred-not-string", "v1.1", "eval_v1.json", "eval_v1_preds_not_string.json", []),
    ("v2", "v2.0", "eval_v2.json", "eval_v2_preds.json", []),
    ("v2-na", "v2.0", "eval_v2.json", "eval_v2_preds.json", ["--na-prob-file", "eval_v2_na.json"]),
    ("v2-na-int", "v2.0", "eval_v2.json", "eval_v2_preds.json",
     ["--na-prob-file", "eval_v2_na_int.json", "--na-prob-thresh", "5"]),
    ("v2-na-thresh-0.5", "v2.0", "eval_v2.json", "eval_v2_preds.json",
     ["--na-prob-file", "eval_v2_na.json", "--na-prob-thresh", "0.5"]),
    # Under 3.12 / 3.13 sum() adds the no-answer F1s (int 1) plainly after the floats: this
    # threshold is where compensating them too (as 3.14 does) would print another last digit.
    ("v2-na-thresh-0.3", "v2.0", "eval_v2.json", "eval_v2_preds.json",
     ["--na-prob-file", "eval_v2_na.json", "--na-prob-thresh", "0.3"]),
    ("v2-thresh-0-no-na", "v2.0", "eval_v2.json", "eval_v2_preds.json", ["--na-prob-thresh", "-1"]),
    ("v2-na-out-file", "v2.0", "eval_v2.json", "eval_v2_preds.json",
     ["--na-prob-file", "eval_v2_na.json", "--out-file", "OUT"]),
    ("v2-on-v1-data", "v2.0", "eval_v1.json", "eval_v1_preds.json", []),
    ("v2-on-v1-data-complete", "v2.0", "eval_v1_version_1_0.json", "eval_v1_preds.json", []),
    ("v2-allennlp", "v2.0", "allennlp_squad2.json", "eval_v2_preds.json", []),
    ("v2-missing", "v2.0", "eval_v2.json", "eval_v2_preds_missing.json", []),
    ("v2-pred-not-string", "v2.0", "eval_v2.json", "eval_v2_preds_not_string.json", []),
    ("v2-na-missing", "v2.0", "eval_v2.json", "eval_v2_preds.json", ["--na-prob-file", "eval_v2_na_missing.json"]),
    ("v2-na-not-number", "v2.0", "eval_v2.json", "eval_v2_preds.json",
     ["--na-prob-file", "eval_v2_na_not_number.json"]),
]


def main():
    scripts = {"v1.1": sys.argv[1], "v2.0": sys.argv[2]}
    data_dir = sys.argv[3]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "eval.json")
        for name, script, data, pred, extra in RUNS:
            args = [os.path.join(data_dir, a) if a.endswith(".json") else (out_path if a == "OUT" else a)
                    for a in extra]
            p = subprocess.run([sys.executable, scripts[script], os.path.join(data_dir, data),
                                os.path.join(data_dir, pred)] + args, capture_output=True, text=True)
            stderr = p.stderr
            exception = None
            if "Traceback (most recent call last):" in stderr:
                stderr, tb = stderr.split("Traceback (most recent call last):", 1)
                exception = tb.strip().splitlines()[-1]
            out_text = None
            if os.path.exists(out_path):
                with open(out_path) as f:
                    out_text = f.read()
                os.remove(out_path)
            runs.append({"name": name, "script": script, "data": data, "pred": pred, "extra": extra,
                         "rc": p.returncode, "stdout": p.stdout, "stderr": stderr.splitlines(),
                         "exception": exception, "out_file": out_text})
    json.dump({"generator": "tests/reference/squad_eval_reference.py", "python": sys.version.split()[0],
               "runs": runs}, sys.stdout, ensure_ascii=True, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
