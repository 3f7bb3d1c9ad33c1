import string


def _shift_letter(char: str, shift: int) -> str:
    if char in string.ascii_lowercase:
        base = ord("a")
    elif char in string.ascii_uppercase:
        base = ord("A")
    else:
        return char
    return chr(base + (ord(char) - base + shift) % 26)


def caesar(text: str, shift: int) -> str:
    return "".join(_shift_letter(c, shift) for c in text)


def _key_shifts(key: str) -> list[int]:
    if not key or not all(c in string.ascii_letters for c in key):
        raise ValueError("key must be a non-empty string of ASCII letters")
    return [ord(c) - ord("a") for c in key.lower()]


def _vigenere(text: str, key: str, direction: int) -> str:
    shifts = _key_shifts(key)
    return "".join(_shift_letter(c, direction * shifts[i % len(shifts)]) for i, c in enumerate(text))


def vigenere_encrypt(text: str, key: str) -> str:
    return _vigenere(text, key, 1)


def vigenere_decrypt(text: str, key: str) -> str:
    return _vigenere(text, key, -1)
