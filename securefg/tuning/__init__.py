"""``securefg tune``: choose a method's hyperparameters on validation data only, with Optuna.

:mod:`.spaces` holds each method's search space, :mod:`.objective` scores one trial from
validation scores alone, :mod:`.study` runs and records a study, :mod:`.preset_writer` turns its
choice into a preset table. Optuna is imported only here, so nothing else pays for it.
"""
