"""PostgreSQL's full-text index: its own text search (`tsvector`, `tsquery`, GIN) over words, answering the same
substring queries as SQLite's trigram index (store/search.py).

Each record's lowercased text is cut into words (runs of `\\w`), and the set of its words is stored as a
`tsvector` under a GIN index, lexemes taken as they are (no parser, no stemming). Every distinct word also
goes into `search_words`, the vocabulary. A query term is found anywhere inside words, so each run of `\\w`
in it is asked for as what it must be in the text: a run inside the term is a whole word (a lexeme); the last
run, when the term ends inside a word, the start of one (a prefix, `'run':*`); the first, when the term starts
inside a word, the end of one, and a term of one run any part of one, both through the vocabulary's words
that hold it. The tsquery ANDs these, and the stored text decides, as on SQLite. A run found in more than
`MAX_WORDS` words narrows too little to be worth asking and is left out; a term with no run left scans.

Why words and not trigrams: a tsvector of trigrams made the index four times the size of the content it
indexes (benchmarks/bench_postgres.py); words make it a fraction of it.
A text with a word longer than a lexeme may be, or more words than a tsvector holds, is stored with NULL
words and is always a candidate.
"""
from __future__ import annotations

import re
from typing import Any

WORD = re.compile(r"\w+")
MAX_WORDS = 500  # vocabulary words one run of a query may stand for before it is left out
MAX_WORD_CHARS = 500  # a lexeme holds at most 2 KiB of UTF-8
MAX_ROW_WORDS = 50_000  # a tsvector holds at most 1 MiB


class TsvectorIndex:
    """The `index` of `PostgresStore` (see store/search.py for the contract FTS5 fills on SQLite)."""

    @staticmethod
    def add(cur, index: str, rows: list[tuple[int, str]]) -> None:
        words_of = [(rowid, _words(text)) for rowid, text in rows]
        vocabulary = sorted({w for _, words in words_of if words for w in words})
        if vocabulary:
            cur.execute("INSERT INTO search_words (word) SELECT unnest(?::text[]) ON CONFLICT DO NOTHING",
                        (vocabulary,))
        cur.executemany(f"INSERT INTO {index} (rowid, words) VALUES (?, array_to_tsvector(?::text[]))",
                        [(rowid, words) for rowid, words in words_of])

    @staticmethod
    def remove(cur, index: str, rows: list[tuple[int, str]]) -> None:
        cur.executemany(f"DELETE FROM {index} WHERE rowid = ?", [(rowid,) for rowid, _ in rows])

    @staticmethod
    def matches(index: str) -> str:
        return f"({index}.words @@ ?::tsquery OR {index}.words IS NULL)"

    @staticmethod
    def argument(cur, query: Any) -> str | None:
        """The tsquery every record matching `query` satisfies; None when the records must be scanned."""
        cache: dict[str, list[str] | None] = {}
        groups = []
        for group in query.groups:
            alternatives = [_term(cur, term, cache) for term in group]
            if any(a is None for a in alternatives):
                return None
            groups.append("(" + " | ".join(f"({a})" for a in alternatives) + ")")
        return " & ".join(groups)


def _words(text: str) -> list[str] | None:
    words = set(WORD.findall(text))
    if len(words) > MAX_ROW_WORDS or any(len(w) > MAX_WORD_CHARS for w in words):
        return None
    return sorted(words)


def _term(cur, needle: str, cache: dict[str, list[str] | None]) -> str | None:
    """Every run of a term inside the term is a whole word of the text; only the first may be the end of a longer
    word and only the last the start of one (when the term starts or ends inside a word). So: whole words as
    lexemes, a last run as a prefix (`'run':*`), and a run that may sit anywhere in a word through the vocabulary."""
    runs = list(WORD.finditer(needle))
    clauses = []
    for n, m in enumerate(runs):
        run = m.group()
        open_start = n == 0 and m.start() == 0
        open_end = n == len(runs) - 1 and m.end() == len(needle)
        if not open_start and not open_end:
            clauses.append(_lexeme(run))
        elif not open_start:
            clauses.append(_lexeme(run) + ":*")
        else:
            words = _vocabulary(cur, run, cache, anywhere=open_end)
            if words == []:
                return "' '"  # no word holds it: nothing can match (a space is in no word)
            if words is not None:  # None: too common to narrow anything
                clauses.append("(" + " | ".join(_lexeme(w) for w in words) + ")")
    return " & ".join(clauses) if clauses else None


def _vocabulary(cur, run: str, cache: dict[str, list[str] | None], anywhere: bool) -> list[str] | None:
    """The indexed words that contain `run` (or, not `anywhere`, end with it); None when there are too many."""
    key = run if anywhere else "$" + run
    if key not in cache:
        test = "strpos(word, ?) > 0" if anywhere else "right(word, length(?)) = ?"
        args = (run,) if anywhere else (run, run)
        found = [w for (w,) in cur.execute(f"SELECT word FROM search_words WHERE {test} LIMIT ?",
                                           (*args, MAX_WORDS + 1)).fetchall()]
        cache[key] = found if len(found) <= MAX_WORDS else None
    return cache[key]


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


TSVECTOR = TsvectorIndex()
