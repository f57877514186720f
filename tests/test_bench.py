"""Tests of the benchmark's own logic (no timing assertions): faithfulness vs timm, kernel detection, peak memory,
the out-of-memory guard, argument parsing, and a tiny smoke run of every section."""

import math
import resource
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attn_yolo import CBAM, ECA, MHSA, SAM, SE
from attn_yolo.args import UsageError
from attn_yolo.bench import blocks, main, parse_args
from attn_yolo.bench.attention import bench_attention_case, run_attention_case
from attn_yolo.bench.common import (
    SMOKE_TABLE_TAG,
    SMOKE_WARNING,
    PeakMemory,
    Section,
    attention_kernel,
    interleaved_times,
    median_ci,
    paired_ratio,
    profile_kernel,
)
from attn_yolo.bench.gpu import sdpa_backend_rows
from attn_yolo.bench.timm_compare import timm_twin

pytest.importorskip("timm")


def _randomise(m: nn.Module) -> nn.Module:
    torch.manual_seed(0)
    for p in m.parameters():  # biases too: a twin that drops a bias must fail
        nn.init.normal_(p, std=0.2)
    return m.eval()


@pytest.mark.parametrize("cls", [SE, ECA, CBAM])
@pytest.mark.parametrize("shape", [(1, 64, 20, 20), (2, 256, 10, 10), (1, 48, 7, 9)])
def test_timm_twin_is_faithful(cls, shape):
    ours = _randomise(cls(shape[1]))
    twin = timm_twin(ours)
    x = torch.randn(shape)  # unit scale, as in the bench: 1e-6 is ~2 ulp of float32 at |y| < 8
    with torch.no_grad():
        a, b = ours(x), twin(x)
    assert (a - b).abs().max().item() <= 1e-6
    assert (a - x).abs().max().item() > 1e-2  # the block does something, so equality is not vacuous


@pytest.mark.parametrize("cls", [SE, ECA, CBAM])
def test_timm_twin_detects_a_different_weight(cls):
    ours = _randomise(cls(64))
    twin = timm_twin(ours)
    with torch.no_grad():
        next(ours.parameters()).add_(0.1)  # perturb ours after copying: the comparison must see it
        x = torch.randn(2, 64, 8, 8)
        assert (ours(x) - twin(x)).abs().max().item() > 1e-4


def test_timm_twin_copies_cbam_spatial_bias_through_bn():
    ours = _randomise(CBAM(64))
    twin = timm_twin(ours)
    bn = twin.spatial.conv.bn
    assert bn.bias.item() == ours.spatial.conv.bias.item() and bn.eps == 0.0
    assert twin.channel.fc1.bias is not None  # mlp_bias=True, as ours


def test_timm_twin_rejects_what_timm_lacks():
    with pytest.raises(TypeError, match="no timm equivalent"):
        timm_twin(SAM(64))
    with pytest.raises(TypeError, match="residual gate"):
        timm_twin(SE(64, init_values=0.0))


def test_attention_kernel_names():
    cpu = "aten::_scaled_dot_product_flash_attention_for_cpu"
    assert attention_kernel([cpu, "aten::scaled_dot_product_attention"]) == "flash (CPU)"
    assert attention_kernel([cpu, cpu + "_backward"]) == "flash (CPU); bwd: flash (CPU)"
    assert attention_kernel(["aten::_scaled_dot_product_attention_math", "aten::softmax", "aten::bmm"]) == "math"
    assert attention_kernel(["aten::_scaled_dot_product_efficient_attention"]) == "memory-efficient"
    assert attention_kernel(["aten::_scaled_dot_product_flash_attention"]) == "flash"
    assert attention_kernel(["aten::_scaled_dot_product_cudnn_attention"]) == "cuDNN"
    assert attention_kernel(["aten::matmul", "aten::softmax"]) == "explicit (matmul + softmax)"
    assert attention_kernel(["aten::conv2d"]) == "none"


