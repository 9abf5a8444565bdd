"""What midtrace installs: import names of its own only, and an SDK an app can take alone."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = {"midtrace": "midtrace", "collector": "midtrace.collector",
                  "dashboard": "midtrace.dashboard", "sample_traces": "midtrace.sample_traces",
                  "schemas": "midtrace.schemas", "schemas/sql": "midtrace.sql"}
OLD_IMPORT = re.compile(r"^\s*(from|import)\s+(schemas|collector|dashboard|sample_traces)\b", re.M)
HEAVY = {"duckdb", "streamlit", "grpcio", "protobuf", "pyarrow", "pandas", "plotly", "starlette",
         "uvicorn", "opentelemetry-proto", "midtrace"}


def uv() -> list[str]:
    """uv, which `./dev` installs beside the interpreter that made the venv."""
    for command in ([shutil.which("uv")] if shutil.which("uv") else []) + [
            ["python3", "-m", "uv"], [sys.executable, "-m", "uv"]]:
        argv = command if isinstance(command, list) else [command]
        if subprocess.run([*argv, "--version"], capture_output=True).returncode == 0:
            return argv
    raise AssertionError("uv is not installed; ./dev installs it")


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{argv}:\n{done.stdout}\n{done.stderr}"
    return done


def declared_packages() -> set[str]:
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    sdk = tomllib.loads((ROOT / "schemas" / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(root) | set(sdk["packages"])


def test_no_module_imports_a_top_level_name_midtrace_does_not_install() -> None:
    offenders = []
    for folder in (*SOURCE_FOLDERS, "tests", "bench", "scripts"):
        for path in (ROOT / folder).rglob("*.py"):
            for match in OLD_IMPORT.finditer(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}: {match.group(0).strip()}")
    assert not offenders, "import these as midtrace.<name>: " + "; ".join(offenders)


def test_every_source_folder_is_a_declared_package() -> None:
    found = set()
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            # the package of the deepest mapped folder holding the file
            home = max((f for f in SOURCE_FOLDERS if path.is_relative_to(ROOT / f)), key=len)
            parts = path.parent.relative_to(ROOT / home).parts
            if "build" not in parts and "__pycache__" not in parts:
                found.add(".".join((SOURCE_FOLDERS[home], *parts)))
    assert found <= declared_packages(), f"not in any pyproject.toml: {found - declared_packages()}"
    assert not (ROOT / "midtrace" / "__init__.py").exists(), \
        "midtrace is a namespace package shared by two distributions"


def test_the_sdk_installs_alone_and_works_beside_an_apps_own_schemas(tmp_path: Path) -> None:
    source = tmp_path / "sdk-source"
    shutil.copytree(ROOT / "schemas", source,
                    ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    run([*uv(), "venv", "--quiet", "--python", sys.executable, str(venv)])
    python = str(venv / "bin" / "python")
    run([*uv(), "pip", "install", "--quiet", "--python", python, str(source),
         f"opentelemetry-sdk=={version('opentelemetry-sdk')}",
         f"opentelemetry-api=={version('opentelemetry-api')}"])
    installed = {line.split("==")[0].lower() for line in
                 run([*uv(), "pip", "freeze", "--python", python]).stdout.split()}
    assert "midtrace-sdk" in installed and not installed & HEAVY, installed

    app = tmp_path / "app"
    (app / "schemas").mkdir(parents=True)
    (app / "schemas" / "__init__.py").write_text("OWNER = 'the app'\n")
    (app / "main.py").write_text('''
import importlib, importlib.metadata, json
OWNER = importlib.import_module("schemas").OWNER  # the app's own package of that name
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from midtrace.schemas import packing
from midtrace.schemas.encode import record_request
from midtrace.schemas.model import Chunk, Placement, RagRecord

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
packed = packing.pack("edge", ["a", "b", "c"])
with provider.get_tracer("app").start_as_current_span("answer") as span:
    record_request(span, RagRecord(question="q", strategy=packed.strategy,
                                   chunks=(Chunk("a", retrieval_rank=1),),
                                   placements=(Placement("a", prompt_index=0),)))
try:
    import midtrace.collector
    collector = "importable"
except ModuleNotFoundError:
    collector = "absent"
print(json.dumps({"app_schemas": OWNER, "collector": collector,
                  "requires": importlib.metadata.requires("midtrace-sdk"),
                  "attributes": dict(exporter.get_finished_spans()[0].attributes)}))
''')
    out = json.loads(run([python, "main.py"], cwd=app).stdout)
    assert out["app_schemas"] == "the app"
    assert out["collector"] == "absent"
    assert [r.split(">")[0].split("=")[0] for r in out["requires"]] == ["opentelemetry-api"]
    assert out["attributes"]["midtrace.chunk.ids"] == ["a"]
    assert out["attributes"]["midtrace.packing.strategy"] == "edge"


def test_the_wheels_install_only_names_under_midtrace_and_carry_their_data(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a build writes build/ folders; keep them out of the checkout
    for name in run(["git", "ls-files", "-z"], cwd=ROOT).stdout.split("\0"):
        if name and (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    run([*uv(), "build", "--quiet", "--all-packages", "--wheel", "--out-dir", str(tmp_path)],
        cwd=source)
    wheels = {w.name.split("-")[0]: zipfile.ZipFile(w).namelist() for w in tmp_path.glob("*.whl")}
    assert set(wheels) == {"midtrace", "midtrace_sdk"}
    for name, files in wheels.items():
        tops = {f.split("/")[0] for f in files if ".dist-info/" not in f}
        assert tops == {"midtrace"}, (name, tops)
        assert "midtrace/__init__.py" not in files
    main, sdk = set(wheels["midtrace"]), set(wheels["midtrace_sdk"])
    assert {"midtrace/cli.py", "midtrace/collector/receive/http.py", "midtrace/dashboard/app.py",
            "midtrace/dashboard/app_pages/inspector.py", "midtrace/sample_traces/manifest.json",
            "midtrace/sample_traces/support_outcomes.json",
            "midtrace/sample_traces/langchain_rag.jsonl",
            "midtrace/sample_traces/llamaindex_rag.jsonl",
            "midtrace/sample_traces/haystack_rag.jsonl",
            "midtrace/sample_traces/dspy_rag.jsonl",
            "midtrace/sample_traces/agents_rag.jsonl", "midtrace/sql/sqlfiles.py",
            "midtrace/collector/query/reads.py", "midtrace/sql/parts/filters.sql",
            "midtrace/sql/views/31_accuracy_by_band.sql",
            "midtrace/sql/migrations/001_core.sql"} <= main
    assert any(f.startswith("midtrace/sample_traces/") and f.endswith(".jsonl.gz") for f in main)
    # the OTLP reader in C, compiled by the build (collector/intake/_otlp_wire.c)
    assert any(re.fullmatch(r"midtrace/collector/intake/_otlp_wire\..*\.so", f) for f in main)
    assert {"midtrace/schemas/encode.py", "midtrace/schemas/packing.py",
            "midtrace/schemas/py.typed"} <= sdk
    assert not any("/sql/" in f or f.endswith(".sql") for f in sdk)  # the store's, not the app's
    assert not any(f.startswith("midtrace/schemas/") for f in main)
