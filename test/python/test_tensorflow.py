"""Tests of zen.tensorflow (bindings/python/zen/tensorflow, bindings/tensorflow): real ranks
launched by tools/zenrun run tf_checks.py (every API function), tf_train.py
(DistributedGradientTape and DistributedOptimizer against one-process training, per scheme),
tf_topk.py (Compression.topk against a dense re-computation of DGC), tf_keras.py
(zen.tensorflow.keras: callbacks, load_model, backward_passes_per_step) and tf_adasum.py
(DistributedOptimizer / DistributedGradientTape(op=Adasum) against a numpy re-computation; 3
ranks: the daemon's power-of-two error), tf_process_sets.py (process sets on 4 ranks) and
tf_elastic.py (zen.tensorflow.elastic and zen.tensorflow.keras.elastic: states, callbacks,
recovery from a real failure, on 2 ranks) and tf_graph.py (the TensorFlow 1 API in graph mode:
broadcast_global_variables, BroadcastGlobalVariablesHook, the objects in a session,
DistributedOptimizer of a tf.compat.v1.train optimizer with backward_passes_per_step and
Adasum, elastic TensorFlowState in a session; 2 and 3 ranks) under
the TensorFlow of .venv-tf; this file reads their per-check reports and needs no TensorFlow
itself.

Run: tools/build-tf && /usr/bin/python3 -m pytest -q test/python/test_tensorflow.py
(CTest: python_tf_*, which stage the package in the build directory first and name it in
ZENTEST_PYTHONPATH.) ZENTEST_TF_JOBS selects the jobs (comma-separated: np2, np4, train2,
train4, topk2, topk4, keras2, keras4, adasum2, adasum4, adasum3, single, ps4, syncbn2,
syncbn4, elastic2, graph2, graph3, hosts; default all);
ZENTEST_TF_PYTHON is the ranks' python (default .venv-tf/bin/python). A missing venv or op
library fails, it is not skipped: tools/test promises these tests ran.
"""

import pytest

from rank_jobs import (SCHEMES, TF_ENV, TF_PYTHON, assert_homogeneity, check_job,
                       check_names, check_test, exit_test, job_fixture,
                       require_zen_tensorflow, run_single_process, selected_jobs)

require_zen_tensorflow()

SELECTED = selected_jobs("ZENTEST_TF_JOBS", "np2,np4,train2,train4,topk2,topk4,keras2,keras4,"
                         "adasum2,adasum4,adasum3,single,ps4,syncbn2,syncbn4,elastic2,graph2,"
                         "graph3,hosts")
CHECK_NAMES = check_names("tf_checks.py")
KERAS_CHECKS = check_names("tf_keras.py")
TOPK_CHECKS = check_names("tf_topk.py")
ADASUM_CHECKS = check_names("tf_adasum.py")
PROCESS_SET_CHECKS = check_names("tf_process_sets.py")
SYNC_BN_CHECKS = check_names("tf_sync_batch_norm.py")
ELASTIC_CHECKS = check_names("tf_elastic.py")
GRAPH_CHECKS = check_names("tf_graph.py")
ADASUM_NOT_POW2 = "adasum_world_not_power_of_two"
TRAIN_CHECKS = ["%s.%s" % (kind, s) for s in SCHEMES for kind in ("tape", "keras")] + \
    ["tape.zen.sparse_as_dense", "tape.zen.fp16", "tape.zen.topk1", "keras.zen.topk1"]


def tf_job(key, np, script, args):
    return job_fixture(SELECTED, "ZENTEST_TF_JOBS", key,
                       lambda tmp_path: check_job(np, TF_PYTHON, script, args, extra_env=TF_ENV))


job_np2 = tf_job("np2", 2, "tf_checks.py", [])
job_np4 = tf_job("np4", 4, "tf_checks.py", [])
job_train2 = tf_job("train2", 2, "tf_train.py", SCHEMES)
job_train4 = tf_job("train4", 4, "tf_train.py", SCHEMES)
job_topk2 = tf_job("topk2", 2, "tf_topk.py", [])
job_topk4 = tf_job("topk4", 4, "tf_topk.py", [])
job_keras2 = tf_job("keras2", 2, "tf_keras.py", [])
job_keras4 = tf_job("keras4", 4, "tf_keras.py", [])
job_adasum2 = tf_job("adasum2", 2, "tf_adasum.py", [])
job_adasum4 = tf_job("adasum4", 4, "tf_adasum.py", [])
job_adasum3 = tf_job("adasum3", 3, "tf_adasum.py", [ADASUM_NOT_POW2])
job_ps4 = tf_job("ps4", 4, "tf_process_sets.py", [])
job_syncbn2 = tf_job("syncbn2", 2, "tf_sync_batch_norm.py", [])
job_syncbn4 = tf_job("syncbn4", 4, "tf_sync_batch_norm.py", [])
job_elastic2 = tf_job("elastic2", 2, "tf_elastic.py", [])
job_graph2 = tf_job("graph2", 2, "tf_graph.py", [])
job_graph3 = tf_job("graph3", 3, "tf_graph.py", [])
JOBS = {"np2": "job_np2", "np4": "job_np4", "train2": "job_train2", "train4": "job_train4",
        "topk2": "job_topk2", "topk4": "job_topk4", "keras2": "job_keras2",
        "keras4": "job_keras4", "adasum2": "job_adasum2", "adasum4": "job_adasum4",
        "adasum3": "job_adasum3", "ps4": "job_ps4", "syncbn2": "job_syncbn2",
        "syncbn4": "job_syncbn4", "elastic2": "job_elastic2", "graph2": "job_graph2",
        "graph3": "job_graph3"}


