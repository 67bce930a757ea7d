# mlp.cu: an MLP trainer from scratch in C and CUDA C.
#
#   make run         get the data, build, train (on the GPU when there is one, else on the CPU)
#   make test        build everything and run every test (GPU tests skip themselves without a GPU)
#   make train       the readable GPU trainer ./train_mlp     make train_cpu   the CPU trainer ./train_mlp_cpu
#   make train_fast  the fast GPU trainer ./train_mlp_fast
#   make data        MNIST from its mirrors, or Fashion-MNIST when offline (DATASET=cifar10: CIFAR-10)
#   make bench       (GPU) the fast trainer against PyTorch, one table
#   make sanitize    (GPU) compute-sanitizer's four tools on test_mlp and both GPU trainers
#   make fuzz        the libFuzzer targets of the data readers, checkpoints and flags (clang)
#   make mutate      mutation testing: each CPU mutant in a copy of the tree against the CPU tests
#                    (dev/mutate/README.md; the GPU half: bash dev/mutate/gpu_visit.sh OUTDIR)
#   make clean
#
# Overrides: make GPU_ARCH=90 (the GPU to build for), NVCC=none (a CPU-only build: no CUDA
# targets), CC=clang, NVCC=/path/to/nvcc, NO_OMP=1, CFLAGS=... (added to the flags the build
# needs, never replacing them), NCCL_HOME=DIR (where NCCL is; NCCL_HOME=none: build without it).

CC ?= cc
NVCC ?= nvcc
CFLAGS ?= -O3 -g
override CFLAGS += -std=gnu11 -Wall -Wextra -Wno-format-truncation -Wno-unused-function
LDLIBS = -lz -lm
NVCCFLAGS ?= -O3 -lineinfo
PYTHON ?= python3
# the independent builds (the CUDA objects above all) run in parallel
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)

# ---------------------------------------------------------------------------------------------
# what this machine has: printed as a banner so a failed build says why

# OpenMP: used when the compiler accepts -fopenmp; the omp simd pragmas work even without it
ifeq ($(NO_OMP),1)
  HAVE_OMP :=
else
  HAVE_OMP := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo 1)
endif
ifeq ($(HAVE_OMP),1)
  override CFLAGS += -fopenmp
  OMP_NOTE := ✓ OpenMP
else
  override CFLAGS += -fopenmp-simd
  OMP_NOTE := ✗ OpenMP (single-threaded CPU trainer)
endif

# stb_image (Debian's libstb-dev): reading and writing pictures. STB_INCLUDE=DIR where it lives elsewhere
STB_INCLUDE ?= /usr/include/stb
ifneq ($(wildcard $(STB_INCLUDE)/stb_image.h),)
  STB_NOTE := ✓ stb_image
else
  STB_NOTE := ✗ stb_image (install libstb-dev, or STB_INCLUDE=DIR)
endif
override CFLAGS += -I$(STB_INCLUDE)

HAVE_ZLIB := $(shell echo '\#include <zlib.h>' | $(CC) -E -x c - >/dev/null 2>&1 && echo 1)
ifeq ($(HAVE_ZLIB),1)
  ZLIB_NOTE := ✓ zlib
else
  ZLIB_NOTE := ✗ zlib (install zlib1g-dev)
endif

ifeq ($(NVCC),none)
  NVCC_PATH :=
else
  NVCC_PATH := $(shell command -v $(NVCC) 2>/dev/null)
endif

