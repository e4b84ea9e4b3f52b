"""The audit matrix: every method that exchanges messages against every shipped threat model.

``securefg audit --matrix`` runs :mod:`.plan`'s cells (:mod:`.cell_runner`, one audit each),
traces the epsilon-utility curve of each declared release that exceeded its margin
(:mod:`.curves`) and writes ``docs/privacy-matrix.md`` with its JSON (:mod:`.page`).
"""
