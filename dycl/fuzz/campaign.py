"""A fuzzing campaign: N programs from one seed, failures shrunk into regression tests, one summary."""

from __future__ import annotations

import functools
import itertools
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import dycl
from dycl.fuzz.features import features_at, program_features
from dycl.fuzz.generator import FEATURES, generate
from dycl.fuzz.program import Program, count_lines, render_classes
from dycl.fuzz.regression import write_regression
from dycl.fuzz.runner import STATUS_ORDER, TRAINING_REASON, Checked, CompileFn, Discarded, Outcome, check_program
from dycl.fuzz.shrink import shrink
from dycl.hcfg.levers import Levers

MANY_PATHS = 3
MAX_ATTEMPTS = 50


@dataclass
class Failure:
    """A failing program, its shrunk form and the regression file written for it."""

    checked: Checked
    outcome: Outcome
    shrunk: Program | None = None
    shrunk_outcome: Outcome | None = None
    regression: Path | None = None


@dataclass
class Summary:
    seed: int
    backends: list[str]
    programs: int = 0
    inconsistencies: int = 0
    errors: int = 0
    unsupported: int = 0
    discarded: int = 0
    many_paths: int = 0
    seconds: float = 0.0
    check_seconds: float = 0.0
    shrink_seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    features: Counter[str] = field(default_factory=Counter)  # feature -> programs using it
    feature_status: dict[str, Counter[str]] = field(default_factory=dict)  # feature -> status -> programs
    refusals: Counter[str] = field(default_factory=Counter)  # refusal reason -> programs refused for it
    refused_at_own_line: Counter[str] = field(default_factory=Counter)  # feature -> programs refused at its text

    @property
    def share_many_paths(self) -> float:
        return self.many_paths / self.programs if self.programs else 0.0

    @property
    def failed(self) -> bool:
        """Whether the campaign found an inconsistency or an unexpected error (the exit status)."""
        return bool(self.inconsistencies or self.errors)

    def count(self, checked: Checked) -> None:
        """Add one checked program to the counts."""
        self.programs += 1
        self.many_paths += checked.paths >= MANY_PATHS
        self.check_seconds += checked.eager_seconds + sum(o.seconds for o in checked.outcomes)
        status = checked.status
        self.inconsistencies += status == "inconsistent"
        self.errors += status == "error"
        self.unsupported += status == "unsupported"
        features = program_features(checked.program)
        if status == "unsupported":
            self.refusals[_reason(checked)] += 1
            self.refused_at_own_line.update(refusing_features(checked) & features)
        for feature in features:
            self.features[feature] += 1
            self.feature_status.setdefault(feature, Counter())[status] += 1

    @property
    def share_refused(self) -> float:
        """The share of programs refused, training mode aside (issue 27's measure): programs refused
        for train mode count in neither the refused nor the total."""
        training = self.refusals[TRAINING_REASON]
        rest = self.programs - training
        return (self.unsupported - training) / rest if rest else 0.0

    def refusal_lines(self) -> list[str]:
        """Per refusal reason, the programs refused for it, most first (a program counts once, for
        the reason of its first refusing backend)."""
        lines = [f"fuzz: refused {count}: {reason}" for reason, count in self.refusals.most_common()]
        return lines + [f"fuzz: {100 * self.share_refused:.1f}% refused, training mode aside "
                        f"({self.unsupported - self.refusals[TRAINING_REASON]} of "
                        f"{self.programs - self.refusals[TRAINING_REASON]})"]

    def share(self, feature: str) -> float:
        """The share of programs that use ``feature``."""
        return self.features[feature] / self.programs if self.programs else 0.0

    def line(self) -> str:
        shares = ", ".join(f"{name} {100 * self.share(name):.0f}%" for name in FEATURES)
        return (f"fuzz: {self.programs} programs, {self.inconsistencies} inconsistencies, "
                f"{self.errors} compile errors, {self.unsupported} unsupported, {self.discarded} discarded, "
                f"{100 * self.share_many_paths:.1f}% with >={MANY_PATHS} paths "
                f"(seed {self.seed}, backends {'+'.join(self.backends)}, {self.seconds:.1f} s); features: {shares}")

    def feature_lines(self) -> list[str]:
        """Per feature: how many programs use it and how they ended (a program counts for each of its
        features), and of the refused ones, how many were refused at the feature's own text (a refusal
        elsewhere is another construct's)."""
        out = []
        for name in FEATURES:
            statuses = self.feature_status.get(name, Counter())
            ends = ", ".join(f"{statuses[s]} {s}" + (f" ({self.refused_at_own_line[name]} at its own line)"
                                                      if s == "unsupported" else "")
                             for s in STATUS_ORDER if statuses[s])
            out.append(f"fuzz: feature {name}: {self.features[name]} programs" + (f" ({ends})" if ends else ""))
        return out


