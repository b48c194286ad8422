"""Sphinx extension of the jetastar site: API pages from the public faces, examples, CLI reference.

* ``builder-inited``: writes ``api/<face>.rst`` for every public face, listing exactly the names of
  its ``__all__`` (so a new public name gets a page without anyone editing the docs), before
  autosummary generates one page per name from them.
* ``autodoc-process-docstring``: a public name whose docstring has no example gets the one in
  :mod:`api_examples` (run by ``tests/test_docs.py``); module-level constants get their description.
* ``missing-reference``: type hints name objects by their defining module (``jetastar.jet.Jet``);
  they resolve to the public page (``jetastar.Jet``).
* the ``jetastar-cli-help`` directive renders ``jetastar --help`` and every ``jetastar COMMAND --help``
  verbatim from the argument parser, at a fixed width of :data:`HELP_COLUMNS` columns.
* the ``jetastar-algorithm-options`` directive renders every registered algorithm's options (name,
  default, allowed values, meaning) from the algorithm's own declaration, the same that
  ``jetastar algorithms NAME`` prints and that checks the options of a run.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from api_examples import CONSTANTS, EXAMPLES
from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.ext.intersphinx import missing_reference as intersphinx_missing_reference
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

#: the public faces whose names are documented, in the order of the API reference
FACES = ("jetastar", "jetastar.ginkgo", "jetastar.clustering", "jetastar.inference", "jetastar.io",
         "jetastar.observables", "jetastar.batch")

#: width of the rendered ``--help`` texts (``COLUMNS=100 jetastar COMMAND --help`` prints the same)
HELP_COLUMNS = 100

_FACE_TITLES = {
    "jetastar": "Jets, trees and errors",
    "jetastar.ginkgo": "The Ginkgo model",
    "jetastar.clustering": "Clustering algorithms",
    "jetastar.inference": "Inference: fitting the shower's rates",
    "jetastar.io": "Files",
    "jetastar.observables": "Observables on trees",
    "jetastar.batch": "Batch processing",
}


def public_names(face: str) -> list[str]:
    """The names a face documents: its ``__all__`` (a submodule face links to its own page)."""
    module = importlib.import_module(face)
    return [name for name in module.__all__ if f"{face}.{name}" not in FACES]


def _face_page(face: str) -> str:
    module = importlib.import_module(face)
    title = f"``{face}``: {_FACE_TITLES[face]}"
    lines = [title, "=" * len(title), "", f".. automodule:: {face}", "   :no-members:", ""]
    faces_below = [f"{face}.{name}" for name in module.__all__ if f"{face}.{name}" in FACES]
    if faces_below:
        lines += ["Subpackages: " + ", ".join(f":mod:`{sub}`" for sub in faces_below), ""]
    lines += [f".. currentmodule:: {face}", "", ".. autosummary::", "   :toctree: generated",
              "   :template: public-name.rst", ""]
    lines += [f"   {name}" for name in public_names(face)]
    return "\n".join(lines) + "\n"


def _write_api_pages(app: Sphinx) -> None:
    api = Path(app.srcdir) / "api"
    api.mkdir(exist_ok=True)
    for face in FACES:
        path = api / f"{face}.rst"
        text = _face_page(face)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def _public_targets() -> dict[str, str]:
    """``defining_module.qualname`` -> public name, for every public class and function."""
    targets: dict[str, str] = {}
    for face in FACES:
        module = importlib.import_module(face)
        for name in public_names(face):
            obj = getattr(module, name)
            qualname = getattr(obj, "__qualname__", None)
            where = getattr(obj, "__module__", None)
            if qualname and where:
                targets.setdefault(f"{where}.{qualname}", f"{face}.{name}")
    return targets


#: private paths of other packages' objects (as ``__module__`` gives them) -> their documented names
_ALIASES = {"concurrent.futures._base.": "concurrent.futures.", "_pickle.": "pickle."}
#: names that type hints leave unqualified (a lazily imported type) -> their documented names
_UNQUALIFIED = {"Axes": "matplotlib.axes.Axes", "Figure": "matplotlib.figure.Figure"}


def _lookup(path: str) -> Any:
    """The object a dotted path names (a module, or an attribute of one), or None."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj
    return None


def _internal(node: Any) -> bool:
    """Whether a reference names an existing jetastar object that is not documented on the site
    (a private helper a module docstring mentions): it is shown as code, and a name that does not
    exist stays an error."""
    target = node.get("reftarget", "")
    module, cls = node.get("py:module") or "", node.get("py:class") or ""
    candidates = [target]
    if module:
        candidates += [f"{module}.{cls}.{target}" if cls else "", f"{module}.{target}"]
    # a docstring's own module: "<file>:docstring of jetastar.clustering.exact.trellis.Trellis.n_trees"
    owner = (node.source or "").rpartition("docstring of ")[2]
    while owner.startswith("jetastar"):
        candidates.append(f"{owner}.{target}")
        owner = owner.rpartition(".")[0]
    for path in filter(None, candidates):
        if path.split(".")[0] == "jetastar" and _lookup(path) is not None:
            return True
    return False


