"""The package's layout rules (``CONTRIBUTING.md``), checked on every import of the package's source,
including imports inside functions.

The source is parsed, not imported, so a rule broken in a branch that no test runs is still found.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "jetastar"

#: layer of each module (the longest matching prefix decides); see CONTRIBUTING.md
LAYERS: dict[str, int] = {
    "jetastar.errors": 0, "jetastar._version": 0, "jetastar._jit": 0, "jetastar._progress": 0,
    "jetastar._cuda": 0,
    "jetastar._sorting": 0, "jetastar._lock": 0, "jetastar._leftovers": 0, "jetastar._atomic": 0,
    "jetastar._refcount": 0, "jetastar._text": 0, "jetastar._compile_lock": 0,
    "jetastar._numba_flags": 0, "jetastar._numba_inline": 0,
    "jetastar.ginkgo": 1, "jetastar.tree": 1, "jetastar._columnar": 1,
    "jetastar.jet": 2,
    "jetastar.ginkgo.generator": 3, "jetastar.momenta": 3, "jetastar.particles": 3,
    "jetastar.costs": 3, "jetastar.jetfinding": 3,
    "jetastar.clustering": 4, "jetastar.plotting": 4,
    "jetastar.result_tables": 5, "jetastar.tree_arrays": 5, "jetastar.diagnostics": 5,
    "jetastar.inference": 5,
    "jetastar.io": 6,
    "jetastar.observables": 7, "jetastar.comparison": 7,
    "jetastar.batch": 8, "jetastar.inmemory": 8,
    "jetastar.cli": 9, "jetastar.__main__": 9,
}

#: the package face (``jetastar/__init__.py``) re-exports from every layer
TOP_FACE = 10

#: imports inside functions that the rules allow: optional dependencies, slow ones most users never
#: need, and parts of a dependency that only some versions or platforms have (module prefixes)
LAZY: dict[str, str] = {
    **dict.fromkeys(("awkward", "vector", "uproot", "h5py", "matplotlib", "scipy", "tqdm"),
                    "slow to import, and most runs never need it"),
    **dict.fromkeys(("fastjet", "dask", "distributed", "pandas"), "optional extra"),
    "fcntl": "POSIX only (no file locks on Windows)",
    "numpy._core": "numpy >= 2 only", "numpy.core": "numpy < 2 only",
    "numba.core": "numba internals that other numba versions lay out differently",
    "numba.cuda": "the optional GPU backend (numba-cuda), imported only when a GPU is asked for",
    "numba.misc": "numba internals that other numba versions lay out differently",
}

#: (importer, imported) pairs allowed to break a rule, each with its reason
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("jetastar.ginkgo", "jetastar.ginkgo.generator"):
        "the ginkgo face loads generate lazily: the generator (layer 3) builds jets, the rest of "
        "ginkgo is the model (layer 1) that jet.py imports",
    ("jetastar.clustering.exact.gpu", "jetastar.clustering.exact._gpu_kernels"):
        "the CUDA kernels compile for the device when their module loads, so it is imported only "
        "when a GPU is used",
    ("jetastar.clustering.exact.gpu", "jetastar.clustering.exact._gpu_tiled"):
        "the tiled DP's CUDA kernels, imported like _gpu_kernels only when a GPU is used",
    ("jetastar.clustering.exact.gpu", "jetastar.clustering.exact._gpu_tiled_marginals"):
        "the tiled marginals' CUDA kernels, imported like _gpu_kernels only when a GPU is used",
    ("jetastar.clustering.exact.gpu", "jetastar.clustering.exact._gpu_tiled_map"):
        "the tiled exact MAP's CUDA kernels, imported like _gpu_kernels only when a GPU is used",
    ("jetastar", "jetastar.inmemory"):
        "jetastar.cluster is loaded on first use, so that import jetastar stays light",
}


@dataclass(frozen=True)
class _Import:
    importer: str
    target: str  # the module imported (a module, never a name inside one)
    names: tuple[str, ...]  # names taken from it (``from target import a, b``)
    in_function: bool
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _imports() -> list[_Import]:
    found: list[_Import] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        in_function: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        in_function.add(id(inner))
        for node in ast.walk(tree):
            lazy = id(node) in in_function
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.append(_Import(module, alias.name, (), lazy, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")
                    if not _is_package(module):
                        base = base[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = tuple(a.name for a in node.names)
                sub = [n for n in names if f"{target}.{n}" in MODULES]
                rest = tuple(n for n in names if f"{target}.{n}" not in MODULES)
                for n in sub:
                    found.append(_Import(module, f"{target}.{n}", (), lazy, node.lineno))
                if rest or not sub:
                    found.append(_Import(module, target, rest, lazy, node.lineno))
    return found


IMPORTS = _imports()
OURS = [i for i in IMPORTS if i.target == "jetastar" or i.target.startswith("jetastar.")]


def _layer(module: str) -> int:
    if module == "jetastar":
        return TOP_FACE
    best = max((k for k in LAYERS if module == k or module.startswith(k + ".")), key=len)
    return LAYERS[best]


def _edges() -> set[tuple[str, str]]:
    """importer -> module, plus importer -> each package face that importing the module runs
    (the faces of the importer's own packages have run already; the top face only re-exports)."""
    edges: set[tuple[str, str]] = set()
    for imp in OURS:
        if imp.target == "jetastar" or (imp.importer, imp.target) in EXCEPTIONS:
            continue
        edges.add((imp.importer, imp.target))
        parts = imp.target.split(".")
        for k in range(2, len(parts)):
            face = ".".join(parts[:k])
            if not (imp.importer == face or imp.importer.startswith(face + ".")):
                edges.add((imp.importer, face))
    return edges


def _cycles(edges: set[tuple[str, str]]) -> list[list[str]]:
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return out


def _upward(edges: set[tuple[str, str]]) -> list[str]:
    return sorted(f"{a} (layer {_layer(a)}) imports {b} (layer {_layer(b)})"
                  for a, b in edges if _layer(a) < _layer(b))


def _private_names(imports: list[_Import]) -> list[str]:
    return sorted(f"{i.importer}:{i.line} imports {n} from {i.target}"
                  for i in imports for n in i.names if n.startswith("_") and not n.startswith("__"))


def _private_modules(imports: list[_Import]) -> list[str]:
    outside = []
    for i in imports:
        parts = i.target.split(".")
        for k, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                owner = ".".join(parts[:k])
                if not (i.importer == owner or i.importer.startswith(owner + ".")):
                    outside.append(f"{i.importer}:{i.line} imports {i.target}")
                break
    return sorted(outside)


def _lazy(imports: list[_Import]) -> list[str]:
    return sorted(f"{i.importer}:{i.line} imports {i.target} inside a function"
                  for i in imports if i.in_function
                  and not any(i.target == m or i.target.startswith(m + ".") for m in LAZY)
                  and (i.importer, i.target) not in EXCEPTIONS)


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if m != "jetastar"
               and not any(m == k or m.startswith(k + ".") for k in LAYERS)]
    assert not missing, f"add these modules to LAYERS (and CONTRIBUTING.md): {missing}"


