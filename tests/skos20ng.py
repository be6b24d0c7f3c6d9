"""A hand-made SKOS polyhierarchy built from the real 20 Newsgroups taxonomy (issue 56).

The 20 Newsgroups tree (6 groups, 20 newsgroups; ``taxonomy.tsv`` of the staged corpus) becomes a
SKOS concept scheme, and a new top concept ``hardware`` is added as a second broader concept of the
two hardware newsgroups (``comp.sys.ibm.pc.hardware``, ``comp.sys.mac.hardware``), which keep their
group ``computer``. What the file exercises, each once:

* concepts named ``http://example.org/20ng/<name>``, with the newsgroup (or group) name as their
  ``skos:notation``, so documents may keep their 20 Newsgroups labels;
* English and German ``skos:prefLabel`` s;
* top concepts by ``skos:topConceptOf`` (the groups) and by ``skos:hasTopConcept`` (``hardware``);
* the hierarchy by ``skos:broader`` (newsgroups to groups), by ``skos:narrower`` only (``hardware``
  to its two newsgroups), and both ways (``computer`` also lists its narrower newsgroups);
* one deprecated concept, ``comp.os.os2`` (``owl:deprecated true``), which is skipped and counted.

Expected by hand: 27 concepts (26 + ``hardware``), 29 positions (each hardware newsgroup has two:
under ``computer`` and under ``hardware``), 1 deprecated concept.
"""

from __future__ import annotations

from pathlib import Path

NS = "http://example.org/20ng/"
SCHEME = NS + "scheme"
HARDWARE = ("comp.sys.ibm.pc.hardware", "comp.sys.mac.hardware")


def uri(name: str) -> str:
    return NS + name


def read_tree(taxonomy_tsv: Path) -> list[tuple[str, str]]:
    """The ``(parent, child)`` edges of the staged ``taxonomy.tsv`` (root ``ROOT``)."""
    return [tuple(line.split("\t")) for line in taxonomy_tsv.read_text().splitlines() if line.strip()]  # type: ignore[misc]


def parents_by_hand(edges: list[tuple[str, str]]) -> dict[str, set[str]]:
    """Concept name -> the names of its parents in the polyhierarchy (the root is ``ROOT``)."""
    out: dict[str, set[str]] = {}
    for p, c in edges:
        out.setdefault(c, set()).add(p)
    out["hardware"] = {"ROOT"}
    for h in HARDWARE:
        out[h].add("hardware")
    return out


def label_en(name: str) -> str:
    return "Hardware" if name == "hardware" else f"Newsgroup {name}"


def label_de(name: str) -> str:
    return "Rechnertechnik" if name == "hardware" else f"Diskussionsgruppe {name}"


def write_vocabulary(path: Path, taxonomy_tsv: Path) -> Path:
    """Write the Turtle vocabulary described in the module notes; returns ``path``."""
    edges = read_tree(taxonomy_tsv)
    groups = [c for p, c in edges if p == "ROOT"]
    lines = [
        "@prefix skos: <http://www.w3.org/2004/02/skos/core#> .",
        "@prefix owl: <http://www.w3.org/2002/07/owl#> .",
        "",
        f'<{SCHEME}> a skos:ConceptScheme ; skos:prefLabel "20 Newsgroups"@en ;',
        f"    skos:hasTopConcept <{uri('hardware')}> .",
        "",
    ]

    def concept(name: str, extra: list[str]) -> None:
        lines.append(f"<{uri(name)}> a skos:Concept ;")
        for e in extra:
            lines.append(f"    {e} ;")
        lines.append(f'    skos:notation "{name}" ;')
        lines.append(f'    skos:prefLabel "{label_en(name)}"@en, "{label_de(name)}"@de .')

    for g in groups:
        extra = [f"skos:topConceptOf <{SCHEME}>"]
        if g == "computer":  # the computer group lists its narrower newsgroups too (both directions)
            extra += [f"skos:narrower <{uri(c)}>" for p, c in edges if p == g]
        concept(g, extra)
    for p, c in edges:
        if p != "ROOT":
            concept(c, [f"skos:broader <{uri(p)}>"])
    concept("hardware", [f"skos:narrower <{uri(h)}>" for h in HARDWARE])  # narrower only
    lines += [f"<{uri('comp.os.os2')}> a skos:Concept ; owl:deprecated true ; skos:broader <{uri('computer')}> ;",
              '    skos:notation "comp.os.os2" ; skos:prefLabel "Newsgroup comp.os.os2"@en .']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