def _resolve_public(app: Sphinx, env: Any, node: Any, contnode: Any) -> Any:
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    for private, documented in _ALIASES.items():
        if target.startswith(private):
            new = node.deepcopy()
            new["reftarget"] = documented + target[len(private):]
            return intersphinx_missing_reference(app, env, new, contnode)
    if target in _UNQUALIFIED:
        new = node.deepcopy()
        new["reftarget"] = _UNQUALIFIED[target]
        return intersphinx_missing_reference(app, env, new, contnode)
    public = app.env.jetastar_public_targets.get(target)
    if public is None:
        # a method or attribute of a public class: jetastar.jet.Jet.n_leaves -> jetastar.Jet.n_leaves
        owner, _, attr = target.rpartition(".")
        if owner in app.env.jetastar_public_targets:
            public = f"{app.env.jetastar_public_targets[owner]}.{attr}"
    domain = env.get_domain("py")
    new = node.deepcopy()
    if public is None:
        # a short name in a docstring (:meth:`take`, :class:`ClusteringResult`): the one documented
        # object whose full name ends with it
        new["refspecific"] = True
        public = target
    new["reftarget"] = public
    found = domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], public, new, contnode)
    if found is None and _internal(node):
        return contnode
    return found


def _add_example(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    if name in CONSTANTS:
        lines[:] = CONSTANTS[name].strip().splitlines()
    text = "\n".join(lines)
    if name in EXAMPLES and ">>>" not in text:
        lines += ["", ".. rubric:: Example", ""]
        lines += [line.rstrip() for line in EXAMPLES[name].strip().splitlines()]
        lines.append("")


def _plain_factory_defaults(app: Sphinx, what: str, name: str, obj: Any, options: Any,
                             signature: str | None, return_annotation: str | None) -> Any:
    """A dataclass field with a default factory shows ``= <factory>``, which is no Python expression
    (Sphinx then splits the signature at every comma); show ``= ...`` instead."""
    if signature and "<factory>" in signature:
        return signature.replace("<factory>", "..."), return_annotation
    return None


@contextlib.contextmanager
def _columns(n: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def cli_help_texts() -> dict[str, str]:
    """``{"": jetastar --help, "run": jetastar run --help, ...}`` at :data:`HELP_COLUMNS` columns."""
    from jetastar.cli.command import build_parser

    with _columns(HELP_COLUMNS):
        parser = build_parser()
        texts = {"": parser.format_help()}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    texts[name] = sub.format_help()
    return texts


class CliHelp(SphinxDirective):
    """``.. jetastar-cli-help::`` — one section per command with its ``--help`` text."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        texts = cli_help_texts()
        rst: list[str] = []
        for name, text in texts.items():
            title = f"jetastar {name}".strip()
            command = f"{title} --help"
            rst += [f".. _cli-{name or 'jetastar'}:", "", f"``{title}``", "-" * (len(title) + 4), "",
                    f"``{command}``:", "", ".. code-block:: text", ""]
            rst += [f"   {line}".rstrip() for line in text.rstrip("\n").splitlines()]
            rst.append("")
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(rst, source="jetastar --help"), container)
        return list(container.children)


def _cell(text: str) -> str:
    return text.replace("*", "\\*").replace("|", "\\|") or "—"


def algorithm_options_rst() -> list[str]:
    """The ``jetastar-algorithm-options`` text: per registered algorithm, a section with its
    description and a table of its options (from :class:`jetastar.clustering.AlgorithmInfo`)."""
    from jetastar.clustering import algorithm_info, algorithms
    from jetastar.clustering.options import option_table

    rst: list[str] = []
    for name in algorithms():
        info = algorithm_info(name)
        title = f"``{name}``"
        facts = [("exact" if info.exact else "approximate")
                 + (f", at most {info.max_leaves} leaves by default" if info.max_leaves else ""),
                 f"family ``{info.family}``",
                 f"columnar path: {'yes' if info.chunk is not None else 'no'}"]
        if info.aliases:
            facts.append("also called " + ", ".join(f"``{a}``" for a in info.aliases))
        rst += [f".. _algorithm-{name}:", "", title, "-" * len(title), "",
                f"{info.description} ({'; '.join(facts)}).", ""]
        rows = option_table(info.declared or ())
        if not rows:
            rst += ["No options.", ""]
            continue
        rst += [".. list-table::", "   :header-rows: 1", "   :widths: 18 14 24 44", "",
                "   * - option", "     - default", "     - values", "     - meaning"]
        for option, default, values, meaning in rows:
            rst += [f"   * - ``{option}``", f"     - ``{default}``", f"     - {_cell(values)}",
                    f"     - {_cell(meaning)}"]
        rst.append("")
    return rst


class AlgorithmOptions(SphinxDirective):
    """``.. jetastar-algorithm-options::`` — every registered algorithm's options."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(
            self.state, StringList(algorithm_options_rst(), source="jetastar algorithms"),
            container)
        return list(container.children)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("builder-inited", _write_api_pages, priority=100)
    app.connect("builder-inited", _remember_targets)
    app.connect("autodoc-process-docstring", _add_example)
    app.connect("autodoc-process-signature", _plain_factory_defaults)
    app.connect("missing-reference", _resolve_public)
    app.add_directive("jetastar-cli-help", CliHelp)
    app.add_directive("jetastar-algorithm-options", AlgorithmOptions)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}


def _remember_targets(app: Sphinx) -> None:
    app.env.jetastar_public_targets = _public_targets()
