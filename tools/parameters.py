"""The grammar of a parameter's accepted range: it lives in :mod:`lib.book.parameters` (one home,
which a chapter's notebook imports too); the tools import it from here."""
from lib.book.parameters import (Declared, ParameterError, Range, RangeError, Relation,  # noqa: F401
                                 check, conforms, declared, declared_in_source, parse, split_comment)
