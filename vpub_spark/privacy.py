"""The privacy criteria a group of rows can be held to besides 000's l-diversity (the
config's `privacy.also`, `vpub check --model`): one `Criterion` per model, in
`CRITERIA`. The config validates through it, the publish checks refuse through it,
`vpub check` and both engines' class summaries measure and judge through it, and the
audit loops over it (computing its own measures). Adding a criterion over a measure
`kernels/classes.py` already computes is one entry here (docs/explanation/architecture.md,
"Where new work goes").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import SpecError

TOLERANCE = 1e-9  # a least measure within this below its threshold meets it (float sums)
MAX_TOLERANCE = 1e-12  # a largest measure (t's EMD) within this above its threshold meets it


@dataclass(frozen=True)
class Criterion:
    """One privacy criterion.

    Attributes:
        key: its name in `privacy.also` and `vpub check --model`.
        title: its name in messages and audit checks.
        symbol: its parameter's letter in labels (`k = 5`).
        measure: the per-class measure it reads (a column of `kernels.classes.MEASURES`).
        worst: `min` when a class meets it with a measure at least the threshold,
            `max` when with a measure below it; a table's level is its worst class's.
        strict: `max` criteria only: the measure must stay strictly below.
        integer: whether its threshold is a whole number.
        low, high, low_open: the thresholds it accepts (`low < v` when `low_open`).
        sensitive: whether it reads the sensitive values (k-anonymity does not: it
            protects identities, so it needs generalized groups, not anatomy's exact QIs).
        guaranteed: for a method whose groups hold no sensitive value above 1/p, whether
            the threshold is met by construction, given (threshold, p).
        refusal: why a publish with such a method is refused when it is not; formatted
            with name (the method), title, key, value, p and letter (l or m).
    """

    key: str
    title: str
    symbol: str
    worst: Literal["min", "max"]
    guaranteed: Callable[[float, int], bool]
    refusal: str
    low: float = 1.0
    high: float = math.inf
    low_open: bool = False
    integer: bool = False
    strict: bool = False
    sensitive: bool = True
    measure: str = ""

    @property
    def column(self) -> str:
        """The class measure it reads (its key unless `measure` names another)."""
        return self.measure or self.key

    def problem(self, value: Any) -> str | None:
        """Why `value` is no threshold of this criterion (None: it is one).

        Args:
            value: a threshold as the config or the command line gives it.

        Returns:
            `must be ...` words for an error message, or None.
        """
        if self._accepts(value):
            return None
        words = "a whole number" if self.integer else "a number"
        low = f"above {self.low:g}" if self.low_open else f"at least {self.low:g}"
        limits = low + (f" and at most {self.high:g}" if math.isfinite(self.high) else "")
        return f"must be {words} {limits}"

    def _accepts(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        try:  # a threshold is compared with float measures: it must be one
            as_float = float(value)
        except OverflowError:
            return False
        if not math.isfinite(as_float) or (self.integer and not as_float.is_integer()):
            return False
        above_low = value > self.low if self.low_open else value >= self.low
        return above_low and value <= self.high

    def meets(self, level: Any, value: float) -> Any:
        """Whether a measured level meets the threshold: on a float, a pandas Series or
        a Spark column alike."""
        if self.worst == "min":
            return level >= value - TOLERANCE
        return level < value if self.strict else level <= value + MAX_TOLERANCE

    def label(self, value: float, l: int | None = None) -> str:
        """The check's name in `vpub check`: `k-anonymity (k = 5)`."""
        extra = f", l = {l}" if self.key == "recursive_c" and l is not None else ""
        return f"{self.title} ({self.symbol} = {value:g}{extra})"

    def refused(self, value: float, p: int, name: str, letter: str) -> str | None:
        """Why a method whose groups' shares are at most 1/p cannot promise `value`.

        Args:
            value: the threshold asked for.
            p: the method's l (or m).
            name: the method, as messages name it.
            letter: `l` or `m`.

        Returns:
            The refusal's message, or None when the method guarantees it.
        """
        if self.guaranteed(value, p):
            return None
        return self.refusal.format(
            name=name, title=self.title, key=self.key, value=value, p=p, letter=letter
        )


_RAISE = (
    "{name} guarantees {title} up to {p} (its groups' shares are at most 1/{p}); "
    "raise {letter} to {value:g} or lower privacy.also.{key}"
)
CRITERIA: dict[str, Criterion] = {
    c.key: c
    for c in (
        Criterion(
            "k",
            "k-anonymity",
            "k",
            "min",
            lambda v, p: v <= p,
            "{name} guarantees groups of at least {p} rows; k = {value:g} needs a larger {letter}",
            integer=True,
            sensitive=False,
        ),
        Criterion(
            "distinct_l",
            "distinct l-diversity",
            "l",
            "min",
            lambda v, p: v <= p,
            _RAISE,
            integer=True,
        ),
        Criterion("entropy_l", "entropy l-diversity", "l", "min", lambda v, p: v <= p, _RAISE),
        Criterion(
            "recursive_c",
            "recursive (c, l)-diversity",
            "c",
            "max",
            lambda v, p: v > 1,
            "{title} is met by {name} for every c > 1, not for c = {value:g}",
            low=0.0,
            low_open=True,
            strict=True,
        ),
        Criterion(
            "t",
            "t-closeness",
            "t",
            "max",
            lambda v, p: False,
            "no method of this version enforces t-closeness; measure it with "
            "`vpub check DATA --qi ... --sa ... --model t=...`",
            low=0.0,
            high=1.0,
        ),
    )
}
ALIASES = {"l": "distinct_l", "c": "recursive_c"}  # `vpub check --model`'s short keys


def worst_of(measure: str) -> Literal["min", "max"]:
    """How a table's level of a class measure is read: the least or the largest class's.

    Args:
        measure: a column of `kernels.classes.MEASURES`.

    Returns:
        `min` or `max`, as the criteria reading it say.
    """
    return next(c.worst for c in CRITERIA.values() if c.column == measure)


def criterion(key: str, where: str) -> Criterion:
    """The criterion named `key`.

    Args:
        key: a criterion's key.
        where: the key's place, for the message (`privacy.also`).

    Returns:
        The criterion.

    Raises:
        SpecError: no criterion has that key.
    """
    found = CRITERIA.get(key) if isinstance(key, str) else None
    if found is None:
        raise SpecError(f"{where}: unknown model {key!r}; known: {', '.join(CRITERIA)}")
    return found


def thresholds(
    items: Iterable[tuple[Any, Any]], where: str, aliases: Mapping[str, str] | None = None
) -> tuple[tuple[str, float], ...]:
    """Checked (criterion key, threshold) pairs, in the order given.

    Args:
        items: (key, value) pairs as written.
        where: their place, for messages (`privacy.also`, `--model`).
        aliases: short keys accepted for criteria (`ALIASES`, on the command line).

    Returns:
        The pairs, each value a number its criterion accepts.

    Raises:
        SpecError: an unknown key, a key given twice or a value out of range.
    """
    out: dict[str, float] = {}
    for key, value in items:
        found = criterion((aliases or {}).get(key, key), where)
        problem = found.problem(value)
        if problem:
            raise SpecError(f"{where}.{key} {problem}, not {value!r}")
        if found.key in out:
            raise SpecError(f"{where}: {found.key} is given twice")
        out[found.key] = value
    return tuple(out.items())


def thresholds_from_text(text: str | None) -> tuple[tuple[str, float], ...]:
    """`vpub check --model`'s `k=5,distinct_l=3,entropy_l=2.5,recursive_c=3,t=0.2`
    (`l` and `c` are short for distinct_l and recursive_c).

    Args:
        text: the option's value, or None.

    Returns:
        The checked thresholds.

    Raises:
        SpecError: an item that is not `key=number`, or a threshold out of range.
    """
    items = []
    for item in filter(None, (text or "").replace(" ", "").split(",")):
        key, _, value = item.partition("=")
        known = ALIASES.get(key, key) in CRITERIA
        if not known or not value:
            keys = ", ".join(f"{k}=N" for k in [*CRITERIA, *ALIASES])
            raise SpecError(f"--model: {item!r} is not one of {keys}")
        try:
            number = float(value)
        except ValueError:
            raise SpecError(f"--model: {key} must be a number, not {value!r}") from None
        items.append((key, int(number) if number.is_integer() else number))
    return thresholds(items, "--model", ALIASES)
