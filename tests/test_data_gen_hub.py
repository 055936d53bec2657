"""Hub sources that cannot be read here (gated, missing, no Hub copy) stop a build before any work, saying what to do.

No Hub here: the Hub's HTTP answers are played by an ``httpx`` mock transport installed with
``huggingface_hub.set_client_factory``, so ``huggingface_hub`` and ``datasets`` raise exactly what they raise for
those answers (``GatedRepoError``, ``RepositoryNotFoundError``, ``DatasetNotFoundError``), through their own code.
The answers follow the Hub's: 401 + ``X-Error-Code: GatedRepo`` for a gated dataset asked without a token, 403 for a
token whose account was not granted access, 401 + ``RepoNotFound`` for a dataset that does not exist.
"""

from __future__ import annotations

import json
import socket

import pytest
from conftest import ROOT, shared_path

from data_gen import sources
from data_gen.builder import build
from data_gen.config import load_config
from data_gen.sources import SourceUnavailable, base

hf = pytest.importorskip("huggingface_hub")
hf_http = pytest.importorskip("huggingface_hub.utils._http")

XLAM = "Salesforce/xlam-function-calling-60k"
# the HTTP client huggingface_hub itself uses: httpx2 (an httpx fork) in huggingface_hub 2.x, httpx in 1.x
HTTPX = getattr(hf_http, "httpx2", None) or getattr(hf_http, "httpx", None)
if HTTPX is None or not hasattr(hf, "set_client_factory"):
    pytest.skip("this huggingface_hub has no httpx client factory to play the Hub with", allow_module_level=True)