def test_the_parser_sees_every_kind_of_import():
    # module-level and in-function, ``import x`` and ``from x import y``, relative imports of
    # submodules: a parser that missed one kind would let every rule below pass
    kinds = {(i.in_function, bool(i.names)) for i in IMPORTS}
    assert kinds == {(False, True), (False, False), (True, True), (True, False)}
    assert ("jetastar.clustering", "jetastar.clustering.exact") in _edges()
    assert ("jetastar.ginkgo", "jetastar.ginkgo.generator") in {(i.importer, i.target) for i in OURS}


def test_import_graph_has_no_cycle():
    assert _cycles(_edges()) == []


def test_no_module_imports_a_higher_layer():
    assert _upward(_edges()) == []


def test_no_private_name_crosses_a_module_boundary():
    assert _private_names(OURS) == []


def test_private_modules_stay_in_their_package():
    assert _private_modules(OURS) == []


def test_imports_inside_functions_are_for_optional_or_slow_dependencies():
    assert _lazy(IMPORTS) == []


def test_no_two_modules_share_a_name():
    names: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.name, []).append(module)
    assert {k: v for k, v in names.items() if len(v) > 1} == {}


def test_the_checks_catch_each_broken_rule():
    assert _cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert _upward({("jetastar.jet", "jetastar.io.hdf5")}) == [
        "jetastar.jet (layer 2) imports jetastar.io.hdf5 (layer 6)"]
    fake = [
        _Import("jetastar.cli.run", "jetastar.batch.executors", ("_make", "make"), False, 3),
        _Import("jetastar.batch.run", "jetastar.io._common", ("jet_slice",), False, 4),
        _Import("jetastar.io.hdf5", "jetastar.io._common", ("rows_for",), False, 5),
        _Import("jetastar.io.hdf5", "jetastar.jet", ("Jet",), True, 6),
        _Import("jetastar.io.hdf5", "h5py", (), True, 7),
    ]
    assert _private_names(fake) == ["jetastar.cli.run:3 imports _make from jetastar.batch.executors"]
    assert _private_modules(fake) == ["jetastar.batch.run:4 imports jetastar.io._common"]
    assert _lazy(fake) == ["jetastar.io.hdf5:6 imports jetastar.jet inside a function"]


