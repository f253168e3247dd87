"""The framework-neutral half of broadcast_object / allgather_object (zen.torch and
zen.tensorflow): the operations' names and gathered bytes split back into objects.
The framework halves move the bytes as uint8 tensors: a length, then the payload."""

import pickle


def op_name(name):
    """The name both ranks' operations share; not the object's type, as Horovod's default
    is, since the other ranks of a broadcast often pass None."""
    return "object." + (name or "noname")


def split_gathered(data, sizes):
    """The objects pickled back to back in data (bytes), sizes[i] bytes from rank i of the
    set, in rank order."""
    out, at = [], 0
    for n in sizes:
        out.append(pickle.loads(data[at:at + int(n)]))
        at += int(n)
    return out