class FakeHub:
    """Answers ``/api/datasets/<id>/auth-check`` and file requests per dataset: ``public`` | ``gated`` | ``missing``."""

    def __init__(self, datasets: dict[str, str]) -> None:
        self.datasets = datasets
        self.requests: list[str] = []

    def handler(self, request):
        url = str(request.url)
        self.requests.append(url)
        path = request.url.path
        repo = next((d for d in self.datasets if f"/datasets/{d}/" in path or path.endswith(f"/datasets/{d}")), None)
        state = self.datasets.get(repo, "missing")
        token = request.headers.get("authorization")
        if state == "gated":
            status = 403 if token else 401
            return HTTPX.Response(status, request=request, headers={"X-Error-Code": "GatedRepo",
                                                                    "X-Error-Message": "Access restricted"})
        if state == "missing":
            return HTTPX.Response(401, request=request, headers={"X-Error-Code": "RepoNotFound"})
        if path.endswith("/auth-check"):
            return HTTPX.Response(200, request=request, json={})
        # any data request for a public dataset: refused here, so that a test sees when work started
        return HTTPX.Response(500, request=request, text="no downloads in this test")

    def downloads(self) -> list[str]:
        return [u for u in self.requests if not u.endswith("/auth-check")]


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    def install(datasets: dict[str, str], token: str | None = None) -> FakeHub:
        hub = FakeHub(datasets)
        hf.set_client_factory(lambda: HTTPX.Client(transport=HTTPX.MockTransport(hub.handler), follow_redirects=True))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
        if token:
            monkeypatch.setenv("HF_TOKEN", token)
        else:
            monkeypatch.delenv("HF_TOKEN", raising=False)
        monkeypatch.setattr(hf.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds_cache"))
        # the reachability probe is a TCP connect to huggingface.co: answer it at the socket boundary
        monkeypatch.setattr(base, "_HUB_OK", None)
        monkeypatch.setattr(socket, "create_connection", lambda *a, **kw: _Conn())
        return hub

    yield install
    hf.set_client_factory(hf_http.default_client_factory)


class _Conn:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_gated_dataset_without_token_says_token_and_terms(fake_hub):
    fake_hub({XLAM: "gated"})
    with pytest.raises(SourceUnavailable) as e:
        sources.check("xlam")
    msg = str(e.value)
    assert "gated" in msg and "no token was sent" in msg and "HF_TOKEN" in msg and "hf auth login" in msg
    assert f"https://huggingface.co/datasets/{XLAM}" in msg and "--source-path xlam=PATH" in msg


def test_gated_dataset_with_a_token_without_access_says_accept_the_terms(fake_hub):
    fake_hub({XLAM: "gated"}, token="hf_" + "x" * 34)
    with pytest.raises(SourceUnavailable) as e:
        sources.load("xlam", progress=False)
    msg = str(e.value)
    assert "no access" in msg and "accept its terms" in msg and f"https://huggingface.co/datasets/{XLAM}" in msg
    assert "--source-path xlam=PATH" in msg


def test_missing_dataset_says_check_the_id(fake_hub):
    hub = fake_hub({})
    with pytest.raises(SourceUnavailable) as e:
        base.check_hub_access("toolace", "Team-ACE/no-such-dataset")
    msg = str(e.value)
    assert "'Team-ACE/no-such-dataset' was not found" in msg and "Check the id" in msg and "--source-path" in msg
    assert hub.requests and all(u.endswith("/auth-check") for u in hub.requests)


def test_datasets_gated_error_after_the_check_is_explained(fake_hub, monkeypatch):
    """The access check passes but ``datasets`` is refused a file (its own DatasetNotFoundError for a gated repo)."""
    import datasets

    fake_hub({XLAM: "public"}, token="hf_" + "y" * 34)
    real = datasets.load_dataset

    def load_gated(path, **kw):  # the same failure datasets raises when the Hub answers 403 GatedRepo for a file
        hf.set_client_factory(lambda: HTTPX.Client(
            transport=HTTPX.MockTransport(FakeHub({XLAM: "gated"}).handler), follow_redirects=True))
        return real(path, **kw)

    monkeypatch.setattr(datasets, "load_dataset", load_gated)
    with pytest.raises(SourceUnavailable) as e:
        sources.load("xlam", progress=False)
    msg = str(e.value)
    assert "gated" in msg and "accept its terms" in msg and "--source-path xlam=PATH" in msg


def test_paper_mix_stops_before_any_work_when_a_source_is_gated(fake_hub, tmp_path):
    """paper.yaml with NesTools given as the README shows and the Hub sources checked first: xLAM is gated, so the
    build stops before reading or downloading anything, naming what to do."""
    hub = fake_hub({"glaiveai/glaive-function-calling-v2": "public", "Team-ACE/ToolACE": "public", XLAM: "gated"})
    cfg = load_config(ROOT / "configs" / "data" / "paper.yaml")
    out = tmp_path / "paper"
    with pytest.raises(SourceUnavailable) as e:
        build(cfg, out, source_paths={"nestools": str(shared_path("nestools", "test_data.jsonl"))}, progress=False)
    msg = str(e.value)
    assert "1 source(s) unavailable" in msg and "xlam" in msg and "HF_TOKEN" in msg and "terms" in msg
    assert hub.downloads() == [], "no data was requested before the check failed"
    assert not list(out.glob("*.parquet")) and not (out / "manifest.json").exists()


def test_paper_mix_without_nestools_path_says_where_nestools_is(fake_hub, tmp_path):
    hub = fake_hub({"glaiveai/glaive-function-calling-v2": "public", "Team-ACE/ToolACE": "public", XLAM: "public"})
    cfg = load_config(ROOT / "configs" / "data" / "paper.yaml")
    with pytest.raises(SourceUnavailable) as e:
        build(cfg, tmp_path / "paper", progress=False)
    msg = str(e.value)
    assert "'nestools' has no Hub dataset" in msg and "github.com/hhan1018/NesTools" in msg
    assert "--source-path nestools=PATH" in msg and hub.downloads() == []


def test_manifest_reports_every_source_read_and_skipped(tmp_path):
    """A build from the real local rows: the manifest says per source where it was read, how many records were
    read and kept, and how many were skipped per reason, with the deliberate filters explained."""
    cfg = load_config(ROOT / "configs" / "data" / "smoke.yaml", sources={
        "glaive": {"path": str(shared_path("glaive_raw"))},
        "toolace": {"path": str(shared_path("toolace_real"))},
        "xlam": {"path": str(shared_path("xlam_real"))},
        "nestools": {"path": str(shared_path("nestools", "test_data.jsonl")), "limit": 40},
    })
    cfg["types"]["erroneous"]["sources"] = ["glaive", "toolace", "xlam"]
    cfg["types"]["correct"]["sources"] = ["glaive", "toolace", "xlam"]
    report = build(cfg, tmp_path, progress=False)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    per = manifest["sources"]
    assert set(per) == {"glaive", "toolace", "xlam", "nestools"}
    for name, info in per.items():
        assert info["origin"] and info["read"] == info["kept"] + info["skipped"], name
        assert info["skipped"] == sum(info["skipped_by_reason"].values())
    assert per["toolace"]["read"] == 890 and per["xlam"]["read"] == 22 and per["glaive"]["read"] == 6
    assert per["nestools"]["kept"] == 40  # the configured limit: reading stops there
    toolace_info = per["toolace"]
    assert toolace_info["filters"] and all(r in toolace_info["skipped_by_reason"] for r in toolace_info["filters"])
    text = report.sources_text()
    for name in per:
        assert f"{name}: read {per[name]['read']} records from {per[name]['origin']}" in text
    assert "filter: the paper's filter" in text