def _still_fails(outcome: Outcome, directory: Path, compile_fn: CompileFn, timeout: float | None,
                 found: list[Checked]) -> Callable[[Program], bool]:
    """The shrinker's test: the candidate fails on ``outcome.backend`` with the same signature."""
    counter = itertools.count()

    def still_fails(candidate: Program) -> bool:
        stem = f"{candidate.name}_shrink{next(counter)}"
        try:
            checked = check_program(candidate, directory, [outcome.backend], compile_fn, timeout=timeout, stem=stem)
        except Discarded:
            return False
        finally:
            (directory / f"{stem}.py").unlink(missing_ok=True)
        if checked.outcomes[0].signature() == outcome.signature():
            found.append(checked)
            return True
        return False

    return still_fails


def shrink_failure(checked: Checked, outcome: Outcome, directory: Path, compile_fn: CompileFn = dycl.compile,
                   timeout: float | None = None, log: Callable[[str], None] | None = None,
                   max_seconds: float = 600.0) -> tuple[Program, Outcome, Checked]:
    """Shrink ``checked.program`` keeping the failure ``outcome``; returns the program, its outcome
    and its check (whose inputs reproduce it)."""
    found: list[Checked] = [replace(checked, outcomes=[outcome])]
    still_fails = _still_fails(outcome, directory / "shrink", compile_fn, timeout, found)
    program = shrink(checked.program, still_fails, log=log, max_seconds=max_seconds)
    # the result is the last accepted candidate, whose check was recorded when it was accepted
    return program, found[-1].outcomes[0], found[-1]


def failure_kind(outcome: Outcome) -> tuple[str, ...]:
    """The signature plus the message with numbers and quoted names blanked: failures of the same
    kind probably share a cause (every inconsistency has the same kind)."""
    if outcome.status == "inconsistent":
        return outcome.signature()
    message = outcome.detail.split(": ", 1)[-1] if outcome.detail.startswith("input #") else outcome.detail
    message = re.sub(r"'[^']*'|\"[^\"]*\"", "'_'", message.splitlines()[0] if message else "")
    return outcome.signature() + (re.sub(r"\d+", "N", message),)


def _shrunk_key(program: Program) -> str:
    """The shrunk program's code without its class name and layer widths, to spot duplicate reproducers."""
    source = render_classes(program).replace(program.name, "Model")
    source = re.sub(r"\((\d+), \1\)", "(W, W)", source)
    return source


def _reason(checked: Checked) -> str:
    return next(o.reason for o in checked.outcomes if o.status == "unsupported")


#: the user's line an ``UnsupportedError`` quotes: ``    30 |         marks = ...``
_QUOTED_LINE = re.compile(r"^\s*\d+ \|(.*)$", re.MULTILINE)


def refusing_features(checked: Checked) -> frozenset[str]:
    """The features whose own text is the line the (first) refusal of ``checked`` quotes; ``train-mode``
    for a refusal of training mode (a flag of the program, with no line of its own)."""
    outcome = next(o for o in checked.outcomes if o.status == "unsupported")
    if outcome.reason == TRAINING_REASON:
        return frozenset({"train-mode"})
    quoted = _QUOTED_LINE.search(outcome.detail)
    return features_at(quoted.group(1)) if quoted else frozenset()


def _failing_inputs(checked: Checked, outcome: Outcome, limit: int = 3) -> tuple[list, int | None]:
    """The example and up to ``limit`` failing inputs of ``checked``, and the index among them of the
    first special-valued one (None if none is)."""
    chosen = [0] + [i for i in outcome.failing if i != 0][:limit]
    start = checked.special_from
    special = [j for j, i in enumerate(chosen) if start is not None and i >= start]
    return [checked.inputs[i] for i in chosen], (special[0] if special else None)


def run_campaign(n: int, seed: int, backends: Sequence[str], out_dir: Path, regressions: Path | None,
                 compile_fn: CompileFn = dycl.compile, exclude: frozenset[str] = frozenset(),
                 verbose: bool = False, max_shrinks: int = 10, timeout: float | None = 300.0, xfail: bool = False,
                 echo: Callable[[str], None] = print, levers: Levers | None = None) -> Summary:
    """Check programs ``0..n-1`` of ``seed``; shrink failures (the first ``max_shrinks``, and up to
    ``max_shrinks`` more with an error message not seen before) into regression tests in ``regressions``
    (one per distinct shrunk program). ``levers``: every program compiled with them (``optimize=``),
    and the regression tests too."""
    start = time.perf_counter()
    if levers is not None:
        compile_fn = functools.partial(compile_fn, optimize=levers)
    campaign = _Campaign(Summary(seed, list(backends)), out_dir, regressions, compile_fn, timeout, verbose, xfail,
                         max_shrinks, echo, levers)
    for index in range(n):
        checked = campaign.check(index, exclude)
        campaign.summary.count(checked)
        campaign.tell(index, checked)
        if checked.status in ("error", "inconsistent"):  # a refusal is no failure: never shrunk nor written
            campaign.fail(checked)
    campaign.summary.seconds = time.perf_counter() - start
    return campaign.summary


