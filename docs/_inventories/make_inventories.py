"""Write the intersphinx inventories the documentation build reads (``*.inv`` next to this file).

The machines that build the documentation (CI included) reach package registries but no other site,
so ``conf.py`` never downloads an inventory. The files here are *partial* inventories written by this
script: exactly the objects of Python, NumPy, SciPy, Matplotlib, Awkward Array, Uproot and Vector
that the jetastar documentation links to, each with the address of its page in that project's
documentation. They are regenerated with::

    python docs/_inventories/make_inventories.py

and, on a machine with internet access, every address can be checked against the projects' published
inventories (``objects.inv``) with::

    python docs/_inventories/make_inventories.py --check

A reference the build reports as missing (``nitpicky`` makes that an error) is added to ``OBJECTS``.
"""

from __future__ import annotations

import argparse
import sys
import urllib.request
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: project -> (documentation root, [(name, role, path relative to the root)]); a path ending in
#: ``#`` gets the object's name appended as its anchor
OBJECTS: dict[str, tuple[str, list[tuple[str, str, str]]]] = {
    "python": ("https://docs.python.org/3/", [
        ("os.PathLike", "class", "library/os.html#"),
        ("pathlib.Path", "class", "library/pathlib.html#"),
        ("collections.abc.Sequence", "class", "library/collections.abc.html#"),
        ("collections.abc.Mapping", "class", "library/collections.abc.html#"),
        ("collections.abc.Iterable", "class", "library/collections.abc.html#"),
        ("collections.abc.Iterator", "class", "library/collections.abc.html#"),
        ("collections.abc.Callable", "class", "library/collections.abc.html#"),
        ("concurrent.futures.Executor", "class", "library/concurrent.futures.html#"),
        ("concurrent.futures.Future", "class", "library/concurrent.futures.html#"),
        ("concurrent.futures.ProcessPoolExecutor", "class", "library/concurrent.futures.html#"),
        ("dataclasses.replace", "function", "library/dataclasses.html#"),
        ("dataclasses.dataclass", "function", "library/dataclasses.html#"),
        ("abc.ABC", "class", "library/abc.html#"),
        ("pickle.UnpicklingError", "exception", "library/pickle.html#"),
        ("typing.Any", "data", "library/typing.html#"),
        ("typing.Protocol", "class", "library/typing.html#"),
        ("argparse.ArgumentParser", "class", "library/argparse.html#"),
        ("object", "class", "library/functions.html#"),
        ("int", "class", "library/functions.html#"),
        ("float", "class", "library/functions.html#"),
        ("bool", "class", "library/functions.html#"),
        ("str", "class", "library/stdtypes.html#"),
        ("bytes", "class", "library/stdtypes.html#"),
        ("dict", "class", "library/stdtypes.html#"),
        ("list", "class", "library/stdtypes.html#"),
        ("tuple", "class", "library/stdtypes.html#"),
        ("set", "class", "library/stdtypes.html#"),
        ("frozenset", "class", "library/stdtypes.html#"),
        ("range", "class", "library/stdtypes.html#"),
        ("None", "data", "library/constants.html#"),
        ("Exception", "exception", "library/exceptions.html#"),
        ("ValueError", "exception", "library/exceptions.html#"),
        ("TypeError", "exception", "library/exceptions.html#"),
        ("KeyError", "exception", "library/exceptions.html#"),
        ("OSError", "exception", "library/exceptions.html#"),
        ("RuntimeError", "exception", "library/exceptions.html#"),
        ("MemoryError", "exception", "library/exceptions.html#"),
        ("KeyboardInterrupt", "exception", "library/exceptions.html#"),
        ("DeprecationWarning", "exception", "library/exceptions.html#"),
    ]),
    "numpy": ("https://numpy.org/doc/stable/", [
        ("numpy.ndarray", "class", "reference/generated/numpy.ndarray.html#"),
        ("numpy.random.Generator", "class", "reference/random/generator.html#"),
        ("numpy.typing.ArrayLike", "data", "reference/typing.html#"),
        ("numpy.float64", "attribute", "reference/arrays.scalars.html#"),
        ("numpy.int64", "attribute", "reference/arrays.scalars.html#"),
    ]),
    "scipy": ("https://docs.scipy.org/doc/scipy/", [
        ("scipy.cluster.hierarchy.linkage", "function",
         "reference/generated/scipy.cluster.hierarchy.linkage.html#"),
        ("scipy.cluster.hierarchy.dendrogram", "function",
         "reference/generated/scipy.cluster.hierarchy.dendrogram.html#"),
    ]),
    "matplotlib": ("https://matplotlib.org/stable/", [
        ("matplotlib.axes.Axes", "class", "api/_as_gen/matplotlib.axes.Axes.html#"),
        ("matplotlib.figure.Figure", "class", "api/_as_gen/matplotlib.figure.Figure.html#"),
    ]),
    "awkward": ("https://awkward-array.org/doc/main/", [
        ("ak.Array", "class", "reference/generated/ak.Array.html#"),
        ("ak.Record", "class", "reference/generated/ak.Record.html#"),
        ("ak.zip", "function", "reference/generated/ak.zip.html#"),
        ("ak.to_buffers", "function", "reference/generated/ak.to_buffers.html#"),
        ("ak.from_buffers", "function", "reference/generated/ak.from_buffers.html#"),
        ("ak.to_numpy", "function", "reference/generated/ak.to_numpy.html#"),
    ]),
    "uproot": ("https://uproot.readthedocs.io/en/latest/", [
        ("uproot.reading.open", "function", "uproot.reading.open.html#"),
        ("uproot.behaviors.TBranch.iterate", "function", "uproot.behaviors.TBranch.iterate.html#"),
        ("uproot.behaviors.TTree.TTree", "class", "uproot.behaviors.TTree.TTree.html#"),
        ("uproot.writing.writable.recreate", "function", "uproot.writing.writable.recreate.html#"),
        # the names users write (uproot.open is uproot.reading.open)
        ("uproot.open", "function", "uproot.reading.open.html#uproot.reading.open"),
        ("uproot.iterate", "function",
         "uproot.behaviors.TBranch.iterate.html#uproot.behaviors.TBranch.iterate"),
    ]),
    "vector": ("https://vector.readthedocs.io/en/latest/", [
        ("vector.backends.awkward_constructors.zip", "function",
         "api/backends/vector.backends.awkward_constructors.html#"),
        ("vector.backends.awkward_constructors.Array", "function",
         "api/backends/vector.backends.awkward_constructors.html#"),
        ("vector.backends.object.obj", "function", "api/backends/vector.backends.object.html#"),
        ("vector.backends.numpy.array", "function", "api/backends/vector.backends.numpy.html#"),
        # the names users write (vector.zip is vector.backends.awkward_constructors.zip, ...)
        ("vector.zip", "function", "api/backends/vector.backends.awkward_constructors.html"
                                   "#vector.backends.awkward_constructors.zip"),
        ("vector.Array", "function", "api/backends/vector.backends.awkward_constructors.html"
                                     "#vector.backends.awkward_constructors.Array"),
        ("vector.obj", "function", "api/backends/vector.backends.object.html#vector.backends.object.obj"),
        ("vector.array", "function", "api/backends/vector.backends.numpy.html#vector.backends.numpy.array"),
    ]),
}


