import random

import pytest

from solution import Version

V = Version.parse


def test_parse_fields():
    v = V("1.22.333-rc.1.x-y+build.007")
    assert (v.major, v.minor, v.patch) == (1, 22, 333)
    assert v.prerelease == ("rc", 1, "x-y")
    assert v.build == ("build", "007")
    assert V("0.0.0").prerelease == () and V("0.0.0").build == ()


def test_identifier_types():
    v = V("1.0.0-0a.-1.10.0")
    assert v.prerelease == ("0a", "-1", 10, 0)
    assert isinstance(v.prerelease[2], int) and isinstance(v.prerelease[0], str)


@pytest.mark.parametrize(
    "text", ["1.0.0", "0.1.0-alpha", "1.0.0-alpha.1", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
             "10.20.30-0.3.7", "1.0.0-x.7.z.92", "1.0.0+001", "1.0.0--"]
)
def test_round_trip(text):
    assert str(V(text)) == text


@pytest.mark.parametrize(
    "text",
    ["", "1", "1.0", "1.0.0.0", "01.0.0", "1.02.0", "1.0.00", "v1.0.0", " 1.0.0", "1.0.0 ", "1.0.0-",
     "1.0.0+", "1.0.0-alpha..1", "1.0.0-alpha.01", "1.0.0-al_pha", "1.0.0+bu ild", "-1.0.0", "1.0.0-é",
     "1.a.0", "1.0.0+a..b"],
)
def test_invalid(text):
    with pytest.raises(ValueError):
        V(text)


def test_spec_order_chain():
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
             "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "1.10.0", "2.0.0"]
    versions = [V(t) for t in chain]
    for a, b in zip(versions, versions[1:]):
        assert a < b and b > a and a <= b and b >= a and a != b
    shuffled = versions[:]
    random.Random(3).shuffle(shuffled)
    assert [str(v) for v in sorted(shuffled)] == chain


def test_numeric_identifiers_compare_numerically():
    assert V("1.0.0-2") < V("1.0.0-10")
    assert V("1.0.0-alpha.9") < V("1.0.0-alpha.10")
    assert V("1.0.0-999") < V("1.0.0-a")
    assert V("1.0.0-Z") < V("1.0.0-a")


def test_build_ignored_for_precedence_and_hash():
    a, b = V("1.0.0+a"), V("1.0.0+b.1")
    assert a == b and hash(a) == hash(b)
    assert not a < b and not b < a
    assert len({V("1.2.3"), V("1.2.3+x"), V("1.2.3-1")}) == 2


def test_comparison_with_other_types():
    v = V("1.0.0")
    assert (v == "1.0.0") is False
    assert v != "1.0.0"
    with pytest.raises(TypeError):
        v < "2.0.0"
    with pytest.raises(TypeError):
        v >= 1


def test_immutable():
    v = V("1.0.0")
    with pytest.raises(Exception):
        v.major = 2
    assert v.major == 1


def test_against_oracle():
    def key(v):
        pre = v.prerelease
        return (v.major, v.minor, v.patch, not pre, [(isinstance(p, str), p if isinstance(p, str) else "", p if isinstance(p, int) else 0) for p in pre])

    rng = random.Random(99)
    idents = ["0", "1", "2", "9", "10", "11", "alpha", "beta", "a1", "A", "-", "x-1"]
    texts = []
    for _ in range(200):
        text = f"{rng.randint(0, 2)}.{rng.randint(0, 2)}.{rng.randint(0, 11)}"
        if rng.random() < 0.7:
            text += "-" + ".".join(rng.choice(idents) for _ in range(rng.randint(1, 3)))
        texts.append(text)
    versions = [V(t) for t in texts]
    expected = sorted(versions, key=key)
    assert [key(v) for v in sorted(versions)] == [key(v) for v in expected]
