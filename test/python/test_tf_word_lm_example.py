"""examples/tf_word_lm.py (the LSTM LM of torch_word_lm.py in TensorFlow, on the fortunes
text) runs a few steps per scheme on two ranks under the .venv-tf python: the loss falls,
every scheme gives the same loss, and the sparse schemes move fewer embedding bytes than the
dense one (the embedding's tf.IndexedSlices gradient takes Zen's sparse path).

Run by CTest as python_tf_example, after the zen_tf fixture (tools/build-tf); the ranks'
python is ZENTEST_TF_PYTHON (default .venv-tf/bin/python).
"""

import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZENRUN = os.path.join(ROOT, "tools", "zenrun")
PYTHON = os.environ.get("ZENTEST_TF_PYTHON", os.path.join(ROOT, ".venv-tf", "bin", "python"))
SCHEMES = ["zen", "agsparse", "dense"]

if not os.path.exists(PYTHON):
    pytest.fail("no TensorFlow venv at %s: run tools/setup" % PYTHON, pytrace=False)
if not os.path.exists(os.path.join(ROOT, "bindings", "python", "zen", "tensorflow",
                                   "_zen_tf_ops.so")):
    pytest.fail("zen.tensorflow is not built here: run tools/build-tf", pytrace=False)


def test_tf_word_lm_example():
    if not os.path.isdir("/usr/share/games/fortunes"):
        pytest.skip("Debian's fortunes package is not installed (tools/setup)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZEN_", "ZENRUN_"))}
    env.update({"ZEN_STALL_CHECK_TIME_SECONDS": "5", "ZEN_STALL_SHUTDOWN_TIME_SECONDS": "20",
                "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": os.path.join(ROOT, "bindings",
                                                                         "python")})
    proc = subprocess.run([ZENRUN, "-np", "2", PYTHON,
                           os.path.join(ROOT, "examples", "tf_word_lm.py"),
                           "--steps", "3", "--schemes", ",".join(SCHEMES), "--vocab", "2000",
                           "--print-every", "1"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    steps, table = {}, {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^\[0\]<stdout>:\[(\w+)\] step +(\d+)  loss ([0-9.]+)", line)
        if m:
            steps.setdefault(m.group(1), []).append(float(m.group(3)))
        m = re.match(r"^\[0\]<stdout>:(zen|agsparse|dense)\s+([0-9.]+)\s+[0-9]+\s+[0-9.]+"
                     r"\s+([0-9.]+)", line)
        if m:
            table[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    assert sorted(table) == sorted(SCHEMES), proc.stdout[-4000:]
    for scheme in SCHEMES:
        assert len(steps[scheme]) == 3 and steps[scheme][-1] < steps[scheme][0], steps
    assert len({loss for loss, _ in table.values()}) == 1, table
    assert table["zen"][1] < table["dense"][1] and table["agsparse"][1] < table["dense"][1]
