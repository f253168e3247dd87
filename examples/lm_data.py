"""The text of the word-level language-model examples (torch_word_lm.py, tf_word_lm.py): the
fortune cookies Debian's `fortunes` package ships (/usr/share/games/fortunes, about 1.3 MB;
tools/setup installs it), tokenized into lower-case words and punctuation, and a
frequency-sorted vocabulary (row 0 is the most frequent word, so the embedding's gradient
rows are Zipf-skewed, as in real models), and the training windows over it. Standard library
only."""

import collections
import os
import re
import sys

FORTUNES = "/usr/share/games/fortunes"
TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|[0-9]+|[.,!?;:\"()-]")


def read_corpus(directory):
    """Every fortune (files without .dat / .u8 names, pieces between '%' lines) as tokens,
    each ended by <eos>."""
    if not os.path.isdir(directory):
        sys.exit("%s is missing: install Debian's fortunes package (tools/setup)" % directory)
    tokens = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if "." in name or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for fortune in f.read().split("\n%\n"):
                words = TOKEN.findall(fortune.lower())
                if words:
                    tokens.extend(words)
                    tokens.append("<eos>")
    return tokens


def build_vocab(tokens, size):
    """Frequency-sorted: id 0 is the most frequent token; the rest map to <unk>."""
    counts = collections.Counter(tokens)
    words = [w for w, _ in counts.most_common(size - 1)]
    words.append("<unk>")
    return {w: i for i, w in enumerate(words)}


def encode(tokens, vocab):
    """The ids of `tokens` (a list of ints), <unk> for words outside the vocabulary."""
    unk = vocab["<unk>"]
    return [vocab.get(t, unk) for t in tokens]


def windows(streams, bptt):
    """(input, target) pairs of bptt-token windows over the rows of streams (a batch x length
    tensor, torch or TensorFlow; the target is the input shifted by one token), forever."""
    while True:
        for at in range(0, streams.shape[1] - 1 - bptt, bptt):
            yield streams[:, at:at + bptt], streams[:, at + 1:at + 1 + bptt]
