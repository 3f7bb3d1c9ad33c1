CLASSIC = [(3, "Fizz"), (5, "Buzz")]


class FizzBuzz:
    def __init__(self, rules: list[tuple[int, str]] | None = None) -> None:
        self._rules = CLASSIC if rules is None else rules
        for divisor, word in self._rules:
            self._validate(divisor, word)

    @staticmethod
    def _validate(divisor: int, word: str) -> None:
        if not isinstance(divisor, int) or divisor <= 0:
            raise ValueError(f"divisor must be a positive int, got {divisor!r}")
        if not word:
            raise ValueError("word must be a non-empty string")

    def add_rule(self, divisor: int, word: str) -> "FizzBuzz":
        self._validate(divisor, word)
        self._rules.append((divisor, word))
        return self

    def word(self, n: int) -> str:
        return "".join(word for divisor, word in self._rules if n % divisor == 0) or str(n)

    def series(self, start: int, stop: int) -> list[str]:
        return [self.word(n) for n in range(start, stop)]

    @property
    def rules(self) -> list[tuple[int, str]]:
        return list(self._rules)
