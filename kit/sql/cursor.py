"""A position in a token list, with the look-ahead and ``expect`` every parser rule uses."""

from __future__ import annotations

from .errors import SqlError
from .lexer import Token

__all__ = ["Cursor"]


class Cursor:
    """Reads ``tokens`` of ``text`` from index ``i``; errors point at the current token."""

    def __init__(self, text: str, tokens: list[Token], i: int = 0):
        self.text = text
        self.tokens = tokens
        self.i = i

    def peek(self, k: int = 0) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.peek()
        if tok.kind != "EOF":
            self.i += 1
        return tok

    def at(self, *words: str) -> bool:
        return self.peek().is_word(*words)

    def at_op(self, *ops: str) -> bool:
        tok = self.peek()
        return tok.kind == "OP" and tok.value in ops

    def accept(self, *words: str) -> Token | None:
        return self.next() if self.at(*words) else None

    def accept_op(self, *ops: str) -> Token | None:
        return self.next() if self.at_op(*ops) else None

    def expect(self, word: str) -> Token:
        if not self.at(word):
            raise self.error(f"expected '{word}'")
        return self.next()

    def expect_op(self, op: str) -> Token:
        if not self.at_op(op):
            raise self.error(f"expected '{op}'")
        return self.next()

    def expect_words(self, *words: str) -> Token:
        """``expect`` each of ``words`` in turn; returns the first token."""
        first = self.expect(words[0])
        for word in words[1:]:
            self.expect(word)
        return first

    def identifier(self, what: str = "an identifier") -> Token:
        """An identifier token (plain or back-quoted, not a reserved word)."""
        if self.peek().kind != "IDENT":
            raise self.error(f"expected {what}")
        return self.next()

    def error(self, message: str, tok: Token | None = None, found: bool = True) -> SqlError:
        """A SqlError at ``tok`` (default: the current token); ``found`` appends what is there."""
        tok = tok or self.peek()
        if found:
            message += f" but found {self.describe(tok)}"
        return SqlError(message, tok.line, tok.column, self.text)


    def describe(self, tok: Token) -> str:
        """How an error message names a token: as written (``'DEFINE'``) or ``end of input``."""
        return "end of input" if tok.kind == "EOF" else f"'{self.text[tok.start:tok.end][:40]}'"
