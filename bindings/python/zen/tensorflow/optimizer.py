"""DistributedOptimizer for Keras 3 optimizers, as horovod.tensorflow.keras's: a dynamic
subclass of the optimizer's class whose apply() (which apply_gradients and Model.fit call)
averages the gradients over all ranks first, or, with backward_passes_per_step=N, sums N
passes locally and allreduces once (aggregation.py). With op=Adasum each rank applies its own
gradients and the ranks combine the variable deltas (adasum_optimizer.py).

The subclass keeps the class name and module of the optimizer it wraps, so a model saved
with it loads with plain Keras (a plain optimizer) or with zen.tensorflow.keras.load_model
(wrapped again), as in Horovod."""

import functools

import keras
import tensorflow as tf

from zen.common.basics import Adasum, Average
from zen.common.process_sets import global_process_set, process_set_id
from zen.tensorflow.adasum_optimizer import AdasumStep, AdasumWindow, check_adasum_arguments
from zen.tensorflow.aggregation import LocalAggregation
from zen.tensorflow.compression import Compression, TopKCompressor
from zen.tensorflow.gradients import make_allreduce_grads_fn
from zen.tensorflow.graph_mode import LegacyDistributedOptimizer
from zen.tensorflow.local_gradients import LocalVariables, layers_variables


class _DistributedOptimizer:
    """Methods copied into the dynamic subclass."""

    def apply(self, grads, trainable_variables=None):
        parent = super(self.__class__, self)
        grads = list(grads)
        if trainable_variables is None:
            variables = self._trainable_variables
        else:
            variables = list(trainable_variables)
        if self._zen_aggregation is None and self._zen_adasum is None:
            return parent.apply(self._zen_reduce(grads, variables), trainable_variables)
        if trainable_variables is not None and not self.built:
            # outside the cond: the optimizer's variables come first
            with keras.name_scope(self.name, caller=self):
                self.build(variables)
            self.built = True
        apply_fn = lambda reduced: parent.apply(reduced, trainable_variables)  # noqa: E731
        if self._zen_adasum is not None:
            grads = self._zen_adasum.dense(grads, variables)
            apply_fn = self._zen_adasum.wrap(apply_fn, variables, self._zen_local.mask(variables))
        if self._zen_aggregation is None:
            return apply_fn(self._zen_reduce(grads, variables))
        self._zen_aggregation.step(grads, variables, apply_fn, self.iterations)
        return None

    def register_local_var(self, var):
        """Marks a variable as this rank's own (model parallelism): its gradient is not
        reduced, only divided by the set's size when scale_local_gradients (Horovod's)."""
        self._zen_local.register(var)

    def _zen_reduce(self, grads, variables):
        return self._zen_local.reduce(self._zen_allreduce_grads, grads, variables)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """horovod.tensorflow's DistributedOptimizer, its arguments in its order
    (zen.tensorflow.keras's has horovod.tensorflow.keras's: no use_locking, op after
    gradient_predivide_factor). A copy of the Keras optimizer (same class, same config) that averages (op=Average) or
    sums (op=Sum) the gradients over all ranks (over process_set's ranks, divided by its size;
    a rank outside it applies its own gradients) before applying them. tf.IndexedSlices
    gradients (embeddings) take Zen's sparse allreduce unless sparse_as_dense.
    backward_passes_per_step=N applies once every N calls, the sum of the N passes'
    gradients reduced over the ranks (divided by N when average_aggregated_gradients); the
    other calls only count optimizer.iterations. op=Adasum is Horovod's Adasum optimizer: each
    rank applies its gradients (summed over the passes) locally and the ranks combine the
    variable deltas with Adasum (dense gradients only, or sparse_as_dense; Compression.none or
    .fp16; a power-of-two number of ranks). groups/num_groups are accepted: the daemon fuses
    whatever reaches it in one cycle. A TensorFlow 1 optimizer (tf.compat.v1.train.*, graph
    mode) gets Horovod's wrapper of those (graph_mode.LegacyDistributedOptimizer; use_locking
    is its): its compute_gradients and minimize reduce; with backward_passes_per_step=N it
    applies every Nth step (global_step counts every step), with op=Adasum every rank steps
    locally and every Nth step the ranks combine the variable deltas
    (adasum_optimizer.AdasumWindow; one apply_gradients per graph); the state of either, and Compression.topk's residuals, is
    LOCAL_VARIABLES, as Horovod's, made per graph. Not eagerly with backward_passes_per_step > 1
    or Adasum."""
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        return _legacy_optimizer(optimizer, name, use_locking, compression, sparse_as_dense,
                                 gradient_predivide_factor, op, backward_passes_per_step,
                                 average_aggregated_gradients, process_set,
                                 scale_local_gradients)
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError("zen.tensorflow.DistributedOptimizer wraps a Keras optimizer "
                         "(keras.optimizers.*) or a TensorFlow 1 one (tf.compat.v1.train.*), "
                         "not %s" % type(optimizer).__name__)
    if process_set_id(process_set, "DistributedOptimizer", members_only=False) != 0 and \
            op == Adasum:
        raise ValueError("DistributedOptimizer(op=Adasum) runs over the global process set "
                         "only, not %s" % (process_set,))
    _check_topk_momentum(compression, getattr(optimizer, "momentum", 0))
    if not isinstance(backward_passes_per_step, int) or backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be an integer > 0, not %r"
                         % (backward_passes_per_step,))
    # Not __dict__/__weakref__: _DistributedOptimizer's descriptors break dir() (Keras saving).
    methods = {k: v for k, v in _DistributedOptimizer.__dict__.items()
               if k not in ("__dict__", "__weakref__")}
    methods["__module__"] = optimizer.__class__.__module__
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), methods)
    distributed = cls.from_config(optimizer.get_config())
    prefix = "DistributedOptimizer.%s" % (name or optimizer.name)
    distributed._zen_adasum = None
    # Its residuals are saved and restored with the optimizer's by TensorFlowKerasState.
    distributed._zen_topk = compression if isinstance(compression, TopKCompressor) else None
    if op == Adasum:
        check_adasum_arguments("DistributedOptimizer", compression, gradient_predivide_factor)
        # Horovod's _DistributedAdasumOptimizer: the gradients stay local (summed over the
        # backward passes), the ranks combine the deltas of the wrapped optimizer's apply.
        distributed._zen_adasum = AdasumStep(prefix + ".adasum", sparse_as_dense, compression)
        distributed._zen_allreduce_grads = list
    else:
        distributed._zen_allreduce_grads = make_allreduce_grads_fn(
            prefix, op, compression, sparse_as_dense, gradient_predivide_factor, process_set)
    distributed._zen_local = LocalVariables(process_set, scale_local_gradients)
    distributed._zen_aggregation = None
    if backward_passes_per_step > 1:
        distributed._zen_aggregation = LocalAggregation(
            backward_passes_per_step, average_aggregated_gradients, distributed._zen_reduce)
    return distributed