def test_profile_kernel_sees_what_ran():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(1, 4, 64, 32) for _ in range(3))
    assert profile_kernel(lambda: F.scaled_dot_product_attention(q, k, v)) == "flash (CPU)"

    def forced_math():
        with sdpa_kernel(SDPBackend.MATH):
            F.scaled_dot_product_attention(q, k, v)

    assert profile_kernel(forced_math) == "math"  # a fallback to the math kernel is visible
    m = MHSA(128, heads=4).eval()
    m.fused = False
    assert profile_kernel(lambda: m.attend(q, k, v)) == "explicit (matmul + softmax)"


def test_peak_memory_sees_a_transient_allocation():
    mem = PeakMemory()
    mem.start()
    x = torch.ones(16 * 2**20)  # 64 MiB, touched
    del x
    peak = mem.peak_mib()
    assert 60 <= peak <= 64 + 32
    mem.start()  # restarted: the earlier peak no longer counts
    assert mem.peak_mib() < 16


def test_attention_case_memory_matches_the_score_matrix():
    """Explicit attention must show its h·N² score and softmax matrices; the fused kernel must not."""
    n, h = 1024, 4
    scores_mib = h * n * n * 4 / 2**20  # 16 MiB per (B, h, N, N) fp32 matrix
    fused = run_attention_case("sdpa", n, passes=("fwd",), repeats=1, threads=2)
    assert fused["fwd"]["kernel"] == "flash (CPU)" and fused["fwd"]["repeats"] == 1
    assert fused["fwd"]["peak_mib"] < scores_mib / 2
    explicit = bench_attention_case(dict(kind="explicit", n=n, passes=("fwd",), repeats=1, threads=2))  # subprocess
    assert explicit["fwd"]["kernel"] == "explicit (matmul + softmax)"
    assert 2 * scores_mib * 0.9 <= explicit["fwd"]["peak_mib"] <= 3 * scores_mib + 16


def test_attention_case_out_of_memory_is_reported_not_raised():
    before = resource.getrlimit(resource.RLIMIT_AS)
    r = run_attention_case("explicit", 4096, repeats=1, threads=2, mem_limit_bytes=64 * 2**20)  # scores: 256 MiB
    assert r["fwd"]["error"].startswith("out of memory (tried to allocate 0.25 GiB")
    assert r["fwdbwd"]["error"] == "not run (fwd failed)"
    assert resource.getrlimit(resource.RLIMIT_AS) == before


def test_attention_case_repeats_fall_back_to_budget():
    r = run_attention_case("sdpa", 64, passes=("fwd",), repeats=50, case_budget_s=1e-9, threads=1)
    assert r["fwd"]["repeats"] == 3  # MIN_REPEATS when one run exceeds the budget share


def test_interleaved_times_round_robin():
    calls = []
    fns = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    t = interleaved_times(fns, rounds=4, warmup=2)
    assert {k: len(v) for k, v in t.items()} == {"a": 4, "b": 4, "c": 4}
    assert len(calls) == 18 and calls[:3] == ["a", "b", "c"] and calls[3:6] == ["b", "c", "a"]
    assert paired_ratio([2.0, 4.0, 9.0], [1.0, 2.0, 3.0]) == 2.0


def test_median_ci_is_the_order_statistic_interval():
    """For n = 20 the distribution-free 95% interval of the median is [x(6), x(15)] (binomial(20, 1/2): P(X ≤ 5) =
    0.0207, P(X ≤ 6) = 0.0577), whatever the values' spread; too few values give NaN, not a fake interval."""
    from scipy.stats import binom

    assert binom.cdf(5, 20, 0.5) < 0.025 < binom.cdf(6, 20, 0.5)
    vals = [float(v) ** 2 for v in range(20, 0, -1)]  # unsorted, uneven spacing
    assert median_ci(vals) == (36.0, 225.0)  # the 6th and 15th smallest
    lo, hi = median_ci([1.0, 2.0, 3.0])
    assert math.isnan(lo) and math.isnan(hi)


