"""``examples/cefgc_generator_quality.py`` (the paper's Table 8 check) on the built-in graph set."""

import json
import math
from pathlib import Path


def test_every_client_and_class_gets_generated_and_floor_mmds(tmp_path: Path, capsys, load_example) -> None:
    example = load_example("cefgc_generator_quality")
    out = tmp_path / "quality.json"
    rows = example.main(["--dataset", "synthetic-graphs", "--clients", "2", "--option", "diffusion_epochs=3",
                            "--option", "langevin_steps=2", "--option", "max_nodes=20",
                            "--generator-cache", str(tmp_path / "cache"), "--out", str(out)])
    assert {r["client"] for r in rows} == {"client/0", "client/1"} and len({r["class"] for r in rows}) >= 2
    for r in rows:
        for side in ("generated", "real_floor"):
            assert set(r[side]) == {"degree", "clustering"} and all(math.isfinite(v) and v >= -1e-9 for v in r[side].values())
    # three untrained epochs draw graphs far from the data; real graphs of the same class are close
    assert sum(r["generated"]["degree"] for r in rows) > sum(r["real_floor"]["degree"] for r in rows)
    assert json.loads(out.read_text())["rows"] == json.loads(json.dumps(rows))
    assert "mean over clients" in capsys.readouterr().out
    # the second call loads the phase-1 models from the cache: same models, same draws
    again = load_example("cefgc_generator_quality").main(["--dataset", "synthetic-graphs", "--clients", "2", "--option", "diffusion_epochs=3",
                             "--option", "langevin_steps=2", "--option", "max_nodes=20",
                             "--generator-cache", str(tmp_path / "cache")])
    assert [r["generated"] for r in again] == [r["generated"] for r in rows]
