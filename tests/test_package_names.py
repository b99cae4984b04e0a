"""The names of `keras_attention`: each public function or class is defined in
one module, no module imports another module's private names, and no module
reads a private attribute of Keras (or of any other library).

A public name defined twice (`export_tflite` in `keras_attention.export` and
in `keras_attention.translation`, before they became one skeleton) makes a
reader guess which one an import gives; a private name imported across modules
is an interface nobody documents or checks; a private attribute of Keras
(`_call_has_training_arg`, read from a cell before the decoders were composed)
can change or go in any release. Read from the source with `ast`
(no import), so function-level imports count too.
"""

import ast
import collections
import sys
from pathlib import Path

import keras_attention

FOLDER = Path(keras_attention.__file__).parent
PACKAGE = "keras_attention"
# Every runnable module (`python -m ...`) has its own command line under the
# names `argparse` scripts use.
COMMAND_LINE_NAMES = {"main", "parse_args", "build_parser"}


def _modules():
    """{dotted module name: path} of every module of the package."""
    modules = {}
    for path in sorted(FOLDER.rglob("*.py")):
        parts = path.relative_to(FOLDER.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _public_definitions(path):
    """The public functions and classes that `path` defines at its top level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and not node.name.startswith("_")
    }


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(path, modules):
    """`module.name` of each private name of another module of the package
    that `path` imports or reads (`from m import _x`, `m._x` of an imported
    module `m`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    module_names = {}  # local name -> a module of the package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in modules:
                    module_names[alias.asname or alias.name] = full
                elif _private(alias.name):
                    found.append(full)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE) and alias.asname:
                    module_names[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_names
            and _private(node.attr)
        ):
            found.append(f"{module_names[node.value.id]}.{node.attr}")
    return found


def test_the_walk_reads_every_module():
    modules = _modules()
    assert {"keras_attention.export.tflite", "keras_attention.translation.lite"} <= set(modules)
    assert "convert" in _public_definitions(modules["keras_attention.export.tflite"])


def _defined_twice(modules):
    """{name: [modules]} of the public functions and classes (but the
    command-line names) that more than one module defines."""
    where = collections.defaultdict(list)
    for module, path in modules.items():
        for name in sorted(_public_definitions(path) - COMMAND_LINE_NAMES):
            where[name].append(module)
    return {name: found for name, found in where.items() if len(found) > 1}


def test_each_public_function_or_class_is_defined_in_one_module():
    twice = _defined_twice(_modules())
    assert twice == {}


def test_no_module_but_an_init_re_exports_a_name():
    # An unused import kept with `noqa: F401` is a second address for a name
    # (`translation.runs.RunFolderError` for `training.run_folder`'s): import
    # it from the module that defines it. A package's `__init__` gathers its
    # public names, in `__all__`.
    found = [
        f"{path.relative_to(FOLDER.parent)}:{number}"
        for path in sorted(FOLDER.rglob("*.py"))
        if path.name != "__init__.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "noqa: F401" in line
    ]
    assert found == []


def test_no_module_imports_another_modules_private_names():
    modules = _modules()
    imported = {name: _private_imports(path, modules) for name, path in modules.items()}
    assert {name: names for name, names in imported.items() if names} == {}


def test_the_private_import_finder_finds_both_forms(tmp_path):
    modules = _modules()
    path = tmp_path / "m.py"
    path.write_text(
        "from keras_attention.export.operators import _hidden\n"
        "from keras_attention.export import operators\n"
        "from keras_attention.attention.masking import shape_error as _alias\n"
        "operators._other()\n"
        "operators.__name__\n"
    )
    assert _private_imports(path, modules) == [
        "keras_attention.export.operators._hidden",
        "keras_attention.export.operators._other",
    ]


def _top_level_names():
    """The subpackages and modules directly under `keras_attention/`."""
    names = {path.stem for path in FOLDER.glob("*.py") if path.stem != "__init__"}
    names |= {path.parent.name for path in FOLDER.glob("*/__init__.py")}
    return names


def test_the_package_docstring_names_every_subpackage_and_module():
    docstring = keras_attention.__doc__
    missing = sorted(name for name in _top_level_names() if f"`{PACKAGE}.{name}`" not in docstring)
    assert {"testing", "training", "translation", "files"} <= _top_level_names()
    assert missing == []


# What gives a name to an attribute: a definition, an assignment, an argument.
_NAMING = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.arg, ast.keyword, ast.alias)


def _names_defined(tree):
    """Every name `tree` defines, assigns or takes as an argument."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, _NAMING):
            names.add(getattr(node, "name", None) or getattr(node, "arg", None))
            names.add(getattr(node, "asname", None))
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
    return names - {None}


def _foreign_private_reads(path, package_names):
    """`line: name` of each private attribute that `path` reads (`x._name`,
    `getattr(x, "_name")`) and the package never defines, and of each import
    of `keras.src`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    known = package_names | _names_defined(tree)
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = node.args[1].value
        if name is not None and _private(name) and name not in known:
            found.append(f"{node.lineno}: {name}")
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            modules += [alias.name for alias in node.names]
            if any(m == "keras.src" or m.startswith("keras.src.") for m in modules):
                found.append(f"{node.lineno}: keras.src")
    return found


def _package_names(modules):
    names = set()
    for path in modules.values():
        names |= _names_defined(ast.parse(path.read_text(encoding="utf-8")))
    return names


