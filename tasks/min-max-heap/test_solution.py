import bisect
import random

import pytest

from solution import MinMaxHeap


def test_empty_heap_raises_index_error():
    heap = MinMaxHeap()
    assert len(heap) == 0
    assert not heap
    for op in (heap.peek_min, heap.peek_max, heap.pop_min, heap.pop_max):
        with pytest.raises(IndexError):
            op()


def test_single_item_is_min_and_max():
    heap = MinMaxHeap([7])
    assert heap.peek_min() == 7
    assert heap.peek_max() == 7
    assert heap.pop_max() == 7
    assert len(heap) == 0


def test_two_and_three_items():
    heap = MinMaxHeap([5, 1])
    assert (heap.peek_min(), heap.peek_max()) == (1, 5)
    heap = MinMaxHeap([2, 9, 4])
    assert heap.pop_max() == 9
    assert heap.pop_max() == 4
    assert heap.pop_max() == 2


def test_drain_from_both_ends():
    heap = MinMaxHeap()
    for x in [15, 3, 42, 8, 23, 4, 16]:
        heap.push(x)
    assert heap.pop_min() == 3
    assert heap.pop_max() == 42
    assert heap.pop_max() == 23
    assert heap.pop_min() == 4
    assert heap.to_sorted_list() == [8, 15, 16]
    assert len(heap) == 3


def test_constructor_copies_and_heapifies():
    items = [9, 2, 7, 2, 5, 11, 0, 3]
    heap = MinMaxHeap(items)
    items.clear()
    assert len(heap) == 8
    assert [heap.pop_max() for _ in range(3)] == [11, 9, 7]
    assert [heap.pop_min() for _ in range(5)] == [0, 2, 2, 3, 5]


def test_duplicates_count_separately():
    heap = MinMaxHeap([4, 4, 4, 1, 1])
    assert heap.pop_max() == 4
    assert heap.pop_max() == 4
    assert heap.pop_min() == 1
    assert heap.to_sorted_list() == [1, 4]


def test_to_sorted_list_does_not_change_heap():
    heap = MinMaxHeap([3, 1, 2])
    assert heap.to_sorted_list() == [1, 2, 3]
    assert heap.to_sorted_list() == [1, 2, 3]
    assert len(heap) == 3
    assert heap.peek_max() == 3


def test_pushpop_min():
    heap = MinMaxHeap()
    assert heap.pushpop_min(5) == 5
    assert len(heap) == 0
    heap = MinMaxHeap([3, 8])
    assert heap.pushpop_min(1) == 1
    assert heap.pushpop_min(3) == 3
    assert heap.pushpop_min(10) == 3
    assert heap.to_sorted_list() == [8, 10]
    assert heap.peek_max() == 10


def test_strings_and_tuples():
    heap = MinMaxHeap(["pear", "apple", "zucchini", "fig"])
    assert heap.peek_min() == "apple"
    assert heap.peek_max() == "zucchini"
    jobs = MinMaxHeap([(2, "b"), (1, "z"), (2, "a")])
    assert jobs.pop_max() == (2, "b")
    assert jobs.pop_min() == (1, "z")


@pytest.mark.parametrize("seed", range(6))
def test_random_operations_against_sorted_list(seed):
    rng = random.Random(seed)
    initial = [rng.randint(0, 40) for _ in range(rng.randint(0, 30))]
    heap = MinMaxHeap(initial)
    oracle = sorted(initial)
    for _ in range(1500):
        r = rng.random()
        if r < 0.4:
            x = rng.randint(0, 40)
            heap.push(x)
            bisect.insort(oracle, x)
        elif r < 0.6:
            if oracle:
                assert heap.pop_min() == oracle.pop(0)
            else:
                with pytest.raises(IndexError):
                    heap.pop_min()
        elif r < 0.8:
            if oracle:
                assert heap.pop_max() == oracle.pop()
            else:
                with pytest.raises(IndexError):
                    heap.pop_max()
        elif r < 0.9:
            x = rng.randint(0, 40)
            if oracle and oracle[0] < x:
                expected = oracle.pop(0)
                bisect.insort(oracle, x)
            else:
                expected = x
            assert heap.pushpop_min(x) == expected
        else:
            assert len(heap) == len(oracle)
            if oracle:
                assert heap.peek_min() == oracle[0]
                assert heap.peek_max() == oracle[-1]
    assert heap.to_sorted_list() == oracle


def test_large_heap():
    rng = random.Random(42)
    items = [rng.random() for _ in range(100_000)]
    heap = MinMaxHeap(items)
    ordered = sorted(items)
    lows = [heap.pop_min() for _ in range(2000)]
    highs = [heap.pop_max() for _ in range(2000)]
    assert lows == ordered[:2000]
    assert highs == ordered[::-1][:2000]
    for x in items[:20000]:
        heap.push(x)
    remaining = ordered[2000:-2000] + items[:20000]
    assert len(heap) == 116_000
    assert heap.peek_min() == min(remaining)
    assert heap.peek_max() == max(remaining)
