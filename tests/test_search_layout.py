"""The layout of `keras_attention.generation`: no module imports another in a
cycle, and the search depends on nothing but its defaults.

Read from the source with `ast` (no import), so a cycle hidden behind a
function-level import counts too.
"""

import ast
from pathlib import Path

import keras_attention.generation

PACKAGE = "keras_attention.generation"
FOLDER = Path(keras_attention.generation.__file__).parent


def _imports(path, modules):
    """The modules of the package that `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                # `from keras_attention.generation import x`: a module, or a
                # name of the package's __init__.
                for alias in node.names:
                    found.add(alias.name if alias.name in modules else "__init__")
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.split(".")[2])
    return found


def _graph():
    modules = {p.stem for p in FOLDER.glob("*.py")}
    return {m: _imports(FOLDER / f"{m}.py", modules) - {m} for m in modules}


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_generation_module_imports_another_in_a_cycle():
    graph = _graph()
    assert {"search", "search_defaults", "seq2seq_generator"} <= set(graph)
    assert _cycle(graph) is None, _cycle(graph)


def test_the_search_reads_only_its_defaults():
    graph = _graph()
    assert graph["search"] == {"search_defaults"}
    assert graph["search_defaults"] == set()


def test_the_old_search_modules_are_gone():
    for old in ("greedy_search", "beam_search", "ops_search"):
        assert not (FOLDER / f"{old}.py").exists()
