"""lib.book: the book's own machinery, apart from the science in ``lib``.

Chapters import both (``import lib`` and ``from lib.book import ...``); ``import lib`` never
imports this package, so the science needs no notebook stack.

    experiments  the experiment registry: every setting that depends on the scale, that a check
                 is argued for or that a stored run uses, with where it stands in the paper
    argued       ArguedSettings: a chapter's checks asserted at the settings they were argued for
    artefacts    the stored paper-scale runs (results/), read back with their checksums
    fidelity     the papers' claims and slips as the chapters record them (the fidelity appendix)
    notebook     what every chapter does the same way: the scale switch, rel_err, stored runs, tables
    plotting     the book's single matplotlib style
"""