@dataclass
class _Campaign:
    """One campaign's settings (``run_campaign``'s arguments), its summary and what
    its shrinking has seen so far."""

    summary: Summary
    out_dir: Path
    regressions: Path | None
    compile_fn: CompileFn
    timeout: float | None
    verbose: bool
    xfail: bool
    max_shrinks: int
    echo: Callable[[str], None]
    levers: Levers | None = None
    shrinks: int = 0
    kinds_seen: set[tuple[str, ...]] = field(default_factory=set)
    reproducers: dict[str, Path] = field(default_factory=dict)  # shrunk program (normalised) -> its regression file

    def check(self, index: int, exclude: frozenset[str]) -> Checked:
        """Program ``index`` checked on every backend; a program that fails eagerly is
        discarded and the next attempt drawn, ``MAX_ATTEMPTS`` times at most."""
        summary = self.summary
        for attempt in range(MAX_ATTEMPTS):
            program = generate(summary.seed, index, attempt, exclude)
            try:
                return check_program(program, self.out_dir, summary.backends, self.compile_fn, timeout=self.timeout)
            except Discarded as exc:
                summary.discarded += 1
                if self.verbose:
                    self.echo(f"[{index}] {program.name}: discarded ({exc})")
        raise RuntimeError(f"program {index}: {MAX_ATTEMPTS} discarded attempts in a row")

    def tell(self, index: int, checked: Checked) -> None:
        """Echo how the program ended (every program when verbose, else the failures)."""
        status, program = checked.status, checked.program
        if not self.verbose and status == "ok":
            return
        times = ", ".join(f"{o.backend} {o.seconds:.2f} s" for o in checked.outcomes)
        features = ", ".join(sorted(program_features(program))) or "no features"
        self.echo(f"[{index}] {program.name}: {status} ({checked.paths} paths, {count_lines(program)} lines, "
                  f"{times}; {features})")
        for o in checked.failures():
            self.echo(f"    {o.backend}: {o.status}: {o.detail[:300]}")

    def fail(self, checked: Checked) -> None:
        """Record a failing program (an inconsistency or an error); shrink the first ``max_shrinks`` failures, and up to
        ``max_shrinks`` more of kinds not seen yet."""
        worst = max(checked.failures(), key=lambda o: STATUS_ORDER.index(o.status))
        failure = Failure(checked, worst)
        self.summary.failures.append(failure)
        kind = failure_kind(worst)
        new_kind = kind not in self.kinds_seen
        self.kinds_seen.add(kind)
        if self.shrinks < self.max_shrinks or (new_kind and self.shrinks < 2 * self.max_shrinks):
            self.shrinks += 1
            self.shrink(failure)

    def shrink(self, failure: Failure) -> None:
        """Shrink ``failure`` and write its regression test, unless an earlier failure shrank to the same program."""
        shrink_start = time.perf_counter()
        shrunk, outcome, checked = shrink_failure(failure.checked, failure.outcome, self.out_dir, self.compile_fn,
                                                  self.timeout)
        self.summary.shrink_seconds += time.perf_counter() - shrink_start
        failure.shrunk, failure.shrunk_outcome = shrunk, outcome
        original_lines = count_lines(failure.checked.program)
        self.echo(f"    shrunk {original_lines} -> {count_lines(shrunk)} lines ({outcome.backend}: "
                  f"{outcome.status}: {outcome.detail[:200]})")
        if self.verbose:
            self.echo(render_classes(shrunk))
        key = _shrunk_key(shrunk)
        if key in self.reproducers:
            failure.regression = self.reproducers[key]
            self.echo(f"    same reproducer as {failure.regression}")
        elif self.regressions is not None:
            inputs, special_from = _failing_inputs(checked, outcome)
            failure.regression = write_regression(self.regressions, shrunk, outcome, inputs, original_lines,
                                                  self.xfail, self.levers, special_from)
            self.reproducers[key] = failure.regression
            self.echo(f"    regression test: {failure.regression}")
