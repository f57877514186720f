"""The documentation: the mkdocs site builds with warnings as errors; every internal link of README.md and the site
resolves; the guides' shell and Python examples run (tests/test_readme.py's machinery: offline, tiny data, tiny
overrides; a fence right after `<!-- not run: reason -->` is skipped); the generated pages (block and CLI reference,
README's blocks table, the site's home page) are current, and a declaration change makes its block's page stale;
BENCHMARKS.md has one current table per topic, each naming its command, machine, load and date.

Examples that train, export or ablate are `slow`; the default run executes the quick ones (modules, insert,
heatmap, the reference check)."""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme import python_examples, readme_commands, run_as_reader, workspace  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
NOT_RUN = re.compile(r"<!-- not run: ([^>]+?) -->\n```\w*\n.*?^```\n?", re.DOTALL | re.MULTILINE)
FAST = {"modules", "insert", "heatmap"}  # tools whose examples run in the default suite (seconds each)
FAST_SCRIPTS = {"scripts/docs_reference.py", "scripts/copies.py"}


def load_generator():
    """scripts/docs_reference.py as a module."""
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "scripts" / "docs_reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


REF = load_generator()
GENERATED_DIRS = (DOCS / "reference" / "blocks",)


def guide_pages() -> list[Path]:
    """The hand-written pages whose examples run: every docs page but the generated ones and docs/index.md (README's
    opening, whose commands tests/test_readme.py runs)."""
    gen = set(REF.pages())
    return [p for p in sorted(DOCS.rglob("*.md")) if p not in gen]


def runnable(text: str) -> str:
    """A page's code fences, without those marked `<!-- not run: reason -->` (inline code is prose, not run)."""
    fences = re.findall(r"^```(\w*)\n(.*?)^```", NOT_RUN.sub("", text), re.DOTALL | re.MULTILINE)
    return "".join(f"```{lang}\n{body}```\n" for lang, body in fences)


def examples() -> list[tuple[str, str]]:
    """(page, command) for every shell command of the guides, in page order, each once."""
    out = []
    for page in guide_pages():
        text = runnable(page.read_text())
        out += [(page.relative_to(REPO).as_posix(), c) for c in readme_commands(text)]
    return list(dict.fromkeys(out))


def is_fast(command: str) -> bool:
    """Whether a guide's command runs in the default suite: a quick tool (no CAM), a help text, a quick script."""
    argv = shlex.split(command)
    if argv[0] == "python":
        return argv[1] in FAST_SCRIPTS
    return (argv[1] in FAST and not any(a.startswith("cam=") for a in argv)) or "help" in argv[2:]


EXAMPLES = examples()


def test_not_run_needs_a_reason():
    """Every `<!-- not run -->` mark gives a reason and sits right before a fence."""
    for page in [*DOCS.rglob("*.md"), REPO / "README.md"]:
        text = re.sub(r"`[^`\n]+`", "", page.read_text())  # a mark quoted in prose is no mark
        marks = re.findall(r"<!-- not run:?([^>]*)-->", text)
        assert len(marks) == len(NOT_RUN.findall(text)), f"{page}: a not-run mark not right before a fence"
        assert all(m.strip() for m in marks), f"{page}: a not-run mark without its reason"


def test_guides_have_examples():
    """The parser sees the guides' commands (a page whose commands vanish would pass silently)."""
    pages = {p for p, _ in EXAMPLES}
    for name in ("yaml", "insert", "ablation", "heatmaps", "health", "explain", "sdpa"):
        assert f"docs/guides/{name}.md" in pages, name
    assert any(is_fast(c) for _, c in EXAMPLES) and not all(is_fast(c) for _, c in EXAMPLES)


