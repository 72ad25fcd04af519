"""PostgreSQL's full-text index: its own text search (`tsvector`, `tsquery`, GIN) over words, answering the same
substring queries as SQLite's trigram index (store/search.py).

Each record's lowercased text is cut into words (runs of `\\w`), and the set of its words is stored as a
`tsvector` under a GIN index, lexemes taken as they are (no parser, no stemming). Every distinct word also
goes into `search_words`, the vocabulary. A query term is found anywhere inside words, so it is turned into
words first: for each run of `\\w` in the term, the vocabulary's words that contain it (a run in the middle
of a term is a whole word of the text; one at an end may be part of a longer word, so "contains" never
misses). A record can hold the term only if, for every run, it holds one of those words; the tsquery asks
exactly that, and the stored text decides, as on SQLite. A run found in more than `MAX_WORDS` words narrows
too little to be worth asking and is left out; a term with no run left scans.

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
    clauses = []
    for run in dict.fromkeys(WORD.findall(needle)):
        if run not in cache:
            found = [w for (w,) in cur.execute("SELECT word FROM search_words WHERE strpos(word, ?) > 0 LIMIT ?",
                                               (run, MAX_WORDS + 1)).fetchall()]
            cache[run] = found if len(found) <= MAX_WORDS else None
        words = cache[run]
        if words is None:
            continue  # too common to narrow anything
        if not words:
            return "' '"  # no word holds it: nothing can match (a space is in no word)
        clauses.append("(" + " | ".join(_lexeme(w) for w in words) + ")")
    return " & ".join(clauses) if clauses else None


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


TSVECTOR = TsvectorIndex()