# ---------------------------------------------------------------------- one home per algorithm
#: strings that spell an algorithm's name but mean something else where they stand
OTHER_MEANINGS: dict[tuple[str, str], str] = {
    ("jetastar.jetfinding", "kt"): "FastJet's jet definitions (jet finding in events)",
    ("jetastar.jetfinding", "cambridge"): "FastJet's jet definitions (jet finding in events)",
    ("jetastar.jetfinding", "antikt"): "FastJet's jet definitions (jet finding in events)",
    ("jetastar.observables", "kt"): "the Lund plane's transverse momentum k_t",
}


def _name_literals(tree: ast.AST) -> list[ast.Constant]:
    """String constants that a comparison compares, a dict has as a key, a subscript or a
    ``.get`` / ``.setdefault`` / ``.pop`` looks up."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        parts: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.Dict):
            parts = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Subscript):
            parts = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("get", "setdefault", "pop") and node.args:
            parts = [node.args[0]]
        for part in parts:
            found += [c for c in ast.walk(part)
                      if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return found


def test_no_module_branches_on_another_algorithms_name():
    """An algorithm's name (or alias) is compared, used as a dict key or looked up only in the
    module that declares it (or as a value of that module's own option choices: the window
    search's ``start``); everything else asks the algorithm's declaration."""
    from jetastar.clustering import algorithm_info, algorithms
    from jetastar.clustering.registry import ALIASES

    own: dict[str, str] = {name: algorithm_info(name).func.__module__ for name in algorithms()}
    own.update({alias: own[key] for alias, key in ALIASES.items()})
    choices: dict[str, set[str]] = {}
    for name in algorithms():
        info = algorithm_info(name)
        for option in info.declared or ():
            choices.setdefault(info.func.__module__, set()).update(option.choices)
    found = []
    for module, path in MODULES.items():
        for c in _name_literals(ast.parse(path.read_text())):
            if c.value in own and own[c.value] != module and c.value not in choices.get(
                    module, ()) and (module, c.value) not in OTHER_MEANINGS:
                found.append(f"{module}:{c.lineno} {c.value!r}")
    assert found == []


def test_the_name_check_sees_each_kind_of_use():
    code = ("if name == 'beam': pass\nx = {'kt': 1}\ny = t['mcts']\nz = d.get('greedy')\n"
            "w = name in ('trellis', 'other')\n")
    assert sorted(c.value for c in _name_literals(ast.parse(code))) == [
        "beam", "greedy", "kt", "mcts", "other", "trellis"]
