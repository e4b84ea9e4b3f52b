"""Per-dataset presets: the values a method starts from on a dataset, each with its provenance.

``securefg/presets/<method>.toml`` holds one ``[<dataset>.<partition>]`` table per setting;
``source`` says where its values come from (``"paper"``, ``"reference code"`` or
``"study:studies/<file>.json"``, a study ``securefg tune`` recorded on validation data).
:func:`preset_for` reads a table; ``securefg run`` applies it where no flag was given.
"""

from securefg.presets.loader import apply_preset, load_presets, preset_file, preset_for, presets_dir
from securefg.presets.preset import Preset

__all__ = ["Preset", "apply_preset", "load_presets", "preset_file", "preset_for", "presets_dir"]
