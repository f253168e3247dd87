"""ElasticSampler (Horovod's horovod.torch.elastic.sampler): a DistributedSampler that
re-shards the samples an epoch has not processed yet over the current ranks after a reset.

Each epoch orders the dataset's indices (shuffled by seed + epoch, the same on every rank),
drops the processed ones, pads the rest to a multiple of size() with its own first indices
and gives rank r every size()-th one from r. A global batch of size() * batch_size is then
a contiguous run of the remaining indices.

Differences from Horovod, on purpose:
* record_batch(batch_idx, batch_size) records the batch of every rank, not only this rank's:
  the ranks step together, so each rank can compute the others' batches, and every rank's
  commit holds the whole job's progress. Horovod recorded this rank's only and merged the
  survivors' sets at the sync, so the samples of a rank that died were processed twice.
* The remaining indices are the epoch's order without the processed ones (Horovod dropped
  as many indices from the front as were processed, right only while they were a prefix).
* What record_indices records is merged over the ranks at every commit (TorchState.commit),
  not only at a sync: a reset that skips the sync (workers removed only) then re-shards the
  same remaining indices on every rank (Horovod's ranks re-sharded their own, different sets).
"""

import math
import random

import torch

from zen.torch.mpi_ops import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    """Shards dataset's indices over the ranks, skipping those processed this epoch.

    dataset: anything with len(); shuffle: a new order per epoch (seed + epoch); seed: the
    same on every rank. Call set_epoch(epoch) at each epoch's start and record_batch after
    each batch; keep it in the elastic state (TorchState(sampler=...)) so that it is saved,
    restored and re-sharded with it."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.unshared_indices = set()  # record_indices' since the last merge over the ranks
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch: nothing processed, the epoch's order."""
        self.epoch = epoch
        self.processed_indices = set()
        self.unshared_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Records batch batch_idx (of batch_size indices per rank, counted from the last
        reset or set_epoch) of every rank as processed. Every rank calls it alike."""
        # Batch batch_idx of every rank is a contiguous run of the padded remaining indices.
        per_batch = batch_size * self.num_replicas
        start = batch_idx * per_batch
        end = min(start + per_batch, self.total_size)
        remaining = self.remaining_indices
        self.processed_indices.update(remaining[p % len(remaining)] for p in range(start, end))

    def record_indices(self, indices):
        """Records indices (this rank's) as processed; the next commit or sync merges every
        rank's."""
        self.processed_indices.update(indices)
        self.unshared_indices.update(indices)

    def merge_recorded(self, everyone):
        """Adds every rank's unshared indices (everyone: one set per rank) to the processed."""
        for indices in everyone:
            self.processed_indices.update(indices)
        self.unshared_indices = set()

    def get_indices(self, batch_idx, batch_size):
        """This rank's indices of batch batch_idx."""
        return self.indices[batch_idx * batch_size:(batch_idx + 1) * batch_size]

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.unshared_indices = set()
        self.reset()

    def state_dict(self):
        return dict(epoch=self.epoch, processed_indices=set(self.processed_indices))

    def reset(self):
        """Re-shards what remains of the epoch over the current ranks (after init)."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        # Padded to a multiple of size() (repeating from the start): every rank runs the same
        # number of batches.
        remaining = self.remaining_indices
        self.indices = [remaining[p % len(remaining)]
                        for p in range(self.rank, self.total_size, self.num_replicas)]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