ifneq ($(NVCC_PATH),)
  # the GPU's compute capability, e.g. "9.0" -> 90; empty when there is no GPU or no driver
  DETECTED_ARCH := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ')
  ifdef GPU_ARCH
    ARCH_NOTE := building for sm_$(GPU_ARCH) (from GPU_ARCH)
  else ifneq ($(DETECTED_ARCH),)
    GPU_ARCH := $(DETECTED_ARCH)
    ARCH_NOTE := building for sm_$(GPU_ARCH) (detected)
  else
    GPU_ARCH := 90
    ARCH_NOTE := none detected: building for sm_90 (override: make GPU_ARCH=80)
  endif
  NVCC_NOTE := ✓ nvcc $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  # what make test runs; make (all) builds the dev tools too
  CUDA_TEST_TARGETS := train_mlp train_mlp_fast test_mlp tests/bin/test_multi_gpu
  CUDA_TARGETS := $(CUDA_TEST_TARGETS) dev/bin/fused_profile
  # CUPTI (the toolkit's profiling interface), for the dev tool dev/bin/libtimeline.so: its headers
  # beside nvcc's, or in the toolkit's extras/CUPTI; a toolkit without it leaves the tool out
  CUPTI_DIR := $(firstword $(foreach d,$(dir $(NVCC_PATH))../extras/CUPTI $(dir $(NVCC_PATH))..,$(if $(wildcard $(d)/include/cupti.h),$(d))))
  ifneq ($(CUPTI_DIR),)
    CUDA_TARGETS += dev/bin/libtimeline.so
  endif
else
  ARCH_NOTE := no CUDA build (CPU only)
  NVCC_NOTE := ✗ nvcc (CPU only: the GPU trainers and test_mlp are not built$(if $(filter none,$(NVCC)),: NVCC=none,))
  CUDA_TARGETS :=
  CUDA_TEST_TARGETS :=
endif

