"""The import picture (docs/architecture.md): no import circle among the modules, and no arrow from a
lower layer to a higher one. Read from the sources (every import statement, also those inside
functions; ``if TYPE_CHECKING:`` blocks are not imports at run time)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: layers from the bottom; a module may import only from its own layer or lower ones
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("sparkhc",)),  # numpy/scipy: everything not named below
    ("spark", ("sparkhc.spark", "sparkhc.ml")),
    ("app", ("sparkhc.cli",)),
    ("experiments", ("experiments",)),
]


def layer_of(module: str) -> int:
    best, best_len = 0, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def modules() -> dict[str, Path]:
    out = {}
    for top in ("sparkhc", "experiments"):
        for f in sorted((ROOT / top).rglob("*.py")):
            parts = list(f.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = f
    return out


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """All nodes except the bodies of ``if TYPE_CHECKING:``."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)
    return out


def import_graph(types: bool = False) -> dict[str, set[str]]:
    """Module -> the modules it imports at run time (``types``: also in ``if TYPE_CHECKING:``)."""
    mods = modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in (list(ast.walk(tree)) if types else _runtime_nodes(tree)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg
                    for _ in range(node.level - 1):
                        up = up.rpartition(".")[0]
                    base = up + ("." + node.module if node.module else "")
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for n in names:
                r = resolve(n)
                if r is not None and r != mod:
                    deps.add(r)
        graph[mod] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_the_graph_is_read() -> None:
    g = import_graph()
    assert "sparkhc.spark.pipelines" in g["sparkhc.cli.train"]
    assert "sparkhc.models.base" in g["sparkhc.spark.training"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    assert cycles(import_graph()) == []


def test_no_import_circle_even_through_type_annotations() -> None:
    """A circle that only the type checker sees still ties two modules' designs together
    (``corpus/fetch.py`` <-> ``corpus/registry.py`` was one)."""
    assert cycles(import_graph(types=True)) == []


#: within the core: modules that read documents and corpora never reach up to the model files
#: (serializers, the model store); file helpers live in ``sparkhc.fsio``
NOT_BELOW: dict[str, tuple[str, ...]] = {
    "sparkhc.corpus": ("sparkhc.persistence", "sparkhc.model_store", "sparkhc.models"),
    "sparkhc.text": ("sparkhc.persistence", "sparkhc.model_store", "sparkhc.models"),
    "sparkhc.fsio": ("sparkhc.persistence", "sparkhc.model_store", "sparkhc.models"),
}


def test_readers_and_file_helpers_do_not_import_the_model_files() -> None:
    bad = [f"{m} -> {d}" for m, deps in import_graph(types=True).items() for d in sorted(deps)
           for low, high in NOT_BELOW.items()
           if (m == low or m.startswith(low + ".")) and any(d == h or d.startswith(h + ".") for h in high)]
    assert bad == []


def test_no_arrow_from_a_lower_layer_to_a_higher_one() -> None:
    bad = [f"{m} ({LAYERS[layer_of(m)][0]}) -> {d} ({LAYERS[layer_of(d)][0]})"
           for m, deps in import_graph().items() for d in sorted(deps) if layer_of(d) > layer_of(m)]
    assert bad == []


#: packages the product (``sparkhc/``) must never import: scikit-learn is a test and benchmark
#: dependency only (reference baselines in tests/, benchmarks/ and experiments/)
FORBIDDEN_IN_PRODUCT = ("sklearn",)


def imported_names(source: str) -> set[str]:
    """Every module name an import in ``source`` names: ``import``/``from`` statements anywhere
    (inside functions and ``if TYPE_CHECKING:`` blocks too) and ``importlib.import_module`` /
    ``__import__`` calls with a literal name."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            fn = ast.unparse(node.func)
            if fn in ("importlib.import_module", "import_module", "__import__") and isinstance(node.args[0].value, str):
                out.add(node.args[0].value)
    return out


def test_forbidden_import_finder_sees_every_form() -> None:
    src = (
        "import sklearn.svm\n"
        "def f():\n    from sklearn.exceptions import ConvergenceWarning\n"
        "import importlib\nm = importlib.import_module('sklearn.linear_model')\n"
        "from . import sibling\n"
    )
    assert imported_names(src) == {"sklearn.svm", "sklearn.exceptions", "importlib", "sklearn.linear_model"}


def test_product_never_imports_scikit_learn() -> None:
    """Walks every module under sparkhc/ (not a list): scikit-learn is not needed at run time."""
    files = sorted((ROOT / "sparkhc").rglob("*.py"))
    assert len(files) > 50 and ROOT / "sparkhc" / "models" / "cesa_bianchi.py" in files
    bad = sorted(
        f"{f.relative_to(ROOT)}: {name}"
        for f in files
        for name in imported_names(f.read_text(encoding="utf-8"))
        if name.split(".")[0] in FORBIDDEN_IN_PRODUCT
    )
    assert bad == []


def test_the_architecture_page_and_the_package_docstring_list_every_mixing_module() -> None:
    """docs/architecture.md's table of ``sparkhc/spark/mixing/`` and the package docstring name
    every module of the package (the picture a newcomer reads stays the code's)."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    pkg = ROOT / "sparkhc" / "spark" / "mixing"
    doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text(encoding="utf-8"))) or ""
    found = sorted(f.stem for f in pkg.glob("*.py") if f.name != "__init__.py")
    assert found
    assert [m for m in found if f"| `{m}.py` |" not in page] == []
    assert [m for m in found if f":mod:`.{m}`" not in doc] == []
