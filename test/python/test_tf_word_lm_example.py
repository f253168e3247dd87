"""examples/tf_word_lm.py (the LSTM LM of torch_word_lm.py in TensorFlow, on the fortunes
text) runs a few steps per scheme on two ranks under the .venv-tf python: the loss falls,
every scheme gives the same loss, and the sparse schemes move fewer embedding bytes than the
dense one (the embedding's tf.IndexedSlices gradient takes Zen's sparse path).

Run by CTest as python_tf_example, after the zen_tf fixture (tools/build-tf); the ranks'
python is ZENTEST_TF_PYTHON (default .venv-tf/bin/python).
"""

from rank_jobs import (STALL, TF_PYTHON, assert_word_lm_table, require_zen_tensorflow,
                       run_word_lm, steps)

SCHEMES = ["zen", "agsparse", "dense"]

require_zen_tensorflow()


def test_tf_word_lm_example():
    proc = run_word_lm(TF_PYTHON, "tf_word_lm.py", SCHEMES,
                       extra_env=dict(STALL, TF_CPP_MIN_LOG_LEVEL="2"))
    losses = {scheme: [loss for _, loss in got] for scheme, got in steps(proc).items()}
    assert_word_lm_table(proc, SCHEMES)
    for scheme in SCHEMES:
        assert len(losses[scheme]) == 3 and losses[scheme][-1] < losses[scheme][0], losses
