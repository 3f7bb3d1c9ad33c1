"""The embedded server's memory, bounded. Measured on soak's own nights (BENCHMARKS.md, "Embedded default: memory"),
llama-cpp-python's RAM prompt cache let the server grow from ~0.4 GiB to 3-4.5 GiB against a 512 MiB cache: its
size counts only each state's KV, not the copy of the logits every state also carries (128 × 49,152 floats, 25 MB,
never read back: a restored state always evaluates its last token anew); each turn of a conversation stays cached
beside the next one, which extends it and is always picked over it; and the states, some 20-50 MB each, are
allocated and freed in the server's worker threads, whose glibc heaps kept the freed space (half the heap was free
after a few minutes). Here a state holds one row of logits, a new state replaces those its tokens extend, the size
counts what a state holds, and blocks of a MiB or more are mapped on their own, so freeing one returns it."""

import ctypes
import ctypes.util
from collections.abc import Sequence

import llama_cpp

M_MMAP_THRESHOLD = -3
"""glibc's mallopt parameter; setting it also stops glibc raising the threshold as large blocks are freed."""
MAPPED_FROM = 1 << 20


class PromptCache(llama_cpp.LlamaRAMCache):
    """llama-cpp-python's RAM prompt cache, one state per conversation, sized by what its states hold."""

    @property
    def cache_size(self) -> int:
        return sum(state.llama_state_size + state.scores.nbytes + state.input_ids.nbytes
                   for state in self.cache_state.values())

    def __setitem__(self, key: Sequence[int], value: llama_cpp.LlamaState) -> None:
        tokens = tuple(key)
        for extended in [k for k in self.cache_state if len(k) <= len(tokens) and tokens[:len(k)] == k]:
            del self.cache_state[extended]
        value.scores = value.scores[-1:].copy()  # load_state broadcasts the row; the next call replaces it
        super().__setitem__(tokens, value)


def bound_memory() -> None:
    """Use PromptCache for `cache_type = ram`, and map large blocks on their own (glibc only; elsewhere a no-op)."""
    llama_cpp.LlamaRAMCache = PromptCache  # type: ignore[misc]
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_MMAP_THRESHOLD, MAPPED_FROM)
