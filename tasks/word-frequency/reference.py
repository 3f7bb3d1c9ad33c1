import re
from collections import Counter


def top_words(text: str, k: int) -> list[tuple[str, int]]:
    if k < 0:
        raise ValueError("k must be >= 0")
    words = (w.strip("'").lower() for w in re.findall(r"[A-Za-z']+", text))
    counts = Counter(w for w in words if w)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]
