"""The --py-files zip (scripts/build_pyfiles.py), the configuration examples in conf/ and the
deployment scripts: fast checks that run in CI."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sparkhc.config import load_config
from sparkhc.models import get_model_class
from sparkhc.taxonomy import Taxonomy
from tests.jobs.conftest import CONF_DIR, JOBS_DIR, ROOT, TAXONOMY

MODEL_FILES = ["flat", "tree-all", "tree-sib", "global", "global-bf"]


def build_zip(out: Path) -> Path:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_pyfiles.py"), "--out", str(out)], check=True,
                   capture_output=True)
    return out


def test_pyfiles_zip_is_reproducible_and_complete(tmp_path):
    a, b = build_zip(tmp_path / "a.zip"), build_zip(tmp_path / "b.zip")
    assert a.read_bytes() == b.read_bytes()
    names = zipfile.ZipFile(a).namelist()
    assert "sparkhc/conf/defaults.toml" in names and "sparkhc/spark/pipelines.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if not n.startswith("sparkhc/")]


def test_jobs_load_the_configuration_from_the_zip(tmp_path):
    """With --py-files the package is imported from the zip: the job still finds defaults.toml."""
    z = build_zip(tmp_path / "sparkhc-pyfiles.zip")
    script = tmp_path / "check.py"
    script.write_text(
        "import runpy, sys\n"
        "import sparkhc\n"
        f"assert sparkhc.__file__.startswith({str(z)!r}), sparkhc.__file__\n"
        f"job = runpy.run_path({str(JOBS_DIR / 'featurize.py')!r})\n"
        "assert callable(job['main'])\n"
        "from sparkhc.config import load_config\n"
        f"print(load_config([{str(CONF_DIR / 'models' / 'tree-sib.toml')!r}]).train.model)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(z)}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "tree"


@pytest.mark.parametrize("path", sorted(p.name for p in CONF_DIR.glob("*.toml")))
def test_conf_toml_loads(path):
    cfg = load_config([CONF_DIR / path])
    assert cfg.train.shards >= 1 and cfg.featurize.partitions >= 1


@pytest.mark.parametrize("name", MODEL_FILES)
def test_model_toml_builds_its_model(name, tmp_path):
    cfg = load_config([CONF_DIR / "models" / f"{name}.toml", CONF_DIR / "local.toml"])
    tsv = tmp_path / "taxonomy.tsv"
    tsv.write_text("".join(f"{p}\t{c}\n" for p, c in TAXONOMY))
    model = get_model_class(cfg.train.model)(Taxonomy.load(tsv), 8, **cfg.model_params())
    model.init_state()  # validates the parameters
    expected = {"flat": "flat", "tree-all": "tree", "tree-sib": "tree", "global": "global", "global-bf": "global"}
    assert cfg.train.model == expected[name]


def test_every_model_has_a_toml():
    from sparkhc.models import names

    covered = {load_config([CONF_DIR / "models" / f"{n}.toml"]).train.model for n in MODEL_FILES}
    murawaki = {"flat", "tree", "global"}
    assert murawaki <= covered and murawaki <= set(names())


@pytest.mark.parametrize("which", ["local", "cluster"])
def test_spark_defaults(which):
    lines = (CONF_DIR / f"spark-defaults.{which}.conf").read_text().splitlines()
    props = dict(line.split(None, 1) for line in lines if line.strip() and not line.startswith("#"))
    assert props["spark.driver.memory"] in ("2g", "3g", "4g")
    assert props["spark.serializer"] == "org.apache.spark.serializer.KryoSerializer"
    assert int(props["spark.sql.shuffle.partitions"]) >= 1
    assert props["spark.executorEnv.OPENBLAS_NUM_THREADS"] == "1"


@pytest.mark.parametrize("script", ["docker/build.sh", "docker/run.sh", "scripts/build_wheelhouse.sh"])
def test_shell_scripts_parse(script):
    path = ROOT / script
    assert os.access(path, os.X_OK), f"{script} is not executable"
    subprocess.run(["bash", "-n", str(path)], check=True)


def test_run_sh_usage():
    proc = subprocess.run(["bash", str(ROOT / "docker" / "run.sh"), "--help"], capture_output=True, text=True)
    assert proc.returncode == 0 and "demo" in proc.stdout and "--data DIR" in proc.stdout