@pytest.fixture(scope="module")
def docs_workspace(workspace):  # noqa: F811
    """README's workspace, plus the checkpoint the guides' commands name: runs/detect/train/weights/best.pt, an
    untrained yolo11n + CBAM (the guides train it first; here its blocks are what matters)."""
    from ultralytics import YOLO

    root, fill = workspace
    best = root / "runs" / "detect" / "train" / "weights" / "best.pt"
    if not best.exists():
        best.parent.mkdir(parents=True, exist_ok=True)
        YOLO(str(REPO / "models" / "yolo11n-cbam.yaml")).save(str(best))
    return root, fill


@pytest.mark.parametrize("page,command", [pytest.param(p, c, marks=() if is_fast(c) else pytest.mark.slow,
                                                        id=f"{Path(p).stem}: {c[:60]}") for p, c in EXAMPLES])
def test_guide_command(page, command, docs_workspace, capsys):
    """The command as the page shows it, placeholders filled in, tiny overrides appended: exit code 0."""
    root, fill = docs_workspace
    code, _ = run_as_reader(command, root, fill, where=page)
    out = capsys.readouterr()
    assert code == 0, f"{page}: {command}\n{out.out[-3000:]}\n{out.err[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("page,index", [(p.relative_to(REPO).as_posix(), i) for p in guide_pages()
                                        for i in range(len(python_examples(runnable(p.read_text()))))])
def test_guide_python_example(page, index, docs_workspace, monkeypatch):
    """Each Python example of the guides, executed as written; Ultralytics' train gets the tiny overrides."""
    from test_readme import TRAIN_KW
    from ultralytics.engine.model import Model

    root, _ = docs_workspace
    train = Model.train
    monkeypatch.setattr(Model, "train", lambda self, **kw: train(self, **{**kw, **TRAIN_KW,
                                                                       "project": str(root / "runs" / "python")}))
    code = python_examples(runnable((REPO / page).read_text()))[index]
    exec(compile(code, page, "exec"), {})  # noqa: S102  the guide's example, as a reader runs it


def test_mkdocs_builds_strict(tmp_path):
    """`mkdocs build --strict` (not `-q`, which hides the warnings strict counts): no broken link or anchor, no page
    missing from the nav, no missing picture."""
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "blocks" / "CBAM" / "index.html").is_file()


def slug(heading: str) -> str:
    """The anchor mkdocs' toc (and GitHub) gives a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("page", ["README.md", "BENCHMARKS.md", "docs/copies.md"])
def test_links_outside_the_site_resolve(page):
    """Every relative link of README.md and BENCHMARKS.md (read on GitHub, not by mkdocs) names a file that exists,
    and its #anchor a heading of that file."""
    path = REPO / page
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    for link in links:
        if re.match(r"\w+://", link):
            continue
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{page}: link {link!r}: no such file"
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file), f"{page}: link {link!r}: no heading with that anchor"


