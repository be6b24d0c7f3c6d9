"""reclassify records the options of the run that created an output and reuses them or refuses
another set (issue 53: a cron line without the first run's ``--on-invalid quarantine`` failed a
partition after a promotion), and says when an output holds several model versions."""

from __future__ import annotations

import json

import pytest

from sparkhc.errors import SparkhcError
from sparkhc.spark.reclassify import (
    MARKER_FILE,
    MODEL_VERSION,
    OPTIONS_FILE,
    model_versions,
    output_options,
    record_options,
)

DEFAULTS = {"on_invalid": "error"}


def test_a_new_output_takes_the_given_options_or_the_defaults(tmp_path):
    assert output_options(tmp_path / "out", {"on_invalid": None}, DEFAULTS) == {"on_invalid": "error"}
    assert output_options(tmp_path / "out", {"on_invalid": "quarantine"}, DEFAULTS) == {"on_invalid": "quarantine"}


def test_a_later_run_reuses_the_recorded_options_or_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / OPTIONS_FILE).write_text(json.dumps({"on_invalid": "quarantine"}))
    # the documented cron line, without the flag: the first run's option
    assert output_options(out, {"on_invalid": None}, DEFAULTS) == {"on_invalid": "quarantine"}
    assert output_options(out, {"on_invalid": "quarantine"}, DEFAULTS) == {"on_invalid": "quarantine"}
    with pytest.raises(SparkhcError) as e:
        output_options(out, {"on_invalid": "error"}, DEFAULTS)
    assert str(e.value) == (f"{out} was written with --on-invalid quarantine ({out / OPTIONS_FILE}); this run passes "
                            "--on-invalid error: leave --on-invalid out to reuse it, or write to another --out")


def test_model_versions_of_an_output(tmp_path):
    out = tmp_path / "out"
    for value, version in (("2024-01-01", "aaa"), ("2024-01-02", "bbb"), ("2024-01-03", "aaa")):
        d = out / f"ingest_date={value}"
        d.mkdir(parents=True)
        (d / MARKER_FILE).write_text(json.dumps({MODEL_VERSION: version}))
    (out / "ingest_date=2024-01-04").mkdir()  # not classified: no marker
    assert model_versions(out, "ingest_date") == {"aaa": ["2024-01-01", "2024-01-03"], "bbb": ["2024-01-02"]}
    assert model_versions(tmp_path / "none", "ingest_date") == {}


def test_options_are_recorded_when_first_given(tmp_path):
    """A first run without --on-invalid records nothing for it, so the run its failed partition's error
    suggests (--on-invalid quarantine) is taken, recorded, and reused by the runs after it."""
    out = tmp_path / "out"
    record_options(out, {"on_invalid": None})
    assert json.loads((out / OPTIONS_FILE).read_text()) == {}
    assert output_options(out, {"on_invalid": "quarantine"}, DEFAULTS) == {"on_invalid": "quarantine"}
    record_options(out, {"on_invalid": "quarantine"})
    assert output_options(out, {"on_invalid": None}, DEFAULTS) == {"on_invalid": "quarantine"}
    with pytest.raises(SparkhcError, match="was written with --on-invalid quarantine"):
        output_options(out, {"on_invalid": "error"}, DEFAULTS)
