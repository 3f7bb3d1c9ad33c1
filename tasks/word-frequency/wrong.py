import re
from collections import Counter


def top_words(text: str, k: int) -> list[tuple[str, int]]:
    if k < 0:
        raise ValueError("k must be >= 0")
    counts = Counter(w.lower() for w in re.findall(r"[A-Za-z']+", text))
    return counts.most_common(k)
