import random

import pytest

from solution import Autocomplete


def oracle_suggest(words, prefix, limit):
    matches = [w for w in words if w.startswith(prefix)]
    return sorted(matches, key=lambda w: (-words[w], w))[:limit]


def test_empty():
    ac = Autocomplete()
    assert len(ac) == 0
    assert ac.suggest("") == []
    assert ac.suggest("a") == []
    assert ac.prefix_count("") == 0
    assert "a" not in ac


def test_ranking_weight_then_alphabetical():
    ac = Autocomplete()
    for word, weight in [("car", 5), ("cart", 9), ("carbon", 5), ("care", 1), ("cat", 7), ("dog", 100)]:
        ac.add(word, weight)
    assert ac.suggest("car") == ["cart", "car", "carbon", "care"]
    assert ac.suggest("ca", limit=2) == ["cart", "cat"]
    assert ac.suggest("") == ["dog", "cart", "cat", "car", "carbon", "care"]
    assert ac.suggest("cart") == ["cart"]
    assert ac.suggest("cartoon") == []
    assert ac.suggest("x") == []


def test_limits():
    ac = Autocomplete()
    ac.add("a", 1)
    ac.add("ab", 2)
    assert ac.suggest("a", limit=0) == []
    assert ac.suggest("a", limit=50) == ["ab", "a"]
    with pytest.raises(ValueError):
        ac.suggest("a", limit=-1)


def test_re_add_replaces_weight_and_keeps_counts():
    ac = Autocomplete()
    ac.add("tea", 3)
    ac.add("team", 2)
    ac.add("tea", 1)
    assert ac.weight("tea") == 1
    assert ac.suggest("te") == ["team", "tea"]
    assert len(ac) == 2
    assert ac.prefix_count("te") == 2
    assert ac.prefix_count("tea") == 2
    assert ac.prefix_count("team") == 1


def test_increment():
    ac = Autocomplete()
    assert ac.increment("go") == 1.0
    assert ac.increment("go", 2.5) == 3.5
    assert ac.increment("gone", -1) == -1
    assert ac.weight("go") == 3.5
    assert ac.prefix_count("go") == 2 and len(ac) == 2
    assert ac.suggest("go") == ["go", "gone"]


def test_remove_keeps_neighbours():
    ac = Autocomplete()
    for word in ["in", "inn", "inner", "int"]:
        ac.add(word, len(word))
    assert ac.remove("inne") is False
    assert ac.remove("inn") is True
    assert ac.remove("inn") is False
    assert "inn" not in ac and "inner" in ac and "in" in ac
    assert ac.suggest("in") == ["inner", "int", "in"]
    assert ac.prefix_count("inn") == 1
    assert ac.remove("inner") is True
    assert ac.prefix_count("inn") == 0
    assert ac.suggest("inn") == []
    assert ac.prefix_count("i") == 2 and len(ac) == 2
    ac.add("inn", 0)
    assert ac.suggest("in") == ["int", "in", "inn"]


def test_errors():
    ac = Autocomplete()
    ac.add("x", 1)
    with pytest.raises(KeyError):
        ac.weight("y")
    with pytest.raises(KeyError):
        ac.weight("xx")
    for method, args in [(ac.add, ("", 1)), (ac.increment, ("",)), (ac.remove, ("",)), (ac.weight, ("",))]:
        with pytest.raises(ValueError):
            method(*args)


def test_negative_weights_and_unicode():
    ac = Autocomplete()
    ac.add("été", -1)
    ac.add("étage", 0)
    ac.add("Été", 5)
    assert ac.suggest("é") == ["étage", "été"]
    assert ac.suggest("É") == ["Été"]
    assert ac.prefix_count("ét") == 2


@pytest.mark.parametrize("seed", range(5))
def test_random_operations_against_dict(seed):
    rng = random.Random(seed)
    ac = Autocomplete()
    words = {}
    alphabet = "abc"
    for _ in range(2500):
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
        r = rng.random()
        if r < 0.3:
            weight = rng.randint(-3, 10)
            ac.add(word, weight)
            words[word] = weight
        elif r < 0.4:
            delta = rng.randint(-2, 4)
            words[word] = words.get(word, 0) + delta
            assert ac.increment(word, delta) == words[word]
        elif r < 0.55:
            assert ac.remove(word) == (words.pop(word, None) is not None)
        elif r < 0.8:
            prefix = word[: rng.randint(0, len(word))]
            limit = rng.randint(0, 6)
            assert ac.suggest(prefix, limit) == oracle_suggest(words, prefix, limit)
        else:
            prefix = word[: rng.randint(0, len(word))]
            assert ac.prefix_count(prefix) == sum(w.startswith(prefix) for w in words)
            assert (word in ac) == (word in words)
        assert len(ac) == len(words)


def test_large_vocabulary():
    rng = random.Random(9)
    ac = Autocomplete()
    words = {}
    for i in range(30_000):
        word = "".join(rng.choice("etaoinshr") for _ in range(rng.randint(3, 9)))
        words[word] = i % 97
        ac.add(word, i % 97)
    assert len(ac) == len(words) == ac.prefix_count("")
    for prefix in ["e", "ta", "sho", "rrr", "zz"]:
        assert ac.suggest(prefix, 5) == oracle_suggest(words, prefix, 5)
        assert ac.prefix_count(prefix) == sum(w.startswith(prefix) for w in words)
