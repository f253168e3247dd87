"""Tests of zen.torch (bindings/python/zen/torch, bindings/torch): real ranks launched by
tools/zenrun run torch_checks.py (every API function) and torch_train.py (DistributedOptimizer
against one-process training, per scheme); this file reads their per-check reports.

Run: tools/build-python && /usr/bin/python3 -m pytest -q test/python/test_torch.py
(CTest: python_torch_*, which stage the package in the build directory first and name it in
ZENTEST_PYTHONPATH.) ZENTEST_TORCH_JOBS selects the
jobs (comma-separated: np2, np4, mpi, train2, train4, topk2, topk4, adasum2, adasum4, adasum3,
single, example, ps4, syncbn2, syncbn4, elastic2, elastic3, hosts; default all). torch_topk.py (Compression.topk against
a dense re-computation of DGC) is the topk jobs', torch_adasum.py (DistributedOptimizer(op=Adasum)
against a numpy re-computation; 3 ranks: the daemon's power-of-two error) the adasum jobs',
torch_process_sets.py (process sets on 4 ranks) the ps4 job's, torch_sync_batch_norm.py
(SyncBatchNorm against one process's BatchNorm on the concatenated batch) the syncbn jobs',
torch_elastic.py (zen.torch.elastic under a plain zenrun: states, recovery from a real
failure, HostsUpdatedInterrupt, ElasticSampler) the elastic jobs'.

Each job is one zenrun launch (importing torch is the slow part); rank_jobs.py launches it
and reads the reports back.
"""

import shutil

import pytest

from rank_jobs import (SCHEMES, TORCH_PYTHON, assert_homogeneity, assert_word_lm_table,
                       check_job, check_names, check_test, exit_test, job_fixture,
                       require_zen_torch, run_single_process, run_word_lm, selected_jobs,
                       zenrun)

require_zen_torch()

CHECK_NAMES = check_names("torch_checks.py")
TOPK_NAMES = check_names("torch_topk.py")
ADASUM_NAMES = check_names("torch_adasum.py")
PROCESS_SET_NAMES = check_names("torch_process_sets.py")
SYNC_BN_NAMES = check_names("torch_sync_batch_norm.py")
ELASTIC_NAMES = check_names("torch_elastic.py")
ADASUM_NOT_POW2 = "adasum_world_not_power_of_two"
SELECTED = selected_jobs("ZENTEST_TORCH_JOBS", "np2,np4,mpi,train2,train4,topk2,topk4,"
                         "adasum2,adasum4,adasum3,single,example,ps4,syncbn2,syncbn4,"
                         "elastic2,elastic3,hosts")


def torch_job(key, np, script, args, mpi=False):
    def launch(tmp_path):
        if mpi and shutil.which("mpirun") is None:
            pytest.skip("no mpirun")
        return check_job(np, TORCH_PYTHON, script, args, flags=["--mpi"] if mpi else [],
                         tmp_path=tmp_path)
    return job_fixture(SELECTED, "ZENTEST_TORCH_JOBS", key, launch)


job_np2 = torch_job("np2", 2, "torch_checks.py", [])
job_np4 = torch_job("np4", 4, "torch_checks.py", [])
job_mpi = torch_job("mpi", 2, "torch_checks.py", [], mpi=True)
job_train2 = torch_job("train2", 2, "torch_train.py", SCHEMES)
job_train4 = torch_job("train4", 4, "torch_train.py", SCHEMES)
job_topk2 = torch_job("topk2", 2, "torch_topk.py", [])
job_topk4 = torch_job("topk4", 4, "torch_topk.py", [])
job_adasum2 = torch_job("adasum2", 2, "torch_adasum.py", [])
job_adasum4 = torch_job("adasum4", 4, "torch_adasum.py", [])
job_adasum3 = torch_job("adasum3", 3, "torch_adasum.py", [ADASUM_NOT_POW2])
job_ps4 = torch_job("ps4", 4, "torch_process_sets.py", [])
job_syncbn2 = torch_job("syncbn2", 2, "torch_sync_batch_norm.py", [])
job_syncbn4 = torch_job("syncbn4", 4, "torch_sync_batch_norm.py", [])
job_elastic2 = torch_job("elastic2", 2, "torch_elastic.py", [])
job_elastic3 = torch_job("elastic3", 3, "torch_elastic.py", [])
JOBS = {"np2": "job_np2", "np4": "job_np4", "mpi": "job_mpi", "train2": "job_train2",
        "train4": "job_train4", "topk2": "job_topk2", "topk4": "job_topk4",
        "adasum2": "job_adasum2", "adasum4": "job_adasum4", "adasum3": "job_adasum3",
        "ps4": "job_ps4", "syncbn2": "job_syncbn2", "syncbn4": "job_syncbn4",
        "elastic2": "job_elastic2", "elastic3": "job_elastic3"}

TRAIN_CHECKS = ["train.%s.%s" % (s, v) for s in SCHEMES for v in ("sparse", "topk1")] + \
    ["train.zen.passes2", "train.zen.sparse_as_dense"]


