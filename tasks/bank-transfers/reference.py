import threading
from contextlib import ExitStack


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

    def _locked(self, *accounts: str) -> ExitStack:
        """Lock each distinct account once, always in sorted order, so no two callers can deadlock."""
        for name in accounts:
            if name not in self._locks:
                raise KeyError(name)
        stack = ExitStack()
        for name in sorted(set(accounts)):
            stack.enter_context(self._locks[name])
        return stack

    def balance(self, account: str) -> int:
        with self._locked(account):
            return self._balances[account]

    def deposit(self, account: str, amount: int) -> None:
        _check_amount(amount)
        with self._locked(account):
            self._balances[account] += amount

    def withdraw(self, account: str, amount: int) -> None:
        _check_amount(amount)
        with self._locked(account):
            if self._balances[account] < amount:
                raise InsufficientFunds(account)
            self._balances[account] -= amount

    def transfer(self, source: str, target: str, amount: int) -> None:
        self.transfer_many([(source, target, amount)])

    def transfer_many(self, transfers: list[tuple[str, str, int]]) -> None:
        for _, _, amount in transfers:
            _check_amount(amount)
        accounts = [name for source, target, _ in transfers for name in (source, target)]
        with self._locked(*accounts):
            working = {name: self._balances[name] for name in accounts}
            for source, target, amount in transfers:
                if working[source] < amount:
                    raise InsufficientFunds(source)
                working[source] -= amount
                working[target] += amount
            self._balances.update(working)

    def snapshot(self) -> dict[str, int]:
        with self._locked(*self._balances):
            return dict(self._balances)

    def total(self) -> int:
        return sum(self.snapshot().values())
