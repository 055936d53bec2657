# tool-refiner for GPU training nodes and Ray clusters, on verl's published vLLM image.
#
# Base: verlai/verl:vllm024.dev2, verl's vLLM 0.24 image (Ubuntu 24.04, CUDA 13.0.2, Python 3.12, torch 2.11.0,
# vLLM 0.24.0, flash-attn 2.8.3 built for that torch; verl itself is not installed in it). On top: verl 0.9.1 and
# this project with the pins of constraints/gpu-verl-0.9.1.txt (verl's own [vllm]/[fsdp] pins), then a check that
# every pinned package has its pinned version. For reproducible builds pin the base by digest:
#   docker buildx imagetools inspect verlai/verl:vllm024.dev2
#   docker build --build-arg BASE_IMAGE=verlai/verl:vllm024.dev2@sha256:<digest> -t tool-refiner:gpu .
#
# One image for every node (README, "GPU nodes"):
#   head:    docker run --gpus all --net=host --shm-size=16g -v /nfs:/nfs tool-refiner:gpu ray start --head --block
#   worker:  docker run --gpus all --net=host --shm-size=16g -v /nfs:/nfs tool-refiner:gpu \
#              ray start --address=HEAD_IP:6379 --block
#   submit:  tool-refiner train --data /nfs/data/paper --profile multinode --ray-address http://HEAD_IP:8265
ARG BASE_IMAGE=verlai/verl:vllm024.dev2
FROM ${BASE_IMAGE}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The image's Python is the system one (Ubuntu 24.04 marks it externally managed); verl's images install into it.
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PYTHONUNBUFFERED=1

WORKDIR /opt/tool-refiner

# Dependencies first (this layer is rebuilt only when the pins or the package metadata change).
COPY constraints/ constraints/
COPY pyproject.toml README.md LICENSE ./
COPY refiner/ refiner/
COPY data_gen/ data_gen/
COPY rewards/ rewards/

# Editable: the CLI finds configs/ next to the package, and Ray jobs ship /opt/tool-refiner as their working dir.
RUN python3 -m pip install --no-cache-dir -c constraints/gpu-verl-0.9.1.txt -e ".[gpu]" \
 && python3 constraints/check_installed.py constraints/gpu-verl-0.9.1.txt \
 && python3 -c "import flash_attn, rewards, vllm, verl; print('tool-refiner on verl', verl.__version__, 'vllm', vllm.__version__)"

COPY configs/ configs/
COPY scripts/ scripts/

# Ray: GCS 6379, dashboard and job submission 8265, client 10001.
EXPOSE 6379 8265 10001

CMD ["bash"]