class Sleeper(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        self.s = s

    def forward(self, x):
        import time

        time.sleep(self.s)
        return x


def test_block_clock_times_only_the_attention_blocks(monkeypatch):
    """``BlockClock`` sums the time inside the outermost registry blocks of a model (one SE at the top level, one
    CBAM inside a container), not the layers around them, and records one entry per forward."""
    se, cbam = SE(32), CBAM(32)
    monkeypatch.setattr(SE, "forward", lambda self, x: Sleeper(0.03)(x))
    model = nn.Sequential(Sleeper(0.05), se, nn.Sequential(nn.Identity(), cbam))
    assert blocks.attention_modules(model) == [se, cbam]  # CBAM's own gates are inside it, not counted again
    clock = blocks.BlockClock(model, torch.zeros(1, 32, 4, 4))
    clock.run()
    clock.run()
    assert len(clock.seconds) == 2
    # the SE's sleep and CBAM, never the 0.05 s layer (that would read >= 0.08 s)
    assert all(0.03 <= t < 0.07 for t in clock.seconds), clock.seconds


def test_parse_args_presets_and_errors():
    full, quick = parse_args([]), parse_args(["quick=True"])
    assert full["tokens"] == (400, 1600, 6400, 25600) and full["repeats"] >= 10 and full["out"] == "BENCHMARKS.md"
    assert quick["out"] == "" and quick["repeats"] < full["repeats"] and full["threads"] >= 1
    assert parse_args(["tokens=1600,6400", "sections=attention"])["tokens"] == (1600, 6400)
    with pytest.raises(UsageError, match="perfect square"):
        parse_args(["tokens=1000"])
    with pytest.raises(UsageError, match="; expected a comma-separated list of attention"):
        parse_args(["sections=attention,speed"])
    with pytest.raises(UsageError, match="multiple of 32"):
        parse_args(["imgsz=100"])
    with pytest.raises(UsageError, match="unknown key"):
        parse_args(["token=64"])


def test_export_cache_key_covers_block_sources(tmp_path, monkeypatch):
    """The ONNX export cache key hashes conventions.py, registry.py, the seam ultralytics_api/ and the files of
    attn_yolo/nn: editing a block invalidates cached exports."""
    files = blocks.block_sources()
    assert all(f.is_file() for f in files)
    assert {"conventions.py", "registry.py", "se.py", "cbam.py", "mhsa.py", "layer_scale.py"} <= {f.name for f in files}
    assert blocks.PACKAGE / "ultralytics_api" / "__init__.py" in files
    key = blocks._cache_key("yolo11n-eca.yaml", 64)
    assert key == blocks._cache_key("yolo11n-eca.yaml", 64) != blocks._cache_key("yolo11n-eca.yaml", 96)
    assert key != blocks._cache_key("yolo11n-se.yaml", 64)
    edited = tmp_path / "se.py"
    edited.write_text("# an edited block\n")
    monkeypatch.setattr(blocks, "block_sources", lambda: [*files, edited])
    assert blocks._cache_key("yolo11n-eca.yaml", 64) != key


def test_export_cache_says_where_it_writes(tmp_path, monkeypatch, capsys):
    """A new ONNX export names the cache folder and how to clear it; a cached one is reused silently."""
    import attn_yolo.export

    def fake_export(model, imgsz):  # the exporter writes into the working directory
        Path("m.onnx").write_bytes(b"onnx")
        return "m.onnx"

    monkeypatch.setattr(attn_yolo.export, "export_onnx", fake_export)
    monkeypatch.setattr(blocks, "build_detector", lambda yaml: None)
    cache = tmp_path / "cache"
    yamls = {"eca": "yolo11n-eca.yaml", "se": "yolo11n-se.yaml"}
    files = blocks.exports_cached(blocks.export_onnx_cached, yamls, 64, cache, "ONNX")
    f = files["eca"]
    assert f.parent == cache and f.read_bytes() == b"onnx"
    out = capsys.readouterr().out  # one line for every export made, none per model
    assert out.splitlines() == [f"attn-yolo bench: 2 ONNX export(s) made and cached in {cache} (reused by later runs; "
                                "delete the folder to clear, or set cache=)"]
    assert blocks.exports_cached(blocks.export_onnx_cached, yamls, 64, cache, "ONNX") == files
    assert capsys.readouterr().out == ""


def test_openvino_column_times_cached_exports(tmp_path, capsys):
    """Section 2's OpenVINO column: each model exported once (cached), compiled, timed round-robin."""
    pytest.importorskip("openvino")
    import yaml

    from attn_yolo.export.matrix import tiny_yaml

    yamls = {}
    for name in ("SE", "CBAM"):
        yamls[name] = str(tmp_path / f"tiny-{name}.yaml")
        Path(yamls[name]).write_text(yaml.safe_dump(tiny_yaml(name)))
    times, note = blocks._openvino_times(yamls, 64, 1, 2, tmp_path / "cache")
    assert set(times) == {"SE", "CBAM"} and all(len(t) == 2 and min(t) > 0 for t in times.values())
    assert "OpenVINO" in note and "inference precision f32" in note
    assert "2 OpenVINO export(s) made and cached in" in capsys.readouterr().out
    assert len(list((tmp_path / "cache").glob("*_openvino_model/*.xml"))) == 2
    blocks._openvino_times(yamls, 64, 1, 1, tmp_path / "cache")
    assert "export(s) made" not in capsys.readouterr().out  # reused


def test_every_variant_has_its_model_yaml():
    assert list(blocks.detector_yamls(blocks.VARIANTS)) == ["baseline", *blocks.VARIANTS]
    with pytest.raises(UsageError, match="variant 'nope'"):
        blocks.detector_yamls(["nope"])


def test_sdpa_backend_rows_on_cpu():
    """The GPU section's code path, run on CPU: forced flash and math run; memory-efficient has no CPU kernel."""
    rows = sdpa_backend_rows("cpu", (64,), dtypes=("bfloat16",), repeats=1, passes=("fwd",))
    by = {r[2]: r for r in rows}
    assert by["MHSA fused, forced flash"][4] == "flash (CPU)"
    assert by["MHSA fused, forced math"][4] == "math"
    assert by["MHSA fused, forced memory-efficient"][5].startswith("unavailable")
    assert by["Ultralytics Attention"][4] == "explicit (matmul + softmax)"
    assert not math.isnan(float(by["MHSA fused, forced flash"][5]))


def test_smoke_run_writes_report(tmp_path, capsys, monkeypatch):
    import attn_yolo.progress

    out = tmp_path / "BENCHMARKS.md"
    argv = ["quick=True", "sections=attention,blocks,timm,train,gpu", "tokens=64", "variants=eca", "repeats=1",
            "rounds=1", "imgsz=64", "onnx=False", "openvino=False", "isolate=False", "threads=2", f"out={out}"]
    monkeypatch.setattr(attn_yolo.progress, "is_terminal", lambda stream: True)  # stderr as a terminal: the bars
    assert main(argv) == 0
    cap = capsys.readouterr()
    assert "bench attention" in cap.err and "bench blocks: building" in cap.err and "case" in cap.err
    text = out.read_text()
    for heading in ("# attn-yolo benchmarks", "## Targets", "## 1. Attention kernel", "## 2. Block overhead",
                    "## 3. Reference implementations", "## 4. Training throughput", "## 5. GPU"):
        assert heading in text
    assert "| torch |" in text and "| Ultralytics |" in text and "2 intra-op threads" in text
    assert "flash (CPU)" in text and "QUICK" in text
    assert "| eca |" in text and "| baseline |" in text
    if not torch.cuda.is_available():
        assert "Skipped: no CUDA device" in text
    printed = cap.out
    # the terminal: a short table with units, one row per section (its cases and seconds), not the tables
    assert "## 1. Attention kernel" not in printed and len(printed.splitlines()) <= 20, printed
    head = "| section | cases (table rows) | wall time (s) | note |"
    table = printed[printed.index(head):].split("\n\n")[0].splitlines()
    assert [r.split(" | ")[0] for r in table[2:]] == ["| 1. Attention kernel", "| 2. Block overhead on yolo11n at 64 "
                                                      "(batch 1)", "| 3. Reference implementations", "| 4. Training "
                                                      "throughput at 64 (batch 2)", "| 5. GPU", "| total"]
    assert all(float(r.split(" | ")[2].rstrip(" |")) >= 0 for r in table[2:]) and f"the tables: {out}" in printed
    if not torch.cuda.is_available():  # a section without cases says why
        assert table[-2].startswith("| 5. GPU | 0 |") and "Skipped: no CUDA device on this machine |" in table[-2]
    # every table written carries the smoke-run mark; the report says so at its top
    for doc in (text,):
        lines = doc.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith("|") and not lines[i - 1].startswith("|")]
        tables = [i for i in starts if not lines[i].startswith("| machine / software")]  # its `mode` row says QUICK
        assert len(tables) >= 5 and all(lines[i - 2] == SMOKE_TABLE_TAG for i in tables), doc
    assert text.splitlines()[2] == SMOKE_WARNING and printed.count(SMOKE_WARNING.strip("*")) >= 1


