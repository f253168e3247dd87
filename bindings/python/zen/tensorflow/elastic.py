"""zen.tensorflow.elastic: Horovod's horovod.tensorflow.elastic over Zen (zen.common.elastic):
TensorFlowKerasState (TensorFlow 2, eagerly), TensorFlowState (eagerly, or in a TensorFlow 1
session), run.

run(func): as zen.torch.elastic.run. A failed collective surfaces in TensorFlow as a
tf.errors.OpError naming one of zen's ops (ZenAllreduce, ...): run turns it into
HorovodInternalError (restore, reset, sync); other errors propagate (Horovod's wrapper
swallowed an UnknownError that named none of its ops and returned None).

Differences from Horovod, on purpose: TensorFlowKerasState builds the optimizer when it is
not built yet (Keras 3 optimizers create their slots at build, at the first step otherwise):
so a worker that joined and has not stepped broadcasts the same variables as rank 0, and a
restore to a commit from before the first step finds every slot saved, with its initial value.
"""

import re

import tensorflow as tf

from zen.common.elastic import HorovodInternalError, HostsUpdatedInterrupt, ObjectState, State
from zen.common.elastic import run_fn
from zen.tensorflow.functions import broadcast_object, broadcast_object_fn, broadcast_variables
from zen.tensorflow.mpi_ops import init, rank, shutdown
from zen.tensorflow.topk import STATE_COLLECTION

__all__ = ["HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState", "State",
           "TensorFlowKerasState", "TensorFlowState", "run"]

# The op types of bindings/tensorflow/zen_tf_ops.cc, as error messages name them (eagerly
# "[Op:ZenAllreduce]", in a graph "{{node .../ZenAllreduce_3}}").
_ZEN_OP = re.compile(r"\bZen(?:Sparse|Grouped)?(?:Allreduce|Allgather|Broadcast|Alltoall|"
                     r"Reducescatter|Join|Barrier)")


def _reset():
    shutdown()
    init()


def run(func):
    """Decorator: func(state, *args, **kwargs) run elastically (zen.common.elastic.run_fn with
    zen.tensorflow's shutdown and init as the reset)."""

    def wrapper(state, *args, **kwargs):
        try:
            return func(state, *args, **kwargs)
        except tf.errors.OpError as e:
            if _ZEN_OP.search(e.message or ""):
                raise HorovodInternalError(e.message) from e
            raise

    return run_fn(wrapper, _reset)


def _broadcast_state_object(obj):
    return broadcast_object(obj, root_rank=0, name="elastic.state")


def _optimizer_variables(optimizer):
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def _copies(variables):
    return [tf.identity(v) for v in variables]


def _assign(variables, values):
    for variable, value in zip(variables, values):
        variable.assign(value)


class TensorFlowKerasState(ObjectState):
    """State of a Keras model and its optimizer (Horovod's TensorFlowKerasState), eagerly.

    model: built (model.build(input_shape) or a call); optimizer: default model.optimizer;
    backend: accepted for Horovod's signature (Keras 3 has no TensorFlow 1 session);
    kwargs: plain objects (ObjectState's)."""

    def __init__(self, model, optimizer=None, backend=None, **kwargs):
        if not tf.executing_eagerly():
            raise NotImplementedError("TensorFlowKerasState runs eagerly (Keras 3 has no "
                                      "TensorFlow 1 session); in graph mode keep the variables "
                                      "with TensorFlowState(session=)")
        if not model.built:
            raise ValueError("Model must be built first. Run `model.build(input_shape)`.")
        self.model = model
        self.optimizer = optimizer or getattr(model, "optimizer", None)  # None: not compiled
        if self.optimizer is not None and not getattr(self.optimizer, "built", True):
            self.optimizer.build(model.trainable_variables)
        self.backend = backend
        self._save_model()
        super().__init__(bcast_object=_broadcast_state_object, get_rank=rank, **kwargs)

    def save(self):
        self._save_model()
        super().save()

    def restore(self):
        _assign(self.model.variables, self._saved_model)
        if self.optimizer is not None:
            _assign(_optimizer_variables(self.optimizer), self._saved_optimizer)
        if self._saved_topk is not None:
            self.optimizer._zen_topk.load_state(self._saved_topk)
        super().restore()

    def sync(self):
        broadcast_variables(self.model.variables, root_rank=0)
        if self.optimizer is not None:
            broadcast_variables(_optimizer_variables(self.optimizer), root_rank=0)
        self._save_model()
        super().sync()

    def _save_model(self):
        self._saved_model = _copies(self.model.variables)
        self._saved_optimizer = [] if self.optimizer is None else \
            _copies(_optimizer_variables(self.optimizer))
        # A DistributedOptimizer's Compression.topk residuals and momenta: per rank (a sync
        # keeps each rank's own), restored with the commit so that the steps run again do
        # not send what they had left in them a second time.
        topk = getattr(self.optimizer, "_zen_topk", None)
        self._saved_topk = topk.state() if topk is not None else None