def _lines(entries: list[tuple[str, str, str]]) -> list[str]:
    lines = []
    for name, role, path in sorted(entries):
        uri = path + "$" if path.endswith("#") else path
        lines.append(f"{name} py:{role} 1 {uri} -")
    return lines


def write(project: str) -> Path:
    """Write ``<project>.inv`` (Sphinx inventory format, version 2)."""
    _, entries = OBJECTS[project]
    header = (f"# Sphinx inventory version 2\n# Project: {project}\n# Version: \n"
              "# The remainder of this file is compressed using zlib.\n").encode()
    body = zlib.compress(("\n".join(_lines(entries)) + "\n").encode())
    path = HERE / f"{project}.inv"
    path.write_bytes(header + body)
    return path


def check(project: str) -> list[str]:
    """Names of ``project`` whose address differs from the project's published inventory."""
    from sphinx.util.inventory import InventoryFile

    root, entries = OBJECTS[project]
    with urllib.request.urlopen(root + "objects.inv", timeout=30) as response:
        published = InventoryFile.loads(response.read(), uri=root)
    found = {}
    for kind, objects in published.data.items() if hasattr(published, "data") else published.items():
        for name, item in objects.items():
            found[(kind, name)] = getattr(item, "uri", None) or item[2]
    bad = []
    for name, role, path in entries:
        if not path.endswith("#"):
            continue  # an alias: the name users write, at the address of the object it names
        uri = root + (path + name if path.endswith("#") else path)
        if found.get((f"py:{role}", name)) != uri:
            bad.append(f"{project}: {name} ({role}) -> {uri}")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="compare every address with the published inventories (needs internet)")
    args = parser.parse_args(argv)
    if args.check:
        bad = [line for project in OBJECTS for line in check(project)]
        print("\n".join(bad) or "all addresses match the published inventories")
        return 1 if bad else 0
    for project in OBJECTS:
        print(write(project))
    return 0


if __name__ == "__main__":
    sys.exit(main())
