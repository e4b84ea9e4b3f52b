"""Reproduce a paper's table in one command: cells, a resumable runner, the table and plots.

``securefg reproduce cefgc`` (:mod:`securefg.commands.reproduce_cmd`) runs every (setting,
method, seed) cell of the CeFGC paper's comparison through :func:`securefg.experiment.run_experiment`
(:mod:`.cefgc_cells`, :mod:`.cell_runner`), then writes the table beside the paper's cells
(:mod:`.paper_cells`, :mod:`.cefgc_table`) and one plot per setting (:mod:`.cefgc_plot`).
"""
