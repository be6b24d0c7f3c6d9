"""Shared fixtures: the data directory and one session-scoped SparkSession."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("SPARKHC_DATA_DIR", ROOT.parent / "shared" / "data"))
FIXTURES_DIR = Path(os.environ.get("SPARKHC_FIXTURES_DIR", ROOT.parent / "shared" / "fixtures"))


def corpus_dir(name: str) -> Path:
    """The staged copy of a real corpus, or skip the test saying where it was looked for."""
    d = DATA_DIR / name
    if not d.is_dir():
        pytest.skip(f"real corpus {name!r} not found at {d} (set SPARKHC_DATA_DIR to ../shared/data)")
    return d


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA_DIR.is_dir():
        pytest.skip(f"real data directory not found at {DATA_DIR} (set SPARKHC_DATA_DIR)")
    return DATA_DIR


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test run: local[2], UI off, few shuffle partitions."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from sparkhc.spark.session import get_session

    session = get_session(
        app_name="sparkhc-tests",
        master="local[2]",
        extra_conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server():
    """A local S3-compatible server (moto's server mode) on 127.0.0.1 at a free port, for the
    whole run: ``{"endpoint": "127.0.0.1:PORT", "uri": callable(bucket, prefix) -> s3:// URI}``.
    Credentials travel in the URI (Spark's Python workers do not see environment variables set
    after they started)."""
    pytest.importorskip("moto.server", reason="moto[server] not installed (the test extra)")
    import socket

    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"127.0.0.1:{port}"

    def uri(bucket: str, prefix: str = "") -> str:
        return (f"s3://testing:testing@{bucket}/{prefix}?endpoint_override={endpoint}&scheme=http"
                f"&region=us-east-1")

    def make_bucket(bucket: str) -> None:
        import pyarrow.fs as pafs

        fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", endpoint_override=endpoint,
                               scheme="http", region="us-east-1", allow_bucket_creation=True)
        fs.create_dir(bucket)

    yield {"endpoint": endpoint, "uri": uri, "make_bucket": make_bucket}
    server.stop()


@pytest.fixture()
def small_splits(spark):
    """File splits of 2 KB for one test: a file of a few hundred records (JSON Lines blocks, Parquet
    row groups, LYRL2004 lines) is read by several tasks."""
    key = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(key)
    spark.conf.set(key, "2048")
    yield
    spark.conf.set(key, old)
