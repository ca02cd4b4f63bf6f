# SPDX-License-Identifier: Apache-2.0
# The thin front of the CMake build. The README's two commands: `make run` and `make test`.
JOBS ?= $(shell nproc)
BUILD ?= build
BUILD_ASAN ?= build-asan
CMAKE_FLAGS ?=
MAKEFLAGS += --no-print-directory

.PHONY: all deps build build-asan test test-normal test-asan run bench check format clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD_ASAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGPUM_SANITIZE=ON $(CMAKE_FLAGS)

build-asan: deps $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# The whole suite twice: the normal build, then ASan+UBSan.
test: test-normal test-asan

test-normal: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD)

bench: build
	@bench/run.sh $(BUILD)

check: deps $(BUILD)/CMakeCache.txt
	@scripts/check.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
