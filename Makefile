# mlp.cu: an MLP trainer from scratch in C and CUDA C.
#
#   make run        get the data, build, train (on the GPU when there is one, else on the CPU)
#   make test       build everything and run every test (GPU tests skip themselves without a GPU)
#   make train      the GPU trainer ./train_mlp          make train_cpu   the CPU trainer ./train_mlp_cpu
#   make data       MNIST from its mirrors, or Fashion-MNIST when offline
#   make bench      (GPU) our trainer against PyTorch, one table
#   make clean
#
# Overrides: make GPU_ARCH=90 (the GPU to build for), CC=clang, NVCC=/path/to/nvcc, NO_OMP=1.

CC ?= cc
NVCC ?= nvcc
CFLAGS ?= -O3 -g
CFLAGS += -std=gnu11 -Wall -Wextra -Wno-format-truncation -Wno-unused-function
LDLIBS = -lz -lm
NVCCFLAGS ?= -O3 -lineinfo
PYTHON ?= python3

# ---------------------------------------------------------------------------------------------
# what this machine has: printed as a banner so a failed build says why

# OpenMP: used when the compiler accepts -fopenmp; the omp simd pragmas work even without it
ifeq ($(NO_OMP),1)
  HAVE_OMP :=
else
  HAVE_OMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1)
endif
ifeq ($(HAVE_OMP),1)
  CFLAGS += -fopenmp
  OMP_NOTE := ✓ OpenMP
else
  CFLAGS += -fopenmp-simd
  OMP_NOTE := ✗ OpenMP (single-threaded CPU trainer)
endif

HAVE_ZLIB := $(shell echo '\#include <zlib.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_ZLIB),1)
  ZLIB_NOTE := ✓ zlib
else
  ZLIB_NOTE := ✗ zlib (install zlib1g-dev)
endif

NVCC_PATH := $(shell command -v $(NVCC) 2>/dev/null)
# the GPU's compute capability, e.g. "9.0" -> 90; empty when there is no GPU or no driver
DETECTED_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
ifdef GPU_ARCH
  ARCH_NOTE := sm_$(GPU_ARCH) (from GPU_ARCH)
else ifneq ($(DETECTED_ARCH),)
  GPU_ARCH := $(DETECTED_ARCH)
  ARCH_NOTE := sm_$(GPU_ARCH) (detected)
else
  GPU_ARCH := 90
  ARCH_NOTE := none detected: building for sm_90 (override: make GPU_ARCH=80)
endif
ifeq ($(GPU_ARCH),90)
  # Hopper: the architecture-specific target sm_90a, for the wgmma kernel of kernels/matmul_fast.cuh
  # (-x 1's forward products); code built for it runs on sm_90 GPUs (H100, H200) only
  GENCODE := -gencode arch=compute_90a,code=[sm_90a,compute_90a] -DMF_WGMMA
else
  GENCODE := -gencode arch=compute_$(GPU_ARCH),code=[sm_$(GPU_ARCH),compute_$(GPU_ARCH)]
endif
NVCCFLAGS += $(GENCODE) -Xcompiler "$(filter -fopenmp%,$(CFLAGS)) -Wall -Wno-unused-function -Wno-format-truncation"
ifeq ($(HAVE_OMP),1)
  CUDA_LDLIBS = $(LDLIBS) -lgomp
else
  CUDA_LDLIBS = $(LDLIBS)
endif

ifneq ($(NVCC_PATH),)
  NVCC_NOTE := ✓ nvcc $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  CUDA_TARGETS := $(if $(wildcard train_mlp.cu),train_mlp test_mlp,)
else
  NVCC_NOTE := ✗ nvcc (CPU only: the GPU trainer and test_mlp are not built)
  CUDA_TARGETS :=
endif

ifeq ($(filter clean,$(MAKECMDGOALS)),)
  $(info ---------------------------------------------------------------------)
  $(info mlp.cu build: ✓ $(CC) | $(OMP_NOTE) | $(ZLIB_NOTE) | $(NVCC_NOTE))
  $(info GPU: $(ARCH_NOTE))
  $(info ---------------------------------------------------------------------)
endif

COMMON_H := $(wildcard common/*.h) data/idx.h
KERNELS_H := $(wildcard kernels/*.cuh)
TEST_H := $(wildcard tests/*.h)

.PHONY: all train train_cpu test test_cpu data run bench clean
all: train_cpu $(CUDA_TARGETS)

train_cpu: train_mlp_cpu
train_mlp_cpu: train_mlp_cpu.c $(COMMON_H)
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

train: train_mlp
train_mlp: train_mlp.cu $(COMMON_H) $(KERNELS_H)
ifeq ($(NVCC_PATH),)
	@echo "error: nvcc not found: the GPU trainer needs the CUDA toolkit ---> try: make train_cpu" >&2; exit 1
else
	$(NVCC) $(NVCCFLAGS) $< $(CUDA_LDLIBS) -o $@
endif

test_mlp: test_mlp.cu train_mlp.cu train_mlp_cpu.c $(COMMON_H) $(KERNELS_H) $(TEST_H)
	$(NVCC) $(NVCCFLAGS) $< $(CUDA_LDLIBS) -o $@

tests/bin/test_cpu: tests/test_cpu.c train_mlp_cpu.c $(COMMON_H) $(TEST_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

# the finite-difference check runs the CPU reference in double precision
tests/bin/test_gradcheck: tests/test_gradcheck.c train_mlp_cpu.c $(COMMON_H) $(TEST_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

# Every test binary runs even when an earlier one fails; the target fails if any did.
test: train_mlp_cpu tests/bin/test_gradcheck tests/bin/test_cpu $(CUDA_TARGETS)
	@failed=""; \
	for t in tests/bin/test_gradcheck "tests/bin/test_cpu ./train_mlp_cpu" $(if $(CUDA_TARGETS),./test_mlp,); do \
	  echo; echo "=== $$t"; $$t || failed="$$failed $$t"; \
	done; \
	echo; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed"; exit 1; fi; \
	echo "make test: all test binaries passed"

data:
	@bash data/download_mnist.sh

# train on the GPU when there is one (and nvcc), else on the CPU
run: data
	@if [ -n "$(NVCC_PATH)" ] && nvidia-smi -L >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory train_mlp && ./train_mlp $(ARGS); \
	else \
	  echo "no GPU here: training with the CPU reference trainer"; \
	  $(MAKE) --no-print-directory train_mlp_cpu && ./train_mlp_cpu $(ARGS); \
	fi

bench: train_mlp
	$(PYTHON) dev/bench.py

clean:
	rm -f train_mlp train_mlp_cpu test_mlp
	rm -rf tests/bin
