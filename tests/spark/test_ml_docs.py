"""The Python API's docs: docs/api.md lists every Param; the example script and the README's
"Python API" example run as written (on a small slice / with absolute data paths)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.conftest import DATA_DIR, ROOT, corpus_dir


def test_api_md_lists_every_param():
    from sparkhc.ml import HierarchicalClassificationModel, HierarchicalClassifier, HierarchicalEvaluator
    from sparkhc.ml.evaluator import METRIC_ALIASES
    from sparkhc.ml.featurizer import SparkhcFeaturizer

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for cls in (HierarchicalClassifier, HierarchicalClassificationModel, HierarchicalEvaluator, SparkhcFeaturizer):
        for p in cls().params:
            assert f"| `{p.name}` |" in text, f"{cls.__name__}.{p.name} is not in docs/api.md"
    for alias in METRIC_ALIASES:
        assert f"`{alias}`" in text, alias


@pytest.mark.slow
def test_example_script_runs_on_a_slice(spark, tmp_path):
    corpus_dir("20newsgroups")
    spec = importlib.util.spec_from_file_location("ml_pipeline", ROOT / "docs" / "examples" / "ml_pipeline.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    result = mod.main(["--data-dir", str(DATA_DIR), "--out", str(tmp_path), "--sample", "40", "--folds", "2"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["test"] == result and summary["chosen"]["C"] in (0.1, 1.0)
    assert 0.2 < result["hF"] <= 1.0  # far above chance on ~280 training postings
    from sparkhc.persistence import load_model

    stage = next((tmp_path / "pipeline" / "stages").glob("4_HierarchicalClassificationModel_*"))
    model, meta = load_model(stage)
    assert meta["model"] == "global" and model.params["C"] == summary["chosen"]["C"]
    assert spark.read.parquet(str(tmp_path / "predictions")).count() == summary["test_documents"]


@pytest.mark.slow
def test_readme_python_api_example_runs(spark, tmp_path):
    corpus_dir("20newsgroups")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    src = code.group(1)
    assert len([line for line in src.splitlines() if line.strip()]) <= 11  # ten statements
    src = src.replace("../shared/data", str(DATA_DIR)).replace('"work/', f'"{tmp_path}/')
    exec(compile(src, "README.md", "exec"), {})
    assert (Path(tmp_path) / "20ng-pipeline" / "stages").is_dir()
