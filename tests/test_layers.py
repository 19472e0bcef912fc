"""The package's layers, read from its imports: the paper's model (``nmt_lib.paper``) imports no other
model, no speed code and no machinery; the models before and after it build on the paper's modules;
the library (``nmt_lib``) never imports the experiments (``nmt_experiments``); the experiments' wings
keep apart (a study imports the core and itself, the core and the book's pages no study); imports
run one way (no cycle between modules, function-level imports included); and the library builds no
path into the repository's ``results/`` (the command line's ``--out`` default aside)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules(package: str) -> dict[str, Path]:
    """``{module name: file}`` of every module of ``package``."""
    out = {}
    for f in sorted((ROOT / package).rglob("*.py")):
        parts = list(f.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def imports(name: str, path: Path) -> set[str]:
    """The modules that ``name`` (at ``path``) imports, anywhere in it, as absolute names (``from
    pkg import sub`` names ``pkg.sub`` where that is a module)."""
    is_pkg = path.name == "__init__.py"
    package = name if is_pkg else name.rpartition(".")[0]
    known = modules("nmt_lib") | modules("nmt_experiments")
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known)
    return {m for m in out if m.split(".")[0] in ("nmt_lib", "nmt_experiments")} - {name}


def graph(package: str) -> dict[str, set[str]]:
    mods = modules(package)
    return {n: imports(n, f) for n, f in mods.items()}


def test_the_library_never_imports_the_experiments():
    bad = {
        n: sorted(i for i in deps if i.startswith("nmt_experiments"))
        for n, deps in graph("nmt_lib").items()
    }
    assert not {n: d for n, d in bad.items() if d}


def test_the_paper_imports_no_other_model_and_no_machinery():
    allowed = ("nmt_lib.paper", "nmt_lib.data.vocab", "nmt_lib.config")
    for name, deps in graph("nmt_lib").items():
        if name.startswith("nmt_lib.paper"):
            assert all(d.startswith(allowed) for d in deps), (name, deps)


def test_the_models_before_and_after_build_on_the_paper_not_on_speed_code():
    for name, deps in graph("nmt_lib").items():
        if name.startswith("nmt_lib.models."):
            assert not any(d.startswith(("nmt_lib.fast", "nmt_lib.train")) for d in deps), name


#: The experiments' wings: the shared core, the book's pages, and one package per study.
CORE, PAGES = "core", "pages"
STUDIES = ("replicate", "budget", "pilot", "comparison")


def wing(module: str) -> str | None:
    """The wing of an ``nmt_experiments`` module (``nmt_experiments.budget.study``: ``budget``),
    None for the package itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "nmt_experiments" and len(parts) > 1 else None


def crossings(g: dict[str, set[str]]) -> list[str]:
    """The imports of ``g`` between wings that the layout forbids: a study importing another study
    or the pages, the core importing anything but itself, the pages importing a study."""
    allowed = {CORE: {CORE}, PAGES: {CORE, PAGES}} | {s: {CORE, s} for s in STUDIES}
    found = []
    for name, deps in g.items():
        w = wing(name)
        for d in sorted(deps):
            v = wing(d)
            if d.startswith("nmt_experiments") and w is not None and v not in allowed.get(w, set()):
                found.append(f"{name} -> {d}")
    return found


def test_the_wings_keep_apart():
    g = graph("nmt_experiments")
    assert {wing(n) for n in g} - {None} == {CORE, PAGES, *STUDIES}  # every module in a wing
    assert crossings(g) == []


def test_the_wing_check_finds_a_study_importing_another():
    g = {
        "nmt_experiments.pilot.study": {
            "nmt_experiments.core.results",
            "nmt_experiments.pilot.fits",
        },
        "nmt_experiments.comparison.recipe_sweep": {"nmt_experiments.budget.study"},
        "nmt_experiments.core.claims": {"nmt_experiments.replicate.readme"},
        "nmt_experiments.pages.diagrams": {"nmt_experiments.core.plots"},
    }
    assert crossings(g) == [
        "nmt_experiments.comparison.recipe_sweep -> nmt_experiments.budget.study",
        "nmt_experiments.core.claims -> nmt_experiments.replicate.readme",
    ]


def _cycle(g: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``g`` between modules (a package and its own modules aside), or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(g.get(n, ())):
            if d.startswith(n + ".") or n.startswith(d + "."):  # a package and its modules
                continue
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if state.get(d) is None and d in g:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in g:
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_imports_run_one_way():
    assert _cycle(graph("nmt_lib") | graph("nmt_experiments")) is None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_library_builds_no_path_into_the_results():
    found = []
    for name, path in modules("nmt_lib").items():
        if name == "nmt_lib.__main__":  # --out defaults to results/<profile>
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in ("results", "results/"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found


#: The house's sizes (CONTRIBUTING.md): a module holds one thing, a function does one job.
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def oversized(path: Path, root: Path = ROOT) -> list[str]:
    """What in ``path`` is over the house's sizes: the module (``fast/kernels.*`` may be) and each
    function, with its line count."""
    src, name = path.read_text(encoding="utf-8"), path.relative_to(root)
    lines = src.count("\n")
    out = [f"{name}: {lines} lines"] if lines > MAX_MODULE_LINES and path.stem != "kernels" else []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > MAX_FUNCTION_LINES:
                out.append(f"{name}:{node.lineno} {node.name}: {n} lines")
    return out


def test_no_module_and_no_function_is_over_the_house_sizes():
    files = {**modules("nmt_lib"), **modules("nmt_experiments")}.values()
    assert [x for f in files for x in oversized(f)] == []


def test_the_size_check_finds_a_long_function_and_a_long_module(tmp_path):
    path = tmp_path / "long.py"
    path.write_text("def f():\n" + "    x = 1\n" * 70, encoding="utf-8")
    assert oversized(path, tmp_path) == ["long.py:1 f: 71 lines"]
    path.write_text("x = 1\n" * 401, encoding="utf-8")
    assert oversized(path, tmp_path) == ["long.py: 401 lines"]