def test_readme_is_short():
    """README.md stays a short entry point: at most 200 lines."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


def test_generated_pages_are_current():
    """The block and CLI reference pages, README's blocks table and the home page equal what the generator writes
    now (`python scripts/docs_reference.py` regenerates them)."""
    import attn_yolo  # noqa: F401

    assert REF.stale() == [], "stale: run python scripts/docs_reference.py"


def test_a_changed_declaration_makes_its_page_stale():
    """Change one block's declaration (a default, an alias, its paper): exactly that block's page goes stale, and the
    README table and the blocks index with it when the table shows the change."""
    decls = copy.copy(REF.declarations())
    cbam = decls["CBAM"]
    params = [dataclasses.replace(p, default=8) if p.name == "r" else p for p in cbam.params]
    decls["CBAM"] = dataclasses.replace(cbam, params=type(cbam.params)(params))
    stale = REF.stale(decls)
    assert REF.BLOCKS_DIR / "CBAM.md" in stale and REF.BLOCKS_DIR / "SE.md" not in stale
    assert REF.README in stale and REF.BLOCKS_DIR / "index.md" in stale  # the table shows r=8
    decls["CBAM"] = dataclasses.replace(cbam, aliases=(*cbam.aliases, "CBAM_Renamed"))
    assert REF.stale(decls) == [REF.BLOCKS_DIR / "CBAM.md"]
    assert "| `r` | `8` |" in REF.block_page(dataclasses.replace(cbam, params=type(cbam.params)(params)))


def test_every_block_has_a_page_with_its_parts():
    """Each block page gives the formula, every YAML arg with its default, the paper and the aliases of its
    declaration; the README table links every page."""
    readme = (REPO / "README.md").read_text()
    for name, d in REF.declarations().items():
        page = (REF.BLOCKS_DIR / f"{name}.md").read_text()
        assert "## Formula" in page and d.paper in page, name
        for p in REF.hyper(d):
            assert f"| `{p.name}` | `{p.none_means or p.default}` |" in page, (name, p.name)
        assert all(f"`{a}`" in page for a in d.aliases), name
        assert f"(docs/reference/blocks/{name}.md)" in readme, name


def test_ablation_config_keys_are_documented():
    """Every key an ablation config takes has a row on the config reference page, and the page names no other."""
    from attn_yolo.ablate.config.ablation import CONFIG_KEYS

    page = (DOCS / "reference" / "ablation-config.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|", page, re.MULTILINE)
    assert sorted(rows) == sorted(CONFIG_KEYS)


def test_benchmarks_one_current_table_per_topic():
    """BENCHMARKS.md: numbered sections, no number twice, each topic section naming its command, machine, load and
    date (in its own table, before its figures), the export matrix between its markers."""
    text = (REPO / "BENCHMARKS.md").read_text()
    heads = re.findall(r"^(#{2,3}) (\d+(?:\.\d+)?)\.? (.+)$", text, re.MULTILINE)
    numbers = [n for _, n, _ in heads]
    assert len(numbers) == len(set(numbers)), f"duplicated section numbers: {numbers}"
    assert not re.search(r"^#{2,3} (?!\d)(?!attn-yolo)", text, re.MULTILINE), "a section without a number"
    meta = re.compile(r"\| command \| machine \| load \| date \|\n\|---\|---\|---\|---\|\n"
                      r"\| (.+?) \| (.+?) \| (.+?) \| (.+?) \|")

    def named(part: str) -> bool:
        m = meta.search(part)
        return bool(m and all(x.strip() for x in m.groups()))

    for section in re.split(r"^## ", text, flags=re.MULTILINE)[2:]:  # after the title and the machine table
        title, *subs = re.split(r"^### ", section, flags=re.MULTILINE)
        if title.startswith("1. Targets"):
            continue
        assert named(title) or (subs and all(named(s) for s in subs)), f"section {title.splitlines()[0]}: no " \
            "command/machine/load/date table"
    assert "<!-- export-matrix:begin -->" in text


def test_data_synthetic_is_the_cached_dataset(tmp_path, monkeypatch):
    """`attn-yolo train ... data=synthetic` trains on the embedded dataset's cached copy (the one `ablate` uses), so
    README's first training command writes no second copy under Ultralytics' datasets_dir."""
    from attn_yolo import synthetic
    from attn_yolo.cli import synthetic_data

    monkeypatch.setenv("ATTN_YOLO_DATA", str(tmp_path / "cache"))
    for key, value in {"n_train": 4, "n_val": 2, "imgsz": 64}.items():
        monkeypatch.setattr(synthetic, key.upper(), value)
    argv = synthetic_data(["train", "model=yolo11n.yaml", "data=synthetic", "epochs=1"])
    data = Path(argv[2].removeprefix("data="))
    assert argv[:2] == ["train", "model=yolo11n.yaml"] and argv[3] == "epochs=1"
    assert data == synthetic.default_data_yaml() and data.is_file() and tmp_path / "cache" in data.parents
    assert synthetic_data(["train", "data=coco128.yaml"]) == ["train", "data=coco128.yaml"]
