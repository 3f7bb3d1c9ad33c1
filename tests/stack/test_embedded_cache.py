"""The embedded server's prompt cache: one state per conversation, counted whole, within its size."""

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
PromptCache = pytest.importorskip("soak.stack.embedded_cache").PromptCache

KV = 1000


def state(tokens: tuple[int, ...]) -> "llama_cpp.LlamaState":
    return llama_cpp.LlamaState(input_ids=np.array(tokens, dtype=np.intc), scores=np.ones((128, 500), np.single),
                                n_tokens=len(tokens), llama_state=bytes(KV), llama_state_size=KV, seed=0)


def test_a_state_replaces_those_it_extends_and_keeps_one_row_of_logits():
    cache = PromptCache(capacity_bytes=1 << 20)
    for tokens in [(1, 2, 3), (1, 2, 3, 4, 5), (1, 9), (1, 2, 3, 4, 5, 6)]:
        cache[tokens] = state(tokens)
    assert list(cache.cache_state) == [(1, 9), (1, 2, 3, 4, 5, 6)]
    assert all(s.scores.shape == (1, 500) for s in cache.cache_state.values())
    assert cache.cache_size == 2 * (KV + 500 * 4) + (2 + 6) * 4  # the KV, the row of logits, the tokens
    assert cache[(1, 2, 3, 4, 7)].n_tokens == 6  # the longest shared prefix still finds its conversation


def test_the_oldest_conversations_go_when_the_states_outgrow_the_cache():
    cache = PromptCache(capacity_bytes=3 * (KV + 500 * 4 + 8))
    for first in range(5):
        cache[(first, 0)] = state((first, 0))
    assert list(cache.cache_state) == [(2, 0), (3, 0), (4, 0)]
