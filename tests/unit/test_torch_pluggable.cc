// SPDX-License-Identifier: Apache-2.0
//
// libgpum_torch.so (src/torch/pluggable.cc), PyTorch's pluggable allocator, on the simulated
// driver (a node of one 1 GiB device made by the test, GPUM_MEM_LIMIT 96 MiB as under gpum
// run): memory is handed out and given back; a refused allocation is a C++ exception (what
// PyTorch turns into a Python RuntimeError) whose text begins as PyTorch's out-of-memory error
// and carries the pool's reason, never a NULL tensor; other failures name their error; an empty
// tensor's zero bytes are no allocation. Prints "ok" and exits 0, else says what failed.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <unistd.h>

extern "C" {
void *gpum_torch_pluggable_malloc(ssize_t size, int device, void *stream);
void gpum_torch_pluggable_free(void *ptr, ssize_t size, int device, void *stream);
}

static int fails;
static void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    fails++;
  }
}

// The message of the exception malloc(size, device) throws, or "" when it throws none.
static std::string refusal(ssize_t size, int device) {
  try {
    void *p = gpum_torch_pluggable_malloc(size, device, nullptr);
    gpum_torch_pluggable_free(p, size, device, nullptr);
    return "";
  } catch (const std::runtime_error &e) {
    return e.what();
  }
}

static bool starts(const std::string &s, const char *prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

int main() {
  const char *lib = std::getenv("GPUM_SIM_LIBRARY");
  void *sim = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!sim) {
    std::fprintf(stderr, "cannot load the simulator (GPUM_SIM_LIBRARY=%s)\n", lib ? lib : "");
    return 1;
  }
  typedef int (*create_fn)(const char *, const char *, char *, size_t);
  typedef int (*destroy_fn)(const char *);
  create_fn create = reinterpret_cast<create_fn>(dlsym(sim, "gpum_sim_create"));
  destroy_fn destroy = reinterpret_cast<destroy_fn>(dlsym(sim, "gpum_sim_destroy"));
  char spec[] = "/tmp/gpum-test-torch-pluggable-XXXXXX";
  int fd = mkstemp(spec);
  const char text[] = "name: pluggable\ndevices:\n  - {count: 1, name: Sim GPU, memory: 1GiB}\n";
  bool wrote = fd >= 0 && write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1);
  if (fd >= 0)
    close(fd);
  char node[64];
  std::snprintf(node, sizeof node, "ttpl%d", (int)getpid());
  int rc = create && destroy && wrote ? create(spec, node, nullptr, 0) : -1;
  unlink(spec);
  if (rc) {
    std::fprintf(stderr, "cannot create the simulated node\n");
    return 1;
  }
  setenv("GPUM_SIM_NODE", node, 1);
  unsetenv("GPUM_CUDA_LIBRARY");
  setenv("GPUM_MEM_LIMIT", "100663296", 1); // 96 MiB

  const ssize_t MiB = 1 << 20;
  void *p = gpum_torch_pluggable_malloc(32 * MiB, 0, nullptr);
  expect(p != nullptr, "32 MiB within the 96 MiB limit");
  if (p)
    std::memset(p, 0x5a, 32 * MiB); // the simulator's device memory is this process's

  std::string why = refusal(128 * MiB, 0);
  expect(starts(why, "CUDA out of memory. Tried to allocate 128.00 MiB on GPU 0: "),
         "128 MiB past the limit: '" + why + "'");
  expect(why.find("limit") != std::string::npos, "the pool's reason names the limit: " + why);

  expect(gpum_torch_pluggable_malloc(0, 0, nullptr) == nullptr && refusal(0, 0).empty(),
         "an empty tensor's 0 bytes: no allocation, no exception");
  why = refusal(-1, 0);
  expect(starts(why, "gpum's allocator cannot allocate") &&
             why.find("(EINVAL)") != std::string::npos,
         "a negative size: '" + why + "'");
  why = refusal(MiB, 99);
  expect(starts(why, "gpum's allocator cannot allocate 1.00 MiB on GPU 99 (ENODEV)"),
         "an unknown device: '" + why + "'");

  gpum_torch_pluggable_free(p, 32 * MiB, 0, nullptr);
  void *q = gpum_torch_pluggable_malloc(90 * MiB, 0, nullptr);
  expect(q != nullptr, "90 MiB after the 32 MiB block was freed");
  gpum_torch_pluggable_free(q, 90 * MiB, 0, nullptr);

  destroy(node);
  if (fails)
    return 1;
  std::printf("ok\n");
  return 0;
}
