"""The CPU rehearsal's shims (``tests/support/verl_cpu_shims.py``) load through verl's own hook and only there: a
fresh interpreter with the rehearsal's environment gets the CPU platform and the patches; one without it gets none.
A guard against verl/vLLM changes that costs seconds, not minutes; the whole loop is ``tests/test_train_rehearsal.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.verl, pytest.mark.slow]  # each probe is a fresh interpreter importing verl (5-15 s)

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "tests" / "support"

PROBE = r"""
import importlib.metadata, json, sys
import verl
from verl.plugin.platform import get_platform
from verl.utils.device import get_device_id, get_device_name, get_resource_name, get_torch_device, is_support_ipc
import verl.utils.distributed as dist
def ask(f):
    try:
        return f()
    except Exception as e:
        return "error: " + type(e).__name__
out = {
    "shims_loaded": "verl_cpu_shims" in sys.modules,
    "device": get_device_name(),
    "device_id": ask(lambda: str(get_device_id())),
    "resource": get_resource_name(),
    "ipc": is_support_ipc(),
    "backend": get_platform().communication_backend_name(),
    "gloo_patch": getattr(dist.initialize_global_process_group_ray, "_cpu_shim", False),
    "mem": ask(lambda: list(get_torch_device().mem_get_info())),
    "empty_cache": ask(lambda: get_torch_device().empty_cache()),
}
try:
    out["vllm_version"] = importlib.metadata.version("vllm")
except importlib.metadata.PackageNotFoundError:
    out["vllm_version"] = None
if "--vllm" in sys.argv:
    import vllm.model_executor.layers.utils as vutils
    out["linear_patch"] = getattr(vutils.dispatch_cpu_unquantized_gemm, "_cpu_shim", False)
print("RESULT" + json.dumps(out))
"""


def probe(env: dict[str, str], *args: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_", "REHEARSAL_"))}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(SUPPORT)])
    res = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        check=False,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    line = next(x for x in res.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def test_the_rehearsal_environment_loads_the_cpu_platform():
    pytest.importorskip("verl")
    sys.path.insert(0, str(SUPPORT))
    from cpu_rehearsal import shim_env

    env = {k: v for k, v in shim_env(Path("/nonexistent/probe.jsonl")).items() if k != "PYTHONPATH"}
    out = probe(env)
    assert out["shims_loaded"] and out["device"] == "cpu" and out["device_id"] == "cpu"
    assert out["resource"] == "GPU" and out["ipc"] is False and out["backend"] == "gloo" and out["gloo_patch"]
    assert out["mem"][0] > 0 and out["mem"][1] >= out["mem"][0]
    if out["vllm_version"] is not None:
        assert out["vllm_version"].endswith("+cpu") or "cpu" not in out["vllm_version"]


def test_without_the_rehearsal_environment_nothing_is_patched():
    pytest.importorskip("verl")
    out = probe({})
    assert not out["shims_loaded"] and not out["gloo_patch"] and out["device"] != "cpu"


@pytest.mark.vllm
def test_vllm_cpu_linear_layers_keep_their_weights_under_the_shims():
    pytest.importorskip("vllm")
    sys.path.insert(0, str(SUPPORT))
    from cpu_rehearsal import shim_env

    env = {k: v for k, v in shim_env(Path("/nonexistent/probe.jsonl")).items() if k != "PYTHONPATH"}
    assert probe(env, "--vllm")["linear_patch"] is True
    assert probe({**env, "VERL_CPU_SHIMS_SKIP": "keep_cpu_linear_weights"}, "--vllm")["linear_patch"] is False
