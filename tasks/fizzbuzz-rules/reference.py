CLASSIC = ((3, "Fizz"), (5, "Buzz"))


class FizzBuzz:
    def __init__(self, rules: list[tuple[int, str]] | None = None) -> None:
        self._rules: list[tuple[int, str]] = []
        for divisor, word in CLASSIC if rules is None else rules:
            self.add_rule(divisor, word)

    def add_rule(self, divisor: int, word: str) -> "FizzBuzz":
        if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor <= 0:
            raise ValueError(f"divisor must be a positive int, got {divisor!r}")
        if not isinstance(word, str) or not word:
            raise ValueError("word must be a non-empty string")
        self._rules.append((divisor, word))
        return self

    def word(self, n: int) -> str:
        return "".join(word for divisor, word in self._rules if n % divisor == 0) or str(n)

    def series(self, start: int, stop: int) -> list[str]:
        return [self.word(n) for n in range(start, stop)]

    @property
    def rules(self) -> list[tuple[int, str]]:
        return list(self._rules)
