"""The exceptions elastic training turns on (Horovod's horovod.common.exceptions), shared by
zen.torch and zen.tensorflow: one class each, so `except HorovodInternalError` catches what
either binding raises."""


class HorovodInternalError(RuntimeError):
    """An operation failed in the daemon (mismatched tensors between ranks, a failed peer, a
    shutdown): raised by synchronize() with the daemon's message, as in Horovod. Elastic
    training (zen.common.elastic.run_fn) restores the last commit and resets on it."""


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by State.commit() / check_host_updates() on every rank at the same commit when
    the launcher recorded a membership change. skip_sync: every change removed workers, so the
    survivors' states agree and the reset needs no broadcast (Horovod's)."""

    def __init__(self, skip_sync):
        super().__init__("the job's workers changed; resetting%s" %
                         (" (workers removed only)" if skip_sync else ""))
        self.skip_sync = skip_sync