def test_no_module_reads_a_private_attribute_of_another_library():
    modules = _modules()
    names = _package_names(modules)
    found = {module: _foreign_private_reads(path, names) for module, path in modules.items()}
    assert {module: reads for module, reads in found.items() if reads} == {}


def test_the_foreign_private_finder_finds_each_form(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "import keras.src.ops\n"
        "from keras.src import backend\n"
        "self._own = 1\n"
        "def run(cell, layer):\n"
        "    layer._own, cell.built\n"
        "    if getattr(cell, '_call_has_training_arg', False):\n"
        "        return layer._tracker\n"
    )
    assert _foreign_private_reads(path, set()) == [
        "1: keras.src",
        "2: keras.src",
        "6: _call_has_training_arg",
        "7: _tracker",
    ]


# The package's rooms and the rooms each may import: every arrow runs down,
# from the clients (translation) through export, generation and training to
# the ground (arguments, backend, files, text, scoring, runtime), which
# import no other room. `training` and `export` both write files through
# `files`, with no arrow between them.
GROUND = {"arguments", "backend", "files", "text", "scoring", "runtime"}
MAY_IMPORT = {
    **{room: set() for room in GROUND},
    "attention": {"arguments", "backend"},
    "decoders": {"arguments", "backend", "attention"},
    "generation": {"arguments", "backend", "scoring", "attention", "decoders"},
    "training": GROUND,
    "export": GROUND | {"attention", "decoders", "generation"},
    "testing": GROUND | {"attention", "decoders", "generation", "export"},
    "translation": GROUND
    | {"attention", "decoders", "generation", "export", "training", "testing"},
}
# The root keeps its `__init__` and the public checker, as `keras.testing`.
ROOT_MODULES = {"testing"}


def _room_imports():
    """{room: {rooms it imports}}, read from the source of every module
    (function-level imports too); the root `__init__` is left out, since it
    gathers the public names."""
    found = collections.defaultdict(set)
    for path in FOLDER.rglob("*.py"):
        parts = path.relative_to(FOLDER).with_suffix("").parts
        if parts == ("__init__",):
            continue
        room = parts[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                names = [node.module]
                if node.module == PACKAGE:
                    names = [f"{PACKAGE}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                other = name.split(".")
                if other[0] == PACKAGE and len(other) > 1 and other[1] != room:
                    found[room].add(other[1])
    return found


def test_the_root_keeps_its_init_and_the_checker_only():
    loose = {path.stem for path in FOLDER.glob("*.py")} - {"__init__"}
    assert loose == ROOT_MODULES


def test_every_room_says_what_it_holds_and_lists_it_in_all():
    for init in sorted(FOLDER.glob("*/__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), init.parent.name
        assigned = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert "__all__" in assigned, init.parent.name
        module = __import__(f"{PACKAGE}.{init.parent.name}", fromlist=["__all__"])
        for name in module.__all__:
            assert hasattr(module, name) or (init.parent / f"{name}.py").is_file(), (
                f"{init.parent.name}.__all__ names {name}, which it does not hold"
            )


def test_every_room_is_in_the_arrow_table():
    rooms = {path.parent.name for path in FOLDER.glob("*/__init__.py")}
    assert rooms | ROOT_MODULES == set(MAY_IMPORT)


def test_every_arrow_between_rooms_runs_down():
    upward = {
        room: sorted(imported - MAY_IMPORT[room])
        for room, imported in _room_imports().items()
        if imported - MAY_IMPORT[room]
    }
    assert upward == {}


def test_the_arrow_reader_finds_an_upward_import(monkeypatch, tmp_path):
    fake = tmp_path / PACKAGE
    (fake / "files").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "files" / "__init__.py").write_text('"""x"""\n__all__ = []\n')
    (fake / "files" / "writer.py").write_text(
        "def f():\n    from keras_attention.training import run_folder\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "FOLDER", fake)
    assert _room_imports() == {"files": {"training"}}


# A private method is a part's own: another object calls it through a public
# door (`attention.attend_step`, `member.check_source`), so the part may
# change it without a caller noticing. `self`, `cls` and `super()` are the
# part itself; a dunder is Python's protocol, not a private method.
_OWN = {"self", "cls"}


def _private_calls(path):
    """`line: receiver._name` of each call of a private method on another
    object than `self`, `cls` or `super()`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        own = isinstance(receiver, ast.Name) and receiver.id in _OWN
        own |= (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        )
        if _private(node.func.attr) and not own:
            found.append(f"{node.lineno}: {ast.unparse(node.func)}")
    return found


def test_no_module_calls_a_private_method_of_another_object():
    found = {module: _private_calls(path) for module, path in _modules().items()}
    assert {module: calls for module, calls in found.items() if calls} == {}


def test_the_private_call_finder_finds_a_call_on_another_object(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "class Decoder:\n"
        "    def step(self, member):\n"
        "        self._own()\n"
        "        super()._own()\n"
        "        self.__len__()\n"
        "        member.__len__()\n"
        "        member.check_source()\n"
        "        self.attention._attend_step()\n"
        "        return member._check_source(), type(self)._made()\n"
    )
    assert _private_calls(path) == [
        "8: self.attention._attend_step",
        "9: member._check_source",
        "9: type(self)._made",
    ]
