import random
import string

import pytest

from solution import caesar, vigenere_decrypt, vigenere_encrypt


def test_caesar_basic_and_wrap():
    assert caesar("abc xyz", 3) == "def abc"
    assert caesar("Hello, World!", 13) == "Uryyb, Jbeyq!"
    assert caesar("Zz", 1) == "Aa"


def test_caesar_large_and_negative_shifts():
    assert caesar("Attack", 27) == caesar("Attack", 1)
    assert caesar("abc", -1) == "zab"
    assert caesar("abc", -27) == "zab"
    assert caesar("abc", 0) == "abc"


def test_non_ascii_letters_untouched():
    assert caesar("café ß 123", 1) == "dbgé ß 123"
    assert vigenere_encrypt("éa", "b") == "éb"


def test_vigenere_textbook():
    assert vigenere_encrypt("ATTACKATDAWN", "LEMON") == "LXFOPVEFRNHR"
    assert vigenere_decrypt("LXFOPVEFRNHR", "lemon") == "ATTACKATDAWN"


def test_vigenere_skips_non_letters_in_key_position():
    assert vigenere_encrypt("attack at dawn", "LEMON") == "lxfopv ef rnhr"
    assert vigenere_encrypt("a-a a.a", "ab") == "a-b a.b"
    assert vigenere_decrypt("lxfopv ef rnhr", "Lemon") == "attack at dawn"


def test_vigenere_keeps_case():
    assert vigenere_encrypt("Hello World", "key") == "Rijvs Uyvjn"


def test_bad_keys():
    for key in ["", "k3y", "ke y", "clé"]:
        with pytest.raises(ValueError):
            vigenere_encrypt("text", key)
        with pytest.raises(ValueError):
            vigenere_decrypt("", key)


def test_round_trips_random():
    rng = random.Random(11)
    alphabet = string.ascii_letters + " ,.!?0123456789é"
    for _ in range(200):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        key = "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(1, 8)))
        shift = rng.randint(-100, 100)
        assert caesar(caesar(text, shift), -shift) == text
        enc = vigenere_encrypt(text, key)
        assert len(enc) == len(text)
        assert vigenere_decrypt(enc, key) == text
        letters_only = "".join(c for c in text if c in string.ascii_letters)
        enc_letters = "".join(c for c in enc if c in string.ascii_letters)
        assert vigenere_encrypt(letters_only, key) == enc_letters


def test_single_letter_key_is_caesar():
    assert vigenere_encrypt("The quick brown fox!", "d") == caesar("The quick brown fox!", 3)