def _check_topk_momentum(compression, momentum):
    if isinstance(compression, TopKCompressor) and compression.momentum and \
            float(momentum or 0):
        raise ValueError("Compression.topk(momentum=%g) applies the momentum before the "
                         "compression (DGC's momentum correction): the wrapped optimizer must "
                         "have momentum=0" % compression.momentum)


def _legacy_optimizer(optimizer, name, use_locking, compression, sparse_as_dense,
                      gradient_predivide_factor, op, backward_passes_per_step,
                      average_aggregated_gradients, process_set, scale_local_gradients):
    """Horovod's _DistributedOptimizer or, with op=Adasum, _DistributedAdasumOptimizer, of a
    tf.compat.v1.train optimizer (TensorFlow 1 graphs; Horovod's refusals)."""
    _check_topk_momentum(compression, getattr(optimizer, "_momentum", 0))  # MomentumOptimizer
    if not isinstance(backward_passes_per_step, int) or backward_passes_per_step <= 0:
        raise ValueError("backward_passes_per_step must be an integer > 0, not %r"
                         % (backward_passes_per_step,))
    if (backward_passes_per_step > 1 or op == Adasum) and tf.executing_eagerly():
        raise ValueError("backward_passes_per_step > 1 and op=Adasum are not supported for a "
                         "TensorFlow 1 optimizer (%s) with eager execution"
                         % type(optimizer).__name__)
    prefix = "DistributedOptimizer.%s" % (name or type(optimizer).__name__)
    local = LocalVariables(process_set, scale_local_gradients)
    if op == Adasum:
        if average_aggregated_gradients:
            raise ValueError("Adasum does not support average_aggregated_gradients == True")
        if process_set_id(process_set, "DistributedOptimizer", members_only=False) != 0:
            raise NotImplementedError("Adasum does not support process sets yet")
        check_adasum_arguments("DistributedOptimizer", compression, gradient_predivide_factor)
        return LegacyDistributedOptimizer(
            optimizer, name, use_locking, None, local,
            adasum=AdasumWindow(prefix + ".adasum", compression, backward_passes_per_step))
    allreduce_grads = make_allreduce_grads_fn(prefix, op, compression, sparse_as_dense,
                                              gradient_predivide_factor, process_set)
    aggregation = None
    if backward_passes_per_step > 1:
        aggregation = LocalAggregation(backward_passes_per_step, average_aggregated_gradients,
                                       functools.partial(local.reduce, allreduce_grads))
    return LegacyDistributedOptimizer(optimizer, name, use_locking, allreduce_grads, local,
                                      aggregation, sparse_as_dense=sparse_as_dense)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average,
                                backward_passes_per_step=1, average_aggregated_gradients=False,
                                num_groups=0, groups=None, process_set=global_process_set,
                                local_layers=None, scale_local_gradients=True):
    """DistributedOptimizer with local_layers' (keras layers: a layer or a list) trainable
    variables registered with register_local_var: their gradients stay this rank's own."""
    distributed = DistributedOptimizer(
        optimizer, name=name, compression=compression, sparse_as_dense=sparse_as_dense,
        backward_passes_per_step=backward_passes_per_step, op=op,
        gradient_predivide_factor=gradient_predivide_factor,
        average_aggregated_gradients=average_aggregated_gradients, process_set=process_set,
        scale_local_gradients=scale_local_gradients)
    for var in layers_variables(local_layers):
        distributed.register_local_var(var)
    return distributed
