"""The patterns of permission rules: path and host globs, and command patterns matched on a
command's parsed words.

Threats: a tenant's config (or an operator's policy) writes the patterns, the model writes
what they are matched against. A pattern is compiled here once, by a translator of our own
(``*``, ``?``, ``[...]``, and ``**`` across ``/`` in paths), so a malformed one (an unclosed
``[``, a NUL, an empty pattern) is a config error when the config is loaded, never a surprise
at call time, and matched without backtracking (``Glob``), so no pattern makes a match cost
more than text length times pattern length. The model's side is bounded too: a command is parsed
only up to ``MAX_COMMAND_CHARS`` (a longer one cannot be allowed by a rule, only asked or
denied), and a command that cannot be parsed for certain (substitutions, here-documents,
unbalanced quotes) is never allowed by an ``allow`` rule.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from typing import Any

#: Longest pattern a rule may hold.
MAX_PATTERN_CHARS = 512
#: Longest command parsed into words; past it a command is matched as uncertain.
MAX_COMMAND_CHARS = 16_384
#: Shell operators that separate the simple commands of a command line.
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "{", "}", "!"})
#: Text that makes a command line impossible to split into words for certain: command and
#: process substitution, here-documents, line continuations and newlines.
_UNCERTAIN = ("$(", "`", "<(", ">(", "<<", "\\\n", "\n", "\r")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


class PatternError(ValueError):
    """A pattern that cannot be compiled; its message says why."""


class Glob:
    """A compiled glob. One with at most one wildcard run is a regular expression (it cannot
    backtrack more than once over the text); any other is matched by stepping a set of
    pattern positions over the text (a Thompson NFA): time linear in text times pattern, where
    a regular expression with several ``.*`` backtracks polynomially on a hostile text."""

    __slots__ = ("path", "regex", "tokens")

    def __init__(self, tokens: list[tuple[str, Any]], path: bool) -> None:
        self.tokens = tokens
        self.path = path
        self.regex = _regex(tokens, path) if _stars(tokens) <= 1 else None

    def fullmatch(self, text: str) -> bool:
        if self.regex is not None:
            return self.regex.fullmatch(text) is not None
        tokens, end = self.tokens, len(self.tokens)
        states = self._closure({0})
        for c in text:
            step: set[int] = set()
            for i in states:
                if i == end:
                    continue
                kind, data = tokens[i]
                if kind == "lit":
                    if c == data:
                        step.add(i + 1)
                elif kind == "any":
                    if not (self.path and c == "/"):
                        step.add(i + 1)
                elif kind == "class":
                    if data.fullmatch(c):
                        step.add(i + 1)
                elif kind == "star":
                    if not (self.path and c == "/"):
                        step.add(i)
                elif kind == "globstar":
                    step.add(i)
                else:  # "dirs": ``**/``, any whole directories
                    step.add(i)
                    if c == "/":
                        step.add(i + 1)
            if not step:
                return False
            states = self._closure(step)
        return end in states

    def _closure(self, states: set[int]) -> set[int]:
        out, todo = set(states), list(states)
        while todo:
            i = todo.pop()
            wild = i < len(self.tokens) and self.tokens[i][0] in ("star", "globstar", "dirs")
            if wild and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return out


def _stars(tokens: list[tuple[str, Any]]) -> int:
    return sum(kind in ("star", "globstar", "dirs") for kind, _ in tokens)


def _regex(tokens: list[tuple[str, Any]], path: bool) -> re.Pattern[str]:
    one = "[^/]" if path else "."
    parts = {
        "any": one,
        "star": one + "*",
        "globstar": ".*",
        "dirs": "(?:.*/)?",
    }
    out = [
        re.escape(data) if kind == "lit" else data.pattern if kind == "class" else parts[kind]
        for kind, data in tokens
    ]
    return re.compile("".join(out), re.DOTALL)


def compile_glob(pattern: str, *, path: bool = False) -> Glob:
    """``pattern`` compiled. ``path``: ``*`` and ``?`` stop at ``/`` and ``**`` crosses it
    (``src/**`` is everything under ``src``; ``**/x`` is ``x`` anywhere)."""
    if not pattern:
        raise PatternError("a pattern may not be empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern may hold at most {MAX_PATTERN_CHARS} characters")
    if "\x00" in pattern:
        raise PatternError("a pattern may not contain a NUL byte")
    tokens: list[tuple[str, Any]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if path and pattern.startswith("**", i):
                i += 2
                if i < n and pattern[i] == "/":
                    tokens.append(("dirs", None))
                    i += 1
                else:
                    tokens.append(("globstar", None))
                continue
            while i < n and pattern[i] == "*":
                i += 1
            tokens.append(("star", None))
            continue
        if c == "?":
            tokens.append(("any", None))
        elif c == "[":
            end = pattern.find("]", i + 2 if pattern.startswith(("[!", "[^"), i) else i + 1)
            if end < 0:
                raise PatternError(f"unclosed '[' in {pattern!r}")
            body = pattern[i + 1 : end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            if not body:
                raise PatternError(f"empty '[]' in {pattern!r}")
            escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
            try:
                one = re.compile(f"[{'^' if negate else ''}{escaped}]", re.DOTALL)
            except re.error as exc:
                raise PatternError(f"cannot compile {pattern!r}: {exc}") from None
            tokens.append(("class", one))
            i = end
        else:
            tokens.append(("lit", c))
        i += 1
    return Glob(tokens, path)


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A command pattern: its words, each a glob; it matches a simple command whose first
    words (after ``VAR=value`` assignments) match them one by one. A last word ``*`` matches
    any rest, none included: ``git push *`` is ``git push`` with or without arguments."""

    text: str
    words: tuple[Glob, ...]
    open_end: bool

    @classmethod
    def parse(cls, text: str) -> CommandPattern:
        if len(text) > MAX_PATTERN_CHARS:
            raise PatternError(f"a pattern may hold at most {MAX_PATTERN_CHARS} characters")
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise PatternError(f"cannot split {text!r} into words: {exc}") from None
        if not words:
            raise PatternError("a command pattern needs at least one word")
        open_end = words[-1] == "*" and len(words) > 1
        if open_end:
            words = words[:-1]
        return cls(text, tuple(compile_glob(w) for w in words), open_end)

    def matches(self, command: tuple[str, ...]) -> bool:
        if len(command) < len(self.words) or (
            not self.open_end and len(command) != len(self.words)
        ):
            return False
        return all(p.fullmatch(w) for p, w in zip(self.words, command, strict=False))

    def occurs_in(self, words: tuple[str, ...]) -> bool:
        """Whether the pattern's words match at any position of ``words`` (the rest after
        them ignored): how an ``ask`` or ``deny`` pattern reads a command it cannot trust."""
        size = len(self.words)
        return any(
            all(p.fullmatch(w) for p, w in zip(self.words, words[at : at + size], strict=True))
            for at in range(len(words) - size + 1)
        )


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    """A command line as simple commands of words. ``certain``: split with no construct that
    could hide another command (else a rule may only ask about or deny it). ``nested``: the
    quoted words re-read as commands, for ``ask`` and ``deny`` patterns only."""

    commands: tuple[tuple[str, ...], ...]
    certain: bool
    nested: tuple[tuple[str, ...], ...] = ()


@functools.lru_cache(maxsize=256)
def parse_command(command: str) -> ParsedCommand:
    """The simple commands of ``command``; quoted words are re-read as commands too (``bash
    -c 'rm -rf x'``, ``xargs rm``), so an ``ask`` or ``deny`` pattern finds what they run."""
    certain = len(command) <= MAX_COMMAND_CHARS and not any(u in command for u in _UNCERTAIN)
    text = command[:MAX_COMMAND_CHARS]
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return ParsedCommand((tuple(text.split()),), False)
    commands: list[tuple[str, ...]] = []
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if current:
                commands.append(_without_assignments(current))
            current = []
        elif set(token) <= set("<>&|;()"):
            certain = False  # a redirection or an operator shlex could not name
            current.append(token)
        else:
            current.append(token)
    if current:
        commands.append(_without_assignments(current))
    nested = tuple(tuple(w.split()) for c in commands for w in c if " " in w.strip())
    return ParsedCommand(tuple(c for c in commands if c), certain, nested)


def _without_assignments(words: list[str]) -> tuple[str, ...]:
    at = 0
    while at < len(words) - 1 and _ASSIGNMENT.match(words[at]):
        at += 1
    return tuple(words[at:])