def test_full_run_sections_are_not_marked():
    s = Section("2. Block overhead", body=["text", "", "| a |\n|---|\n| 1 |"])
    assert SMOKE_TABLE_TAG not in s.markdown() and "SMOKE" not in s.markdown()
    s.smoke = True
    assert s.markdown().count(SMOKE_TABLE_TAG) == 1 and SMOKE_WARNING in s.markdown()


@pytest.mark.slow
def test_blocks_section_with_onnx(tmp_path):
    out = tmp_path / "B.md"
    argv = ["quick=True", "sections=blocks", "variants=eca", "rounds=1", "imgsz=64", f"cache={tmp_path}", f"out={out}"]
    assert main(argv) == 0
    assert "onnxruntime" in out.read_text() and list(tmp_path.glob("yolo11n-eca-64-*.onnx"))


def test_a_run_into_a_curated_page_replaces_only_its_sections_regions(tmp_path):
    """BENCHMARKS.md keeps one current table per topic: a bench run replaces the regions of the sections it ran
    (between ``<!-- bench:<name>:begin/end -->``), opening each with its command, date, machine and load, and keeps
    the page's headings, the other regions and every line outside them."""
    from attn_yolo.bench.report import region_markers

    page = tmp_path / "BENCHMARKS.md"
    ab, ae = region_markers("attention")
    tb, te = region_markers("timm")
    page.write_text(f"# curated\n\nintro kept\n\n## 2. Attention\n\n{ab}\nold attention table\n{ae}\n\nnote kept\n\n"
                    f"## 4. timm\n\n{tb}\nold timm table\n{te}\n")
    argv = ["quick=True", "sections=attention", "tokens=64", "repeats=1", "rounds=1", "threads=2", f"out={page}"]
    assert main(argv) == 0
    text = page.read_text()
    assert "intro kept" in text and "note kept" in text and "## 2. Attention" in text
    assert "old attention table" not in text and "old timm table" in text
    region = text[text.index(ab):text.index(ae)]
    assert "Produced by `attn-yolo bench sections=attention quick=True" in region and "load average" in region
    assert "## 1. Attention kernel" not in text  # the section's own heading is not repeated inside the page's
    assert text.count(ab) == 1 and text.count(ae) == 1
