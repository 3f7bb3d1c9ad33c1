import threading


class InsufficientFunds(Exception):
    pass


def _check_amount(amount: int) -> None:
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise ValueError(f"amount must be a positive int, got {amount!r}")


class Bank:
    def __init__(self, balances: dict[str, int]) -> None:
        for name, value in balances.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"bad initial balance for {name!r}: {value!r}")
        self._balances = dict(balances)
        self._locks = {name: threading.Lock() for name in self._balances}
        self._all = threading.Lock()

    def _lock(self, account: str) -> threading.Lock:
        if account not in self._locks:
            raise KeyError(account)
        return self._locks[account]

    def balance(self, account: str) -> int:
        with self._lock(account):
            return self._balances[account]

    def deposit(self, account: str, amount: int) -> None:
        _check_amount(amount)
        with self._lock(account):
            self._balances[account] += amount

    def withdraw(self, account: str, amount: int) -> None:
        _check_amount(amount)
        with self._lock(account):
            if self._balances[account] < amount:
                raise InsufficientFunds(account)
            self._balances[account] -= amount

    def transfer(self, source: str, target: str, amount: int) -> None:
        _check_amount(amount)
        first, second = sorted((source, target))
        with self._lock(first), self._lock(second):
            if self._balances[source] < amount:
                raise InsufficientFunds(source)
            self._balances[source] -= amount
            self._balances[target] += amount

    def transfer_many(self, transfers: list[tuple[str, str, int]]) -> None:
        for source, target, amount in transfers:
            _check_amount(amount)
            self._lock(source), self._lock(target)
        names = sorted({n for s, t, _ in transfers for n in (s, t)})
        locks = [self._locks[n] for n in names]
        for lock in locks:
            lock.acquire()
        try:
            working = {n: self._balances[n] for n in names}
            for source, target, amount in transfers:
                if working[source] < amount:
                    raise InsufficientFunds(source)
                working[source] -= amount
                working[target] += amount
            self._balances.update(working)
        finally:
            for lock in reversed(locks):
                lock.release()

    def snapshot(self) -> dict[str, int]:
        names = sorted(self._locks)
        for name in names:
            self._locks[name].acquire()
        try:
            return dict(self._balances)
        finally:
            for name in reversed(names):
                self._locks[name].release()

    def total(self) -> int:
        return sum(self.snapshot().values())
