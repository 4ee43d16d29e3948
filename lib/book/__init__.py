"""lib.book: the book's own machinery, apart from the science in ``lib``.

Chapters import both (``import lib`` and ``from lib.book import ...``); ``import lib`` never
imports this package, so the science needs no notebook stack (tests/test_import_graph.py: no
module of the science imports it).  It lives inside ``lib`` only so that the chapters, the tools
and the tests import one installed package; it reads the book's files -- the experiment
registry ``book/experiments``, the claims ledgers ``book/claims``, the stored runs ``results/`` of
the checkout -- only when a function asks for them, never when it is imported.

    experiments  the experiment registry: every setting that depends on the scale, that a check
                 is argued for or that a stored run uses, with where it stands in the paper
    argued       ArguedSettings: a chapter's checks asserted at the settings they were argued for
    artefacts    the stored paper-scale runs (results/), read back with their checksums
    fidelity     the papers' claims and slips as the chapters record them (the fidelity appendix)
    notebook     what every chapter does the same way: the scale switch, rel_err, stored runs, tables
    plotting     the book's single matplotlib style
    buildtime    the build time the reproducibility appendix reports: measured chapters only
"""
