# accelkit: the two commands of the quick start (`make demo`, `make test`) and the rest.
#   make demo   build, then show `ak sysinfo`, the kernel, pool and collective benchmarks,
#               a training plan (ak plan), ONNX inference of a torchvision model checked
#               against PyTorch, an LLM served over HTTP, and a Horovod training script on 2 ranks
#   make test   build and run every test, then the same under ASan+UBSan
#   make bench  all benchmarks, each beside its peer (installs Open MPI, PyTorch, iperf3);
#               results lines in bench-results/, then the page bench-results/report.html
#   make fuzz   libFuzzer targets (clang), FUZZ_SECONDS each
#   make san    the ASan+UBSan build and its tests only
#   make install  the library, headers, pkg-config and CMake files, ak, under PREFIX
#               (default /usr/local; DESTDIR=... stages it elsewhere)
#   make deb    a Debian package, $(BUILD)/accelkit_VERSION_ARCH.deb (docs/install.md)
BUILD     ?= build
SAN_BUILD ?= build-san
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
PREFIX    ?= /usr/local
JOBS      ?= $(shell nproc)
# configure once per build dir; ninja if present (checked after setup installed it)
CONFIGURE = test -f $(1)/CMakeCache.txt || cmake -S . -B $(1) $$(command -v ninja >/dev/null && echo -G Ninja)
SAN_ENV   := ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: all setup build demo test unit san bench fuzz clean install deb

all: build

setup:
	@scripts/setup

build: setup
	@$(call CONFIGURE,$(BUILD)) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# the demo's own results lines (ak report draws them at the end)
DEMO_RESULTS = $(BUILD)/demo-results

demo: build
	@rm -rf $(DEMO_RESULTS)
	@echo "== ak sysinfo"; $(BUILD)/ak sysinfo
	@echo; echo "== ak bench kernels (1 thread; AK_NUM_THREADS=N for more)"; $(BUILD)/ak bench kernels --out $(DEMO_RESULTS)
	@echo; echo "== ak bench pool"; $(BUILD)/ak bench pool
	@echo; echo "== ak bench comm (allreduce, 2 ranks on this machine, results checked)"
	$(BUILD)/ak bench comm -np 2 -b 8 -e 64M -f 8 --check --out $(DEMO_RESULTS)
	@echo; echo "== training planner: Megatron-LM's 1T model on 3072 A100s, against its published plan"
	$(BUILD)/ak plan --model megatron-1t --cluster a100-80gb --devices 3072 --gbs 3072 --top 5 --attention standard --baseline tp=8,pp=64,dp=6,recompute=full,zero=0,sp=off --out $(DEMO_RESULTS)
	@echo; echo "== ONNX inference: torchvision ResNet-18 exported by PyTorch; ak info, ak compare, ak bench"
	scripts/infer-demo $(BUILD)
	@echo; echo "== LLM engine: ak generate, then ak serve with a completion streamed over its OpenAI-compatible HTTP API"
	scripts/llm-demo $(BUILD)
	@echo; echo "== Horovod script, unchanged, on 2 ranks: examples/train_mnist_like.py (ak launch)"
	PYTHONPATH=python AK_LIBRARY=$(BUILD)/libaccelkit.so $(BUILD)/ak launch -np 2 /usr/bin/python3 examples/train_mnist_like.py --steps 100
	@echo; echo "== ak report: the demo's benchmark results as one HTML page (open it in a browser)"
	$(BUILD)/ak report $(DEMO_RESULTS) -o $(DEMO_RESULTS)/report.html

unit: build
	ctest --test-dir $(BUILD) --output-on-failure -j 2

san: setup
	@$(call CONFIGURE,$(SAN_BUILD)) -DCMAKE_BUILD_TYPE=Debug -DAK_SANITIZE=ON
	cmake --build $(SAN_BUILD) -j $(JOBS)
	$(SAN_ENV) ctest --test-dir $(SAN_BUILD) --output-on-failure -j 2

test: unit san

bench: build
	@scripts/setup --bench
	$(BUILD)/ak bench kernels
	AK_NUM_THREADS=$(JOBS) $(BUILD)/ak bench kernels --only gemm
	$(BUILD)/ak bench pool
	bench/kernels/vs_peers.sh $(BUILD)
	BUILD=$(abspath $(BUILD)) bench/comm/vs_peers.sh tcp 3 2
	BUILD=$(abspath $(BUILD)) bench/comm/vs_peers.sh shm 3 2
	bench/infer/vs_peers.sh $(BUILD) 3 2
	for a in ring hier auto; do scripts/netns-cluster -H 2 -G 2 -- $(BUILD)/ak bench comm -b 8 -e 64M -f 8 -n 5 -w 1 --algo $$a; done
	bench/llm/server_load.sh $(BUILD)
	$(BUILD)/ak report bench-results -o bench-results/report.html

fuzz: setup
	@$(call CONFIGURE,$(FUZZ_BUILD)) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug -DAK_FUZZ=ON -DAK_BUILD_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@for f in $(FUZZ_BUILD)/tests/fuzz/fuzz_*; do \
	  echo "== $$f ($(FUZZ_SECONDS) s)"; \
	  name=$$(basename $$f); mkdir -p $(FUZZ_BUILD)/corpus/$$name; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	      $(FUZZ_BUILD)/corpus/$$name tests/fuzz/corpus/$$name || exit 1; \
	done

install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

deb: build
	cd $(BUILD) && cpack -G DEB
	@ls $(BUILD)/accelkit_*.deb

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(FUZZ_BUILD)