class TensorFlowState(ObjectState):
    """State of a list of variables (Horovod's TensorFlowState) and plain objects (kwargs).

    Eagerly: variables (TensorFlow 2 has no global collection), kept as copies. In a
    TensorFlow 1 graph: variables (default tf.compat.v1.global_variables()) of session's
    graph (default: the default session), kept as numpy values read through the session; the
    broadcast, the restore's assigns (fed through placeholders) and broadcast_object_fn's ops
    are built once here, so that committing does not grow the graph. (Horovod's, under
    TensorFlow 2 in graph mode, defaults to no session and restores by var.assign, which
    there only builds an op.) The graph's Compression.topk residuals and momenta (the
    optimizer built first) are saved and restored too, per rank (a sync keeps each rank's
    own), so that the steps run again after a failure do not send what they had left a
    second time."""

    def __init__(self, variables=None, session=None, **kwargs):
        if tf.executing_eagerly():
            if session is not None:
                raise ValueError("TensorFlowState(session=) is for TensorFlow 1 graph mode; "
                                 "eagerly the variables are read directly")
            if not variables:
                raise ValueError("TensorFlowState needs the variables to keep (TensorFlow 2 "
                                 "has no global variables)")
            self.variables = list(variables)
            self.session = None
            self._store = _EagerVariables(self.variables)
            self._topk = _EagerVariables([])  # no graph: TensorFlowKerasState keeps top-k
            bcast_object = _broadcast_state_object
        else:
            self.session = session or tf.compat.v1.get_default_session()
            if self.session is None:
                raise ValueError("TensorFlowState in graph mode runs in a session: pass "
                                 "session= or create it under `with tf.compat.v1.Session():`")
            with self.session.graph.as_default():
                self.variables = list(variables or tf.compat.v1.global_variables())
                self._store = _SessionVariables(self.variables, self.session)
                self._topk = _SessionVariables(
                    tf.compat.v1.get_collection(STATE_COLLECTION), self.session,
                    broadcast=False)
            bcast_object = broadcast_object_fn(root_rank=0, session=self.session,
                                               name="elastic.state")
        self._saved = self._store.values()
        self._saved_topk = self._topk.values()
        super().__init__(bcast_object=bcast_object, get_rank=rank, **kwargs)

    def save(self):
        self._saved = self._store.values()
        self._saved_topk = self._topk.values()
        super().save()

    def restore(self):
        self._store.load(self._saved)
        self._topk.load(self._saved_topk)
        super().restore()

    def sync(self):
        self._store.broadcast()
        self._saved = self._store.values()
        self._saved_topk = self._topk.values()
        super().sync()


class _EagerVariables:
    """TensorFlowState's variables eagerly: read, assigned and broadcast directly."""

    def __init__(self, variables):
        self._variables = variables

    def values(self):
        return _copies(self._variables)

    def load(self, values):
        _assign(self._variables, values)

    def broadcast(self):
        broadcast_variables(self._variables, root_rank=0)


class _SessionVariables:
    """TensorFlowState's variables in a TensorFlow 1 session: their ops, built once (the
    broadcast's unless broadcast=False)."""

    def __init__(self, variables, session, broadcast=True):
        self._variables = variables
        self._session = session
        self._bcast = broadcast_variables(variables, root_rank=0) if broadcast else None
        self._feeds = [tf.compat.v1.placeholder(v.dtype.base_dtype, v.shape) for v in variables]
        self._load = tf.group([v.assign(f) for v, f in zip(variables, self._feeds)])

    def values(self):
        return self._session.run(self._variables)

    def load(self, values):
        self._session.run(self._load, dict(zip(self._feeds, values)))

    def broadcast(self):
        self._session.run(self._bcast)