# NCCL, for train_mlp_fast -g (data-parallel training on several GPUs): NCCL_HOME=DIR (its include/
# and lib64/ or lib/), else the CUDA toolkit beside nvcc, else the nvidia-nccl package PyTorch brings
# (include/nccl.h, lib/libnccl.so.2). Without it train_mlp_fast is built without -g's NCCL path.
# train_mlp_fast is not linked with the library: -g loads it (dlopen) from where it was found here,
# so without -g the trainer never needs it.
NCCL_FLAGS :=
NCCL_LDLIBS :=
ifneq ($(NVCC_PATH),)
  ifeq ($(NCCL_HOME),none)
    NCCL_DIR :=
  else ifneq ($(NCCL_HOME),)
    NCCL_DIR := $(if $(wildcard $(NCCL_HOME)/include/nccl.h),$(NCCL_HOME),)
  else ifneq ($(wildcard $(dir $(NVCC_PATH))../include/nccl.h),)
    NCCL_DIR := $(abspath $(dir $(NVCC_PATH))..)
  else
    NCCL_DIR := $(shell $(PYTHON) -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  endif
  NCCL_LIBDIR := $(firstword $(foreach d,lib64 lib,$(if $(wildcard $(NCCL_DIR)/$(d)/libnccl.so*),$(NCCL_DIR)/$(d))))
endif
ifneq ($(and $(NCCL_DIR),$(NCCL_LIBDIR)),)
  # libnccl.so.2 (the pip package has only that name), else libnccl.so
  NCCL_LIB := $(firstword $(wildcard $(NCCL_LIBDIR)/libnccl.so.2 $(NCCL_LIBDIR)/libnccl.so))
  NCCL_FLAGS := -DMLP_NCCL -I$(NCCL_DIR)/include -DMLP_NCCL_LIB='"$(NCCL_LIB)"'
  NCCL_LDLIBS := -ldl -lpthread
  NCCL_NOTE := ✓ NCCL $(shell sed -n 's/^\#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' $(NCCL_DIR)/include/nccl.h | paste -sd. -) ($(NCCL_DIR))
else ifneq ($(NVCC_PATH),)
  NCCL_NOTE := ✗ NCCL (train_mlp_fast -g needs it: $(if $(filter none,$(NCCL_HOME)),NCCL_HOME=none,$(if $(NCCL_HOME),no include/nccl.h and lib64/libnccl.so in NCCL_HOME=$(NCCL_HOME),not in the CUDA toolkit nor PyTorch's nvidia-nccl; NCCL_HOME=DIR)))
endif

# the readable trainer: plain code for this GPU
GENCODE_SIMPLE := -gencode arch=compute_$(GPU_ARCH),code=[sm_$(GPU_ARCH),compute_$(GPU_ARCH)]
ifeq ($(GPU_ARCH),90)
  # Hopper: the architecture-specific target sm_90a, for the wgmma kernel of kernels/fast/
  # (-x 1's forward products); code built for it runs on sm_90 GPUs (H100, H200) only
  GENCODE_FAST := -gencode arch=compute_90a,code=[sm_90a,compute_90a] -DMF_WGMMA
else
  GENCODE_FAST := $(GENCODE_SIMPLE)
endif
NVCC_HOSTFLAGS := -I$(STB_INCLUDE) -Xcompiler "$(filter -fopenmp%,$(CFLAGS)) -Wall -Wno-unused-function -Wno-format-truncation"
# (-lpthread: run/job.h's watcher thread, in train_mlp_fast and what includes it)
ifeq ($(HAVE_OMP),1)
  CUDA_LDLIBS = $(LDLIBS) -lgomp -lpthread
else
  CUDA_LDLIBS = $(LDLIBS) -lpthread
endif

# the banner, once per make (not again in the make that `make run` starts)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
  $(info ---------------------------------------------------------------------)
  $(info mlp.cu build: ✓ $(CC) | $(OMP_NOTE) | $(ZLIB_NOTE) | $(STB_NOTE) | $(NVCC_NOTE)$(if $(NCCL_NOTE), | $(NCCL_NOTE)))
  $(info GPU: $(ARCH_NOTE))
  $(info ---------------------------------------------------------------------)
endif
endif

COMMON_H := $(wildcard common/*.h) $(wildcard data/*.h) $(wildcard run/*.h)
KERNELS_H := $(wildcard kernels/*.cuh)
FAST_H := $(wildcard kernels/fast/*/*.cuh) $(wildcard kernels/fast/*/*.h)
# what the matmul library's objects include: its own folder and the small ops (not the fused steps or
# the step plan above it, whose edits then rebuild only the programs)
MATMUL_H := $(wildcard kernels/fast/matmul/*.cuh) $(wildcard kernels/fast/matmul/*.h) $(wildcard kernels/fast/ops/*.cuh)
TEST_H := $(wildcard tests/*.h) $(wildcard tests/fuzz/*.h)
# the fast matmul library (kernels/fast/matmul/*.cu) is compiled once, into objects that train_mlp_fast and test_mlp both link
FAST_OBJS := $(patsubst kernels/fast/matmul/%.cu,build/fast/%.o,$(wildcard kernels/fast/matmul/*.cu))

.PHONY: all train train_cpu train_fast test data run bench sanitize clean mutate
all: train_mlp_cpu $(CUDA_TARGETS)

train_cpu: train_mlp_cpu
train_mlp_cpu: train_mlp_cpu.c $(COMMON_H)
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

# the long nvcc builds say what they compile and why, since on a machine without a GPU make test waits on them
SLOW_NVCC = @echo "--- nvcc: compiling $(1), for $(2) (minutes on 2 cores; make test NVCC=none skips the GPU programs)"
NO_NVCC = @echo "error: nvcc not found (or NVCC=none): the GPU trainers need the CUDA toolkit ---> try: make train_cpu" >&2; exit 1

train: train_mlp
train_mlp: train_mlp.cu $(COMMON_H) $(KERNELS_H)
ifeq ($(NVCC_PATH),)
	$(NO_NVCC)
else
	$(call SLOW_NVCC,$<,the readable GPU trainer ./train_mlp)
	$(NVCC) $(NVCCFLAGS) $(GENCODE_SIMPLE) $(NVCC_HOSTFLAGS) $< $(CUDA_LDLIBS) -o $@
endif

# (-compress-all: nvcc's default leaves some objects' fatbins uncompressed, a larger binary for the same code)
build/fast/%.o: kernels/fast/matmul/%.cu $(KERNELS_H) $(MATMUL_H) common/mlp.h
	@mkdir -p build/fast
	$(call SLOW_NVCC,$<,the fast trainer and test_mlp)
	$(NVCC) $(NVCCFLAGS) $(GENCODE_FAST) $(NVCC_HOSTFLAGS) -Xfatbin -compress-all -c $< -o $@

# the autotune keeps its choices in the plan cache (host code of common/)
build/fast/tune.o: common/plan_cache.h common/safe_write.h common/utils.h

train_fast: train_mlp_fast
train_mlp_fast: train_mlp_fast.cu $(FAST_OBJS) $(COMMON_H) $(KERNELS_H) $(FAST_H)
ifeq ($(NVCC_PATH),)
	$(NO_NVCC)
else
	$(call SLOW_NVCC,$<,the fast trainer ./train_mlp_fast)
	$(NVCC) $(NVCCFLAGS) $(GENCODE_FAST) $(NVCC_HOSTFLAGS) $(NCCL_FLAGS) $< $(FAST_OBJS) $(CUDA_LDLIBS) $(NCCL_LDLIBS) -o $@
endif

test_mlp: test_mlp.cu train_mlp.cu train_mlp_fast.cu train_mlp_cpu.c $(FAST_OBJS) $(COMMON_H) $(KERNELS_H) $(FAST_H) $(TEST_H)
	$(call SLOW_NVCC,$<,./test_mlp: both GPU trainers against the CPU)
	$(NVCC) $(NVCCFLAGS) $(GENCODE_FAST) $(NVCC_HOSTFLAGS) $< $(FAST_OBJS) $(CUDA_LDLIBS) -o $@

# where the fused step's time goes, phase by phase (a dev tool: dev/fused_profile.cu)
dev/bin/fused_profile: dev/fused_profile.cu train_mlp_fast.cu $(FAST_OBJS) $(COMMON_H) $(KERNELS_H) $(FAST_H)
	@mkdir -p dev/bin
	$(call SLOW_NVCC,$<,the dev tool dev/bin/fused_profile)
	$(NVCC) $(NVCCFLAGS) $(GENCODE_FAST) $(NVCC_HOSTFLAGS) -I. $< $(FAST_OBJS) $(CUDA_LDLIBS) -o $@

# the autotune against the cost model, product by product, and the plan cache on the GPU (a dev
# tool: dev/tune_check.cu)
dev/bin/tune_check: dev/tune_check.cu $(FAST_OBJS) $(COMMON_H) $(KERNELS_H) $(FAST_H) $(TEST_H)
	@mkdir -p dev/bin
	$(call SLOW_NVCC,$<,the dev tool dev/bin/tune_check)
	$(NVCC) $(NVCCFLAGS) $(GENCODE_FAST) $(NVCC_HOSTFLAGS) $< $(FAST_OBJS) $(CUDA_LDLIBS) -o $@

# run/job.h with NCCL on the GPUs: the ranks bootstrap, make their communicator, all-reduce and check
# (a dev tool, dev/nccl_ranks.cu: the GPU check of the launch, bootstrap and liveness code)
dev/bin/nccl_ranks: dev/nccl_ranks.cu $(COMMON_H) $(KERNELS_H)
	@test -n "$(NCCL_LIB)" || { echo "error: no NCCL here (make's banner says where it looked) ---> try: make NCCL_HOME=DIR dev/bin/nccl_ranks" >&2; exit 1; }
	@mkdir -p dev/bin
	$(NVCC) $(NVCCFLAGS) $(GENCODE_SIMPLE) $(NVCC_HOSTFLAGS) -I$(NCCL_DIR)/include $< -L$(dir $(NCCL_LIB)) -l:$(notdir $(NCCL_LIB)) -Xlinker -rpath=$(dir $(NCCL_LIB)) -lpthread -o $@

# every kernel's start and end on the GPU, for dev/timeline.py (a dev tool: a CUPTI injection library,
# loaded into a program through CUDA_INJECTION64_PATH; dev/timeline.c)
dev/bin/libtimeline.so: dev/timeline.c
	@test -n "$(CUPTI_DIR)" || { echo "error: no CUPTI (cupti.h) beside nvcc: the CUDA toolkit's profiling interface is not installed" >&2; exit 1; }
	@mkdir -p dev/bin
	$(NVCC) -shared -Xcompiler "-fPIC -Wall" -I$(CUPTI_DIR)/include $< -L$(CUPTI_DIR)/lib64 -lcupti -o $@

# train_mlp_fast -g against its one-GPU path: host code that runs the trainer (CUDA only counts the GPUs)
tests/bin/test_multi_gpu: tests/test_multi_gpu.cu $(COMMON_H) $(TEST_H)
	@mkdir -p tests/bin
	$(NVCC) $(NVCCFLAGS) $(NVCC_HOSTFLAGS) $< $(CUDA_LDLIBS) -o $@

# the CPU tests: every tests/test_*.c is one binary (test_gradcheck runs the CPU reference in double
# precision; the tests that run ./train_mlp_cpu find it in the current directory)
CPU_TESTS := $(patsubst tests/%.c,tests/bin/%,$(wildcard tests/test_*.c))
tests/bin/%: tests/%.c train_mlp_cpu.c $(COMMON_H) $(TEST_H)
	@mkdir -p tests/bin
	$(CC) $(CFLAGS) $< $(LDLIBS) -o $@

# The CPU tests again, and the CPU trainer they run, built with AddressSanitizer and
# UndefinedBehaviorSanitizer: clang when there is one (its UBSan is kept off stb's own code by
# data/images.h; gcc's cannot be), single-threaded (OpenMP's runtime and ASan are best kept apart).
# Without clang they are skipped, and make test says so (.ci/run installs clang).
SAN_CC ?= $(if $(shell command -v clang 2>/dev/null),clang,)
SAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
              -std=gnu11 -Wall -Wextra -Wno-unused-function -Wno-pass-failed -fopenmp-simd -I$(STB_INCLUDE)
SAN_TESTS := $(if $(SAN_CC),$(patsubst tests/%.c,tests/bin/san/%,$(wildcard tests/test_*.c)),)
tests/bin/san/%: tests/%.c train_mlp_cpu.c $(COMMON_H) $(TEST_H)
	@mkdir -p tests/bin/san
	$(SAN_CC) $(SAN_CFLAGS) $< $(LDLIBS) -o $@
tests/bin/san/train_mlp_cpu: train_mlp_cpu.c $(COMMON_H)
	@mkdir -p tests/bin/san
	$(SAN_CC) $(SAN_CFLAGS) $< $(LDLIBS) -o $@

# Every test binary runs even when an earlier one fails; the target fails if any did. The tests
# that run the CPU trainer take its path as their argument. Each binary ends with a line
# "N passed, N failed[, N skipped]"; the last line of make test adds them up (a binary that ended
# without one, a crash, counts as one failure), so a run whose tests all skipped says so.
test: train_mlp_cpu $(CPU_TESTS) $(if $(SAN_CC),tests/bin/san/train_mlp_cpu) $(SAN_TESTS) $(CUDA_TEST_TARGETS)
	@$(if $(SAN_CC),,echo "(no clang here: the CPU tests under AddressSanitizer and UBSan are skipped)";) \
	failed=""; P=0; F=0; S=0; log=$$(mktemp); \
	for t in $(foreach t,$(CPU_TESTS),"$(t) ./train_mlp_cpu") $(foreach t,$(SAN_TESTS),"$(t) tests/bin/san/train_mlp_cpu") \
	         "$(PYTHON) dev/check_docs.py" $(if $(CUDA_TEST_TARGETS),./test_mlp "tests/bin/test_run ./train_mlp" \
	         "tests/bin/test_run ./train_mlp_fast" "tests/bin/test_properties ./train_mlp_cpu ./train_mlp ./train_mlp_fast" \
	         "tests/bin/test_multi_gpu ./train_mlp_fast",); do \
	  echo; echo "=== $$t"; \
	  { $$t; echo $$? > "$$log.rc"; } 2>&1 | tee "$$log"; \
	  rc=$$(cat "$$log.rc"); [ "$$rc" = 0 ] || failed="$$failed $$t"; \
	  counts=$$(sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed\(, \([0-9][0-9]*\) skipped\)\{0,1\}$$/\1 \2 \4/p' "$$log" | tail -n 1); \
	  set -- $${counts:-0 0 0}; f=$$2; [ "$$rc" = 0 ] || [ "$$f" != 0 ] || f=1; \
	  P=$$((P + $$1)); F=$$((F + f)); S=$$((S + $${3:-0})); \
	done; \
	rm -f "$$log" "$$log.rc"; echo; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed"; else echo "make test: every test binary passed"; fi; \
	echo "total: $$P passed, $$F failed, $$S skipped"; \
	[ -z "$$failed" ]

# make data DATASET=cifar10: CIFAR-10's binary version into data/cifar10 (MD5-checked); the default is MNIST
DATASET ?= mnist
data:
	@bash data/download.sh $(DATASET)

# train on the GPU when there is one (and nvcc), else on the CPU
run: data
	@if [ -n "$(NVCC_PATH)" ] && nvidia-smi -L >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory train_mlp && ./train_mlp $(ARGS); \
	else \
	  echo "no GPU here: training with the CPU reference trainer"; \
	  $(MAKE) --no-print-directory train_mlp_cpu && ./train_mlp_cpu $(ARGS); \
	fi

bench: train_mlp_fast
	$(PYTHON) dev/bench.py

# mutation testing (dev/mutate/README.md): every mutant of dev/mutate/cpu_mutations.txt and
# cpu_generated.txt in a copy of the tree, rebuilt and run against the CPU test binaries (10 to 15
# minutes on 2 cores), reported on the terminal and in dev/out/mutate_cpu.txt. The GPU mutants:
# python3 dev/mutate/mutate.py gpu-check builds them here, bash dev/mutate/gpu_visit.sh OUTDIR runs
# them on a machine with a GPU.
mutate:
	$(PYTHON) dev/mutate/mutate.py cpu

# (GPU) compute-sanitizer's memcheck, racecheck, initcheck and synccheck on test_mlp and both GPU trainers
sanitize: train_mlp train_mlp_fast test_mlp
	bash dev/sanitize.sh

# ---------------------------------------------------------------------------------------------
# make fuzz: builds every libFuzzer target of tests/fuzz/ (clang, with AddressSanitizer and
# UndefinedBehaviorSanitizer) and runs each for FUZZ_SECONDS with its seed corpus and dictionary.
# New inputs go to build/fuzz/corpus/TARGET/, a crash's input to build/fuzz/crashes/TARGET/
# (once fixed, keep it in tests/fuzz/regressions/TARGET/: make test runs those). tests/fuzz/README.md
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := idx_raw idx_gz cifar image folder checkpoint args safetensors json plan_cache
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=gnu11 -I$(STB_INCLUDE)
# the longest input each target is given (default 4096 bytes): a checkpoint's header alone is 12,608
FUZZ_MAX_LEN_cifar := 8192
FUZZ_MAX_LEN_image := 16384
FUZZ_MAX_LEN_folder := 16384
FUZZ_MAX_LEN_checkpoint := 16384
FUZZ_BINS := $(addprefix build/fuzz/,$(FUZZ_TARGETS))

build/fuzz/%: tests/fuzz/fuzz.c tests/fuzz/fuzz.h $(COMMON_H)
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DFUZZ_TARGET=fuzz_$* $< -lz -lm -o $@

.PHONY: fuzz fuzz_build
fuzz_build: $(FUZZ_BINS)
fuzz: $(FUZZ_BINS)
	@failed=""; \
	$(foreach t,$(FUZZ_TARGETS),\
	  mkdir -p build/fuzz/corpus/$(t) build/fuzz/crashes/$(t); \
	  echo "=== fuzz $(t): $(FUZZ_SECONDS) s (log: build/fuzz/$(t).log)"; \
	  build/fuzz/$(t) build/fuzz/corpus/$(t) tests/fuzz/corpus/$(t) -dict=tests/fuzz/dict/$(t).dict \
	    -max_total_time=$(FUZZ_SECONDS) -max_len=$(or $(FUZZ_MAX_LEN_$(t)),4096) -timeout=10 \
	    -artifact_prefix=build/fuzz/crashes/$(t)/ -print_final_stats=1 >build/fuzz/$(t).log 2>&1 \
	    || failed="$$failed $(t)"; \
	  grep -E "^(stat::number_of_executed_units|stat::new_units_added|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)" \
	    build/fuzz/$(t).log | sed 's/^/    /';) \
	if [ -n "$$failed" ]; then echo "make fuzz: FAILED:$$failed (inputs in build/fuzz/crashes/)"; exit 1; fi; \
	echo "make fuzz: no crash in $(FUZZ_SECONDS) s of each target"

clean:
	rm -f train_mlp train_mlp_fast train_mlp_cpu test_mlp
	rm -rf tests/bin build dev/bin