test_two_ranks_tcp = check_test("job_np2", 2, CHECK_NAMES)
test_four_ranks_tcp = check_test("job_np4", 4, CHECK_NAMES)
test_training_matches_one_process_two_ranks = check_test("job_train2", 2, TRAIN_CHECKS)
test_training_matches_one_process_four_ranks = check_test("job_train4", 4, TRAIN_CHECKS)
test_topk_two_ranks = check_test("job_topk2", 2, TOPK_CHECKS)
test_topk_four_ranks = check_test("job_topk4", 4, TOPK_CHECKS)
test_keras_two_ranks = check_test("job_keras2", 2, KERAS_CHECKS)
test_keras_four_ranks = check_test("job_keras4", 4, KERAS_CHECKS)
test_adasum_two_ranks = check_test("job_adasum2", 2, ADASUM_CHECKS)
test_adasum_four_ranks = check_test("job_adasum4", 4, ADASUM_CHECKS)
test_adasum_three_ranks_refused = check_test("job_adasum3", 3, [ADASUM_NOT_POW2])
test_process_sets_four_ranks = check_test("job_ps4", 4, PROCESS_SET_CHECKS)
test_sync_batch_norm_two_ranks = check_test("job_syncbn2", 2, SYNC_BN_CHECKS)
test_sync_batch_norm_four_ranks = check_test("job_syncbn4", 4, SYNC_BN_CHECKS)
test_elastic_two_ranks = check_test("job_elastic2", 2, ELASTIC_CHECKS)
test_graph_mode_two_ranks = check_test("job_graph2", 2, GRAPH_CHECKS)
test_graph_mode_three_ranks = check_test("job_graph3", 3, GRAPH_CHECKS)
test_jobs_exit_cleanly = exit_test(JOBS, SELECTED)


def test_single_process_without_launcher():
    """Without zenrun or mpirun, init() makes a job of one and every op is the identity
    (SyncBatchNormalization the base layer); `import zen` loads neither TensorFlow nor
    torch."""
    if "single" not in SELECTED:
        pytest.skip("job single not selected (ZENTEST_TF_JOBS)")
    run_single_process(TF_PYTHON, (
        "import sys, zen\n"
        "assert 'tensorflow' not in sys.modules and 'torch' not in sys.modules\n"
        "import tensorflow as tf, zen.tensorflow as hvd\n"
        "hvd.init(); assert hvd.size() == 1 and hvd.rank() == 0 and hvd.local_size() == 1\n"
        "t = tf.reshape(tf.range(6.), [2, 3])\n"
        "assert bool(tf.reduce_all(hvd.allreduce(t) == t))\n"
        "s = tf.IndexedSlices(tf.ones([2, 3]), tf.constant([1, 1]), tf.constant([4, 3]))\n"
        "out = hvd.allreduce(s, op=hvd.Sum)\n"
        "assert out.indices.numpy().tolist() == [1] and out.values.numpy().tolist() == "
        "[[2.0] * 3]\n"
        "assert int(hvd.join()) == 0\n"
        "import keras\n"  # a job of one: SyncBatchNormalization is the base layer, bit for bit
        "sync, base = hvd.SyncBatchNormalization(), keras.layers.BatchNormalization()\n"
        "assert bool(tf.reduce_all(sync(t, training=True) == base(t, training=True)))\n"
        "assert all((a == b).all() for a, b in zip(sync.get_weights(), base.get_weights()))\n"
        "hvd.shutdown(); print('ok')\n"), extra_env=dict(TF_ENV, OMP_NUM_THREADS="1"),
        drop=("ZEN_", "ZENRUN_", "OMPI_", "PMI_"))


@pytest.mark.parametrize("slots,expected", [([2, 1], False), ([1, 1], True)])
def test_is_homogeneous_over_hand_placed_hosts(slots, expected):
    """zen.tensorflow's is_homogeneous() on every rank of a TCP job hand-placed on hosts of
    `slots` ranks (rank_jobs.run_hand_placed), and Horovod's answers before init."""
    if "hosts" not in SELECTED:
        pytest.skip("job hosts not selected (ZENTEST_TF_JOBS)")
    assert_homogeneity(TF_PYTHON, "zen.tensorflow", slots, expected, TF_ENV)
