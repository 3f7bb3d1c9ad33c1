import random
from datetime import datetime, timedelta

import pytest

from solution import Cron

D = datetime


def nxt(expr, when):
    return Cron(expr).next_after(when)


def test_every_minute_is_strictly_after():
    assert nxt("* * * * *", D(2024, 1, 1, 10, 0)) == D(2024, 1, 1, 10, 1)
    assert nxt("* * * * *", D(2024, 1, 1, 10, 0, 30)) == D(2024, 1, 1, 10, 1)
    assert nxt("* * * * *", D(2024, 12, 31, 23, 59, 59, 999)) == D(2025, 1, 1, 0, 0)


def test_daily_and_seconds():
    assert nxt("0 10 * * *", D(2024, 3, 5, 10, 0)) == D(2024, 3, 6, 10, 0)
    assert nxt("0 10 * * *", D(2024, 3, 5, 9, 59, 30)) == D(2024, 3, 5, 10, 0)


def test_business_hours_every_quarter():
    cron = Cron("*/15 9-17 * * mon-fri")
    assert cron.next_after(D(2024, 5, 31, 17, 50)) == D(2024, 6, 3, 9, 0)  # Friday evening -> Monday
    assert cron.next_after(D(2024, 6, 3, 9, 0)) == D(2024, 6, 3, 9, 15)
    assert cron.next_after(D(2024, 6, 3, 17, 45)) == D(2024, 6, 4, 9, 0)


def test_month_rollover_and_names():
    assert nxt("0 0 1 * *", D(2024, 1, 31, 12)) == D(2024, 2, 1)
    assert nxt("30 6 15 JAN,Jul *", D(2024, 1, 15, 6, 30)) == D(2024, 7, 15, 6, 30)
    assert nxt("0 0 1 dec *", D(2024, 12, 1)) == D(2025, 12, 1)


def test_steps_with_start():
    cron = Cron("5/20 * * * *")
    assert [m for m in range(60) if cron.matches(D(2024, 1, 1, 0, m))] == [5, 25, 45]
    cron = Cron("1-10/3,50 * * * *")
    assert [m for m in range(60) if cron.matches(D(2024, 1, 1, 0, m))] == [1, 4, 7, 10, 50]
    cron = Cron("*/100 * * * *")
    assert [m for m in range(60) if cron.matches(D(2024, 1, 1, 0, m))] == [0]


def test_sunday_is_zero_and_seven():
    sunday = D(2024, 6, 2, 8, 0)
    assert Cron("0 8 * * 0").matches(sunday) and Cron("0 8 * * 7").matches(sunday) and Cron("0 8 * * sun").matches(sunday)
    assert Cron("0 8 * * 5-7").matches(sunday)
    assert nxt("0 8 * * 7", D(2024, 6, 2, 8, 0)) == D(2024, 6, 9, 8, 0)


def test_day_rule_or_when_both_restricted():
    cron = Cron("0 0 13 * fri")
    fired = []
    t = D(2024, 9, 1)
    for _ in range(6):
        t = cron.next_after(t)
        fired.append(t.date().isoformat())
    assert fired == ["2024-09-06", "2024-09-13", "2024-09-20", "2024-09-27", "2024-10-04", "2024-10-11"]
    assert nxt("0 0 13 * fri", D(2024, 10, 11)) == D(2024, 10, 13)


def test_star_prefixed_field_is_unrestricted():
    cron = Cron("0 0 */2 * mon")
    assert cron.next_after(D(2024, 6, 1)) == D(2024, 6, 3)
    assert cron.next_after(D(2024, 6, 3)) == D(2024, 6, 10)
    assert not cron.matches(D(2024, 6, 5))
    cron = Cron("0 0 1 * */1")
    assert cron.next_after(D(2024, 6, 1)) == D(2024, 7, 1)


def test_leap_day():
    assert nxt("0 0 29 2 *", D(2023, 3, 1)) == D(2024, 2, 29)
    assert nxt("0 0 29 2 *", D(2097, 3, 1)) == D(2104, 2, 29)


@pytest.mark.parametrize("expr", ["0 0 30 2 *", "0 0 31 4,6 *", "0 0 31 2,9,11 *"])
def test_never_fires(expr):
    with pytest.raises(ValueError):
        Cron(expr).next_after(D(2024, 1, 1))


def test_matches_ignores_seconds():
    assert Cron("30 12 * * *").matches(D(2024, 1, 1, 12, 30, 59))
    assert not Cron("30 12 * * *").matches(D(2024, 1, 1, 12, 31))


@pytest.mark.parametrize(
    "expr",
    ["", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 0 *",
     "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *", "a * * * *", "1,,2 * * * *", "jan * * * *",
     "* * * mon *", "* * * * jan", "-5 * * * *", "*/ * * * *", "1-2-3 * * * *", "1/ * * * *", "*-5 * * * *",
     "1.5 * * * *", "* * * * funday", ", * * * *", "1, * * * *", "*/-1 * * * *"],
)
def test_syntax_errors(expr):
    with pytest.raises(ValueError):
        Cron(expr)


def test_whitespace_is_flexible():
    assert Cron("  0\t10  *  * * ").next_after(D(2024, 1, 1)) == D(2024, 1, 1, 10)


def oracle_next(minutes, hours, days, months, weekdays, days_r, weekdays_r, when):
    day = D(when.year, when.month, when.day)
    for _ in range(800):
        wd = (day.weekday() + 1) % 7
        by_day, by_wd = day.day in days, wd in weekdays
        ok = (by_day or by_wd) if days_r and weekdays_r else by_day if days_r else by_wd if weekdays_r else True
        if day.month in months and ok:
            for h in sorted(hours):
                for m in sorted(minutes):
                    t = day.replace(hour=h, minute=m)
                    if t > when:
                        return t
        day += timedelta(days=1)
    return None


def test_random_against_oracle():
    rng = random.Random(8)

    def field(low, high, star_chance=0.4):
        if rng.random() < star_chance:
            step = rng.choice([1, 2, 3, 7])
            return ("*" if step == 1 else f"*/{step}"), set(range(low, high + 1, step)), False
        picks = sorted(rng.sample(range(low, high + 1), rng.randint(1, 3)))
        return ",".join(map(str, picks)), set(picks), True

    for _ in range(250):
        mf, ms, _ = field(0, 59)
        hf, hs, _ = field(0, 23)
        df, ds, dr = field(1, 28, 0.6)
        mof, mos, _ = field(1, 12, 0.6)
        wf, ws, wr = field(0, 6, 0.6)
        when = D(2024, 1, 1) + timedelta(minutes=rng.randint(0, 525600), seconds=rng.randint(0, 59))
        cron = Cron(f"{mf} {hf} {df} {mof} {wf}")
        expected = oracle_next(ms, hs, ds, mos, ws, dr, wr, when)
        assert expected is not None
        assert cron.next_after(when) == expected, f"{mf} {hf} {df} {mof} {wf} after {when}"
        assert cron.matches(expected)
