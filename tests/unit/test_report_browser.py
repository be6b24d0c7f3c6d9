"""The report of the 20 Newsgroups demo evaluation rendered in headless Chromium: every image
loads (naturalWidth > 0) and nothing overflows the page horizontally, on a phone-sized and a
desktop-sized window.

Slow: it needs a demo evaluation. Set ``SPARKHC_DEMO_DIR`` to the ``--workdir`` of a finished
``sparkhc demo`` run, or the test runs the demo itself (about 3 minutes, 2 epochs)::

    pytest -m slow tests/unit/test_report_browser.py
    SPARKHC_DEMO_DIR=/tmp/demo pytest -m slow tests/unit/test_report_browser.py

Needs Debian's ``chromium`` package (``apt-get install -y chromium``); skipped without it.
"""

from __future__ import annotations

import html as html_mod
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sparkhc.report import build_report
from tests.conftest import corpus_dir

pytestmark = pytest.mark.slow

CHECK_SCRIPT = """<script>
window.addEventListener("load", function () {
  var de = document.documentElement;
  var images = Array.prototype.map.call(document.images, function (i) {
    var r = i.getBoundingClientRect();
    return {src: i.getAttribute("src"), complete: i.complete, naturalWidth: i.naturalWidth,
            left: r.left, right: r.right};
  });
  // elements sticking out of the viewport (table cells may: their box scrolls)
  var wide = Array.prototype.filter.call(document.querySelectorAll("body *"), function (e) {
    var r = e.getBoundingClientRect();
    return r.right > de.clientWidth + 1 && !e.closest(".table-wrap");
  }).map(function (e) { return e.tagName.toLowerCase() + (e.className ? "." + e.className : ""); });
  var wraps = Array.prototype.map.call(document.querySelectorAll(".table-wrap"), function (w) {
    return w.getBoundingClientRect().right <= de.clientWidth + 1;
  });
  var out = {images: images, scrollWidth: de.scrollWidth, clientWidth: de.clientWidth,
             tables: document.querySelectorAll("table").length, wide: wide.slice(0, 20), wraps: wraps};
  var pre = document.createElement("pre");
  pre.id = "sparkhc-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium not installed (Debian: apt-get install -y chromium)")


def render(page: Path, width: int, profile: Path) -> dict:
    """Load ``page`` in headless Chromium and return what CHECK_SCRIPT measured."""
    cmd = [
        chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-extensions", "--hide-scrollbars",
        f"--user-data-dir={profile}", f"--window-size={width},900", "--virtual-time-budget=10000",
        "--dump-dom", page.as_uri(),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="sparkhc-check">(.*?)</pre>', res.stdout, re.S)
    assert m, f"no measurement in the dumped DOM (exit {res.returncode}): {res.stderr[-2000:]}"
    return json.loads(html_mod.unescape(m.group(1)))


def with_check(report_html: Path, name: str, extra: str = "") -> Path:
    page = report_html.with_name(name)  # same folder: the relative image paths resolve
    page.write_text(report_html.read_text().replace("</body>", extra + CHECK_SCRIPT + "</body>"))
    return page


@pytest.fixture(scope="module")
def demo_predictions(tmp_path_factory) -> Path:
    given = os.environ.get("SPARKHC_DEMO_DIR")
    if given:
        preds = Path(given) / "predictions"
        if not (preds / "metrics.json").is_file():
            pytest.fail(f"SPARKHC_DEMO_DIR={given}: no predictions/metrics.json (run sparkhc demo first)")
        return preds
    data = corpus_dir("20newsgroups").parent
    work = tmp_path_factory.mktemp("demo")
    cmd = [sys.executable, "-m", "sparkhc.cli", "demo", "--data-dir", str(data), "--workdir", str(work),
           "--master", "local[2]", "--set", "train.epochs=2", "--set", "train.shards=2"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stderr[-3000:]
    return work / "predictions"


def test_demo_report_renders_in_chromium(demo_predictions, tmp_path):
    chromium()
    res = build_report(demo_predictions, out=tmp_path / "report")
    report = Path(res["html"])
    text = report.read_text()
    # the tables and at least three plots are there
    for heading in ("Metrics", "Per level", "Per label", "Most confused sibling pairs"):
        assert f"<h2>{heading}</h2>" in text
    assert len(res["plots"]) >= 3
    assert {"level_f1.png", "label_f1.png", "pr_curve.png"} <= {Path(p).name for p in res["plots"]}
    assert "comp.sys.ibm.pc.hardware" in text and res["documents"] == 7532

    page = with_check(report, "check.html")
    for width in (500, 1280):
        m = render(page, width, tmp_path / f"profile{width}")
        assert len(m["images"]) == len(res["plots"])
        for img in m["images"]:
            assert img["complete"] and img["naturalWidth"] > 0, f"image not loaded at width {width}: {img}"
            assert img["right"] <= m["clientWidth"] + 1, f"image wider than the page at width {width}: {img}"
        assert m["tables"] >= 4
        assert m["scrollWidth"] <= m["clientWidth"], f"horizontal overflow at width {width}: {m}"
        assert m["wide"] == [], f"elements overflow at width {width}: {m['wide']}"
        assert all(m["wraps"])

    # the check itself sees an overflow and a broken image when there is one
    bad = with_check(report, "bad.html", '<div style="width:3000px">wide</div><img src="plots/missing.png">')
    m = render(bad, 500, tmp_path / "profile_bad")
    assert m["scrollWidth"] > m["clientWidth"]
    assert any(i["src"] == "plots/missing.png" and i["naturalWidth"] == 0 for i in m["images"])
