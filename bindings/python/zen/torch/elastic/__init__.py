"""zen.torch.elastic: Horovod's horovod.torch.elastic over Zen (zen.common.elastic).

    import zen.torch as hvd
    hvd.init()
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        ...                              # state.commit() every few batches

    train(state)

run(func): func(state, ...) run elastically: on a failed collective (HorovodInternalError)
every surviving rank restores the last commit, on a change of workers (HostsUpdatedInterrupt)
it keeps its state; then zen.torch's shutdown() and init() (under an elastic zenrun, init
joins the next round), the reset callbacks, the sync from rank 0, and func again.
"""

from zen.common.elastic import HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State
from zen.common.elastic import run_fn
from zen.torch.elastic.sampler import ElasticSampler
from zen.torch.elastic.state import TorchState
from zen.torch.mpi_ops import init, shutdown

__all__ = ["ElasticSampler", "HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState",
           "State", "TorchState", "run"]


def _reset():
    shutdown()
    init()


def run(func):
    """Decorator: func(state, *args, **kwargs) run elastically (zen.common.elastic.run_fn with
    zen.torch's shutdown and init as the reset)."""
    return run_fn(func, _reset)
