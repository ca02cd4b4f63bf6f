# SPDX-License-Identifier: Apache-2.0
# The thin front of the CMake build. The README's two commands: `make run` and `make test`.
JOBS ?= $(shell nproc)
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
BUILD_REL_GCC ?= build-release-gcc
BUILD_REL_CLANG ?= build-release-clang
CMAKE_FLAGS ?=
MAKEFLAGS += --no-print-directory

.PHONY: all deps build build-asan build-tsan build-release test test-normal test-asan test-tsan \
        test-release test-gpu device-bundle run bench check format clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(BUILD_ASAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGPUM_SANITIZE=address $(CMAKE_FLAGS)

build-asan: deps $(BUILD_ASAN)/CMakeCache.txt
	cmake --build $(BUILD_ASAN) -j $(JOBS)

$(BUILD_TSAN)/CMakeCache.txt:
	cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUM_SANITIZE=thread $(CMAKE_FLAGS)

build-tsan: deps $(BUILD_TSAN)/CMakeCache.txt
	cmake --build $(BUILD_TSAN) -j $(JOBS)

# Release builds, as packagers make them (-O3, NDEBUG), with gcc and with clang: each compiler
# warns about different things and warnings are errors, so both must build.
$(BUILD_REL_GCC)/CMakeCache.txt:
	CC=gcc CXX=g++ cmake -S . -B $(BUILD_REL_GCC) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

$(BUILD_REL_CLANG)/CMakeCache.txt:
	CC=clang CXX=clang++ cmake -S . -B $(BUILD_REL_CLANG) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build-release: deps $(BUILD_REL_GCC)/CMakeCache.txt $(BUILD_REL_CLANG)/CMakeCache.txt
	cmake --build $(BUILD_REL_GCC) -j $(JOBS)
	cmake --build $(BUILD_REL_CLANG) -j $(JOBS)

# The whole suite three times: on the normal build, on ASan+UBSan and on ThreadSanitizer (the
# multi-threaded stress tests carry the ctest label "threads": `ctest -L threads` runs just them);
# then the Release builds with gcc and clang, whose unit tests run too.
test: test-normal test-asan test-tsan test-release

test-normal: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

test-tsan: build-tsan
	cd $(BUILD_TSAN) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -j $(JOBS)

test-release: build-release
	cd $(BUILD_REL_GCC) && ctest --output-on-failure -j $(JOBS) -R '^unit\.'
	cd $(BUILD_REL_CLANG) && ctest --output-on-failure -j $(JOBS) -R '^unit\.'

run: build
	@scripts/run.sh $(BUILD)

# The device check on this machine (tests/gpu/run.sh; docs/hardware.md): every check on a real
# GPU, each GPU check skipped with its reason without one.
test-gpu: build
	@tests/gpu/run.sh $(BUILD)

# A self-contained folder to carry to a machine with a real GPU and run the device check on
# (tests/gpu/device-check.sh; docs/hardware.md): $(BUILD)/device-bundle, under 64 MiB.
device-bundle: build
	@scripts/device-bundle.sh $(BUILD) $(BUILD)/device-bundle

bench: build
	@scripts/deps.sh bench
	@bench/run.sh $(BUILD)

check: deps $(BUILD)/CMakeCache.txt
	@JOBS=$(JOBS) scripts/check.sh $(BUILD)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(BUILD_REL_GCC) $(BUILD_REL_CLANG)