test_two_ranks_tcp = check_test("job_np2", 2, CHECK_NAMES)
test_four_ranks_tcp = check_test("job_np4", 4, CHECK_NAMES)
test_two_ranks_mpi = check_test("job_mpi", 2, CHECK_NAMES)
test_training_matches_one_process_two_ranks = check_test("job_train2", 2, TRAIN_CHECKS)
test_training_matches_one_process_four_ranks = check_test("job_train4", 4, TRAIN_CHECKS)
test_topk_two_ranks = check_test("job_topk2", 2, TOPK_NAMES)
test_topk_four_ranks = check_test("job_topk4", 4, TOPK_NAMES)
test_adasum_optimizer_two_ranks = check_test("job_adasum2", 2, ADASUM_NAMES)
test_adasum_optimizer_four_ranks = check_test("job_adasum4", 4, ADASUM_NAMES)
test_adasum_optimizer_three_ranks_refused = check_test("job_adasum3", 3, [ADASUM_NOT_POW2])
test_process_sets_four_ranks = check_test("job_ps4", 4, PROCESS_SET_NAMES)
test_sync_batch_norm_two_ranks = check_test("job_syncbn2", 2, SYNC_BN_NAMES)
test_sync_batch_norm_four_ranks = check_test("job_syncbn4", 4, SYNC_BN_NAMES)
test_elastic_two_ranks = check_test("job_elastic2", 2, ELASTIC_NAMES)
test_elastic_three_ranks = check_test("job_elastic3", 3, ELASTIC_NAMES)
test_jobs_exit_cleanly = exit_test(JOBS, SELECTED)


def test_single_process_without_launcher():
    """Without zenrun or mpirun, init() makes a job of one and every op is the identity."""
    if "single" not in SELECTED:
        pytest.skip("job single not selected (ZENTEST_TORCH_JOBS)")
    run_single_process(TORCH_PYTHON, (
        "import torch, zen.torch as hvd\n"
        "hvd.init(); assert hvd.size() == 1 and hvd.rank() == 0\n"
        "t = torch.arange(6.).view(2, 3)\n"
        "assert torch.equal(hvd.allreduce(t), t)\n"
        "s = torch.sparse_coo_tensor([[1, 1]], torch.ones(2, 3), (4, 3))\n"
        "assert torch.equal(hvd.sparse_allreduce(s, op=hvd.Sum).to_dense(), s.to_dense())\n"
        "w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))\n"
        "opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=0.5, momentum=0.9),\n"
        "                               op=hvd.Adasum)\n"
        "for _ in range(2):\n"
        "    opt.zero_grad(); (w * w).sum().backward(); opt.step()\n"
        "assert torch.allclose(w, torch.zeros(3, dtype=torch.float64) - 0.9), w\n"
        "hvd.shutdown(); print('ok')\n"))


def test_mpi_threads_disable():
    """zenrun --mpi --mpi-threads-disable: the MPI backend asks for MPI_THREAD_SERIALIZED, so
    mpi_threads_supported() is False on every rank (job mpi's basics check says True there,
    as this Open MPI's ompi_info does, without the flag)."""
    if "mpi" not in SELECTED:
        pytest.skip("job mpi not selected (ZENTEST_TORCH_JOBS)")
    if shutil.which("mpirun") is None:
        pytest.skip("no mpirun")
    code = ("import zen.torch as hvd\n"
            "hvd.init()\n"
            "print('THREADS', hvd.mpi_enabled(), hvd.mpi_threads_supported(), flush=True)\n"
            "hvd.shutdown()\n")
    proc = zenrun(2, TORCH_PYTHON, "-c", [code], flags=["--mpi", "--mpi-threads-disable"],
                  timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.count("THREADS True False") == 2, proc.stdout


@pytest.mark.parametrize("slots,expected", [([2, 1], False), ([1, 1], True)])
def test_is_homogeneous_over_hand_placed_hosts(slots, expected):
    """is_homogeneous() on every rank of a TCP job whose placement says it runs on hosts of
    `slots` ranks: False for 2 + 1 (every rank, the 1-slot host's included, where
    size % local_size == 0), True for 1 + 1; and Horovod's answers before init."""
    if "hosts" not in SELECTED:
        pytest.skip("job hosts not selected (ZENTEST_TORCH_JOBS)")
    assert_homogeneity(TORCH_PYTHON, "zen.torch", slots, expected)


def test_word_lm_example():
    """examples/torch_word_lm.py (the fortunes corpus) runs a few steps per scheme on two
    ranks; every scheme gives the same loss, and the sparse schemes move fewer embedding
    bytes than the dense one."""
    if "example" not in SELECTED:
        pytest.skip("job example not selected (ZENTEST_TORCH_JOBS)")
    schemes = ["zen", "agsparse", "dense"]
    assert_word_lm_table(run_word_lm(TORCH_PYTHON, "torch_word_lm.py", schemes), schemes)
