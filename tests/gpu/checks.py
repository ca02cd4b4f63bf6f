# SPDX-License-Identifier: Apache-2.0
"""The device check's checks (run by tests/gpu/device-check.sh; docs/hardware.md).

One process runs the list: it finds what the machine has (nvidia-smi, the GPU, python3's
PyTorch with CUDA, torchvision, nvcc), then runs each check as a child process of its own with a
timeout (``checks.py one NAME``), and writes device-check.json, device-check.txt and
device-check.log to OUT. A check passes (ok), fails with its evidence (FAIL) or is skipped with
its reason (SKIP). Only the standard library is needed; PyTorch is imported by the checks that
use it. A few checks start children of their own with another environment (the enforcement
shim preloaded, an allocator setting): ``checks.py child NAME``.
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import glob
import gzip
import json
import os
import platform
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

GiB = 1 << 30
MiB = 1 << 20


class Skip(Exception):
    """The check cannot run here; the message says why."""


class Fail(Exception):
    """The check failed; the message is the evidence."""


# ---- what a check sees -------------------------------------------------------------------------


class Ctx:
    """A running check: the bundle, a scratch folder, its figures, its failed expectations."""

    def __init__(self, bundle: str, work: str, sim: bool, facts: Dict[str, Any]) -> None:
        self.bundle, self.work, self.sim, self.facts = bundle, work, sim, facts
        self.figures: Dict[str, Any] = {}
        self.fails: List[str] = []
        self.notes: List[str] = []
        self.gpum_bin = os.path.join(bundle, "bin", "gpum")
        self.gpumd_bin = os.path.join(bundle, "sbin", "gpumd")
        self.shim = os.path.join(bundle, "lib", "libgpum_enforce.so")

    def fig(self, key: str, value: Any) -> Any:
        self.figures[key] = value
        return value

    def expect(self, cond: Any, msg: str) -> bool:
        """Records a failed expectation and goes on, so that one run collects all the evidence."""
        if not cond:
            self.fails.append(msg)
            print("FAIL: " + msg, flush=True)
        return bool(cond)

    def note(self, msg: str) -> None:
        self.notes.append(msg)
        print("note: " + msg, flush=True)

    def run(self, args: List[str], timeout: float = 60, env: Optional[Dict[str, str]] = None,
            input: Optional[str] = None, check: bool = True) -> subprocess.CompletedProcess:
        """Runs a command (logged), its output captured; check: fail on a non-zero exit."""
        print("$ " + " ".join(args), flush=True)
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                               env=env, input=input, errors="replace")
        except subprocess.TimeoutExpired:
            raise Fail("%s did not finish within %g s" % (os.path.basename(args[0]), timeout))
        except OSError as e:
            raise Fail("cannot run %s: %s" % (args[0], e))
        if p.stdout:
            print(p.stdout[-6000:], end="" if p.stdout.endswith("\n") else "\n")
        if p.stderr:
            print(p.stderr[-6000:], end="" if p.stderr.endswith("\n") else "\n")
        if check and p.returncode != 0:
            raise Fail("%s exited %d: %s" % (" ".join(os.path.basename(a) for a in args[:3]),
                                              p.returncode, tail(p.stderr or p.stdout)))
        return p

    def gpum(self, *args: str, env: Optional[Dict[str, str]] = None, timeout: float = 60,
             check: bool = True) -> subprocess.CompletedProcess:
        return self.run([self.gpum_bin] + list(args), timeout=timeout, env=env, check=check)

    def gpum_json(self, *args: str, env: Optional[Dict[str, str]] = None) -> Any:
        p = self.gpum(*args, env=env)
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            raise Fail("gpum %s printed no JSON (%s): %s" % (" ".join(args), e, tail(p.stdout)))

    def child(self, name: str, env_extra: Dict[str, str], timeout: float = 120,
              args: Tuple[str, ...] = ()) -> Dict[str, Any]:
        """Runs `checks.py child NAME` with more environment; its last stdout line is JSON."""
        env = dict(os.environ, **env_extra)
        p = self.run([sys.executable, os.path.abspath(__file__), "--bundle", self.bundle,
                      "child", name] + list(args), timeout=timeout, env=env, check=False)
        lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
        if not lines:
            raise Fail("child %s exited %d without a result: %s" % (name, p.returncode,
                                                                   tail(p.stderr or p.stdout)))
        out = json.loads(lines[-1])
        out["_rc"] = p.returncode
        out["_stderr"] = tail(p.stderr, 600)
        return out

    def shim_env(self, limit: int) -> Dict[str, str]:
        return {"LD_PRELOAD": self.shim, "GPUM_MEM_LIMIT": str(limit)}


def tail(text: Optional[str], n: int = 400) -> str:
    text = (text or "").strip()
    return text if len(text) <= n else "..." + text[-n:]


def num(v: str) -> Optional[float]:
    """A number from nvidia-smi's CSV ('[N/A]', '[Not Supported]' -> None)."""
    try:
        return float(v.strip())
    except ValueError:
        return None


def within(v: Optional[float], lo: Optional[float], hi: Optional[float], tol: float) -> bool:
    """v inside [min(lo, hi) - tol, max(lo, hi) + tol] (a value bracketed by two readings)."""
    if v is None or lo is None or hi is None:
        return v is None and lo is None and hi is None
    return min(lo, hi) - tol <= v <= max(lo, hi) + tol


CHECKS: List[Tuple[str, Tuple[str, ...], int, Callable[[Ctx], str]]] = []


def check(name: str, needs: Tuple[str, ...], timeout: int) -> Callable:
    """Registers a check. needs: "gpu" (a real GPU and nvidia-smi), "device" (a real GPU or
    the simulated node of --sim), "torch" (python3's PyTorch with CUDA), "nvcc"."""

    def reg(fn: Callable[[Ctx], str]) -> Callable[[Ctx], str]:
        CHECKS.append((name, needs, timeout, fn))
        return fn

    return reg


# ---- the machine -------------------------------------------------------------------------------


def smi(*args: str, timeout: float = 30) -> Optional[str]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        p = subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=timeout)
    except (subprocess.TimeoutExpired, OSError):
        return None
    return p.stdout if p.returncode == 0 else None


def smi_query(fields: List[str], what: str = "--query-gpu") -> List[Dict[str, str]]:
    out = smi(what + "=" + ",".join(fields), "--format=csv,noheader,nounits")
    if out is None:
        return []
    rows = []
    for line in out.strip().splitlines():
        vals = [v.strip() for v in line.split(",")]
        if len(vals) == len(fields):
            rows.append(dict(zip(fields, vals)))
    return rows


def nvcc_path() -> Optional[str]:
    return shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.access(p, os.X_OK)), None)


TORCH_PROBE = r"""
import json, sys
out = {}
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    if out["cuda_available"]:
        out["torch_device"] = torch.cuda.get_device_name(0)
        out["torch_capability"] = "%d.%d" % torch.cuda.get_device_capability(0)
except Exception as e:
    out["torch_error"] = "%s: %s" % (type(e).__name__, e)
try:
    import torchvision
    out["torchvision"] = torchvision.__version__
except Exception as e:
    out["torchvision_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


def machine_facts(bundle: str, sim: bool) -> Dict[str, Any]:
    f: Dict[str, Any] = {
        "hostname": platform.node(), "kernel": platform.release(), "arch": platform.machine(),
        "libc": " ".join(platform.libc_ver()), "python": sys.version.split()[0],
        "python_path": sys.executable, "sim": sim,
    }
    try:
        with open(os.path.join(bundle, "MANIFEST")) as m:
            head = [next(m).strip() for _ in range(4)]
        f["bundle"] = {"version": head[1].partition(" ")[2], "commit": head[2].partition(" ")[2],
                       "built": head[3].partition(" ")[2]}
    except (OSError, StopIteration):
        f["bundle"] = None
    if not shutil.which("nvidia-smi"):
        f["gpu"] = None
        f["gpu_absent"] = "no nvidia-smi on PATH"
    else:
        rows = smi_query(["index", "name", "uuid", "driver_version", "memory.total"])
        if not rows:
            f["gpu"] = None
            f["gpu_absent"] = "nvidia-smi lists no GPU (or failed)"
        else:
            f["gpu"] = rows
            head = smi() or ""
            m = re.search(r"CUDA Version:\s*([0-9.]+)", head)
            f["driver"] = rows[0]["driver_version"]
            f["cuda_driver_version"] = m.group(1) if m else None
    nv = nvcc_path()
    if nv:
        try:
            v = subprocess.run([nv, "--version"], capture_output=True, text=True, timeout=30)
            m = re.search(r"release ([0-9.]+)", v.stdout)
            f["nvcc"] = m.group(1) if m else v.stdout.strip().splitlines()[-1]
        except (OSError, subprocess.TimeoutExpired):
            f["nvcc"] = None
    else:
        f["nvcc"] = None
    if f["gpu"]:  # importing torch takes seconds: only where a GPU can use it
        try:
            p = subprocess.run([sys.executable, "-c", TORCH_PROBE], capture_output=True,
                               text=True, timeout=120)
            f.update(json.loads(p.stdout.strip().splitlines()[-1]))
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
            f["torch_error"] = "the probe failed: %s" % e
    return f


def unmet(needs: Tuple[str, ...], facts: Dict[str, Any], bundle: str) -> Optional[str]:
    """Why a check with these needs cannot run here (None: it can)."""
    for n in needs:
        if n == "gpu":
            if facts.get("sim"):
                return "a simulated node (--sim): nothing of the vendor's to compare with"
            if not facts.get("gpu"):
                return "no NVIDIA GPU here: " + facts.get("gpu_absent", "")
        elif n == "device":
            if not facts.get("gpu") and not facts.get("sim"):
                return "no NVIDIA GPU here: " + facts.get("gpu_absent", "")
        elif n == "torch":
            if facts.get("sim"):
                return "a simulated node (--sim): PyTorch cannot use it"
            if not facts.get("gpu"):
                return "no NVIDIA GPU here"
            if not facts.get("cuda_available"):
                why = facts.get("torch_error") or "torch.cuda.is_available() is False"
                return "no PyTorch with CUDA on this python3 (%s)" % why
        elif n == "nvcc":
            if not os.path.exists(os.path.join(bundle, "bin", "enforce_cudart")) and \
                    not facts.get("nvcc"):
                return "no nvcc here and no enforce_cudart in the bundle"
    return None


# ---- the checks --------------------------------------------------------------------------------


@check("bundle", (), 60)
def check_bundle(c: Ctx) -> str:
    """The bundle's programs and libraries load here, with nothing from a build tree."""
    v = c.gpum("--version").stdout.strip()
    c.fig("gpum_version", v)
    c.fig("gpumd_version", c.run([c.gpumd_bin, "--version"]).stdout.strip())
    ldd = shutil.which("ldd")
    if ldd:
        elves = [p for p in glob.glob(os.path.join(c.bundle, "bin", "*")) +
                 glob.glob(os.path.join(c.bundle, "sbin", "*")) +
                 glob.glob(os.path.join(c.bundle, "lib", "*.so*")) if not os.path.islink(p)]
        for e in elves:
            p = c.run([ldd, e], check=False)
            missing = [l.strip() for l in p.stdout.splitlines() if "not found" in l]
            c.expect(not missing, "%s: %s" % (os.path.relpath(e, c.bundle), "; ".join(missing)))
    p = c.run([sys.executable, "-c", "import gpum; print(gpum.library_path)"])
    libpath = p.stdout.splitlines()[0]
    c.expect(os.path.realpath(libpath).startswith(os.path.realpath(c.bundle)),
             "the Python package loaded %s, not the bundle's libgpum" % libpath)
    return "%s; its libraries load (ldd), Python loads %s" % (v, os.path.relpath(libpath, c.bundle))


def status_json(c: Ctx, env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    return c.gpum_json("status", "--json", env=env)


@check("device", ("gpu",), 90)
def check_device(c: Ctx) -> str:
    """gpum status --json against nvidia-smi, values that move bracketed by two readings."""
    fields = ["index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used",
              "temperature.gpu", "power.draw", "utilization.gpu", "utilization.memory",
              "clocks.sm", "clocks.mem", "driver_version"]
    before = smi_query(fields)
    env = dict(os.environ, GPUM_BACKEND="nvml")
    st = status_json(c, env)
    after = smi_query(fields)
    if not before or not after:
        raise Fail("nvidia-smi --query-gpu failed")
    reserved = {r["uuid"]: num(r["memory.reserved"]) for r in smi_query(["uuid", "memory.reserved"])}
    c.expect(st.get("backend") == "nvml" and not st.get("simulated"),
             "gpum used backend %s (simulated %s), not the real NVML" % (st.get("backend"),
                                                                          st.get("simulated")))
    c.expect(st.get("driver_version") == before[0]["driver_version"],
             "driver version: gpum %s, nvidia-smi %s" % (st.get("driver_version"),
                                                         before[0]["driver_version"]))
    devs = {d.get("uuid"): d for d in st.get("devices", [])}
    c.expect(len(devs) == len(before), "gpum sees %d devices, nvidia-smi %d" % (len(devs),
                                                                              len(before)))
    for b, a in zip(before, after):
        u = b["uuid"]
        d = devs.get(u)
        if not c.expect(d is not None, "nvidia-smi's %s (%s) is not in gpum status" % (u, b["name"])):
            continue
        i = b["index"]
        mem = d.get("memory") or {}
        f = {
            "name": (d.get("name"), b["name"]),
            "pci_bus_id": (d.get("pci_bus_id"), b["pci.bus_id"]),
            "memory_total_mib": (mem.get("total", 0) / MiB, num(b["memory.total"])),
            "memory_used_mib": (mem.get("used", 0) / MiB, num(b["memory.used"]), num(a["memory.used"])),
            "driver_reserved_mib": ((mem.get("driver_reserved") or 0) / MiB, reserved.get(u)),
            "temperature_c": (d.get("temperature_c"), num(b["temperature.gpu"]), num(a["temperature.gpu"])),
            "power_w": (d.get("power_w"), num(b["power.draw"]), num(a["power.draw"])),
            "utilization_gpu": ((d.get("utilization") or {}).get("gpu"), num(b["utilization.gpu"]), num(a["utilization.gpu"])),
            "utilization_memory": ((d.get("utilization") or {}).get("memory"), num(b["utilization.memory"]), num(a["utilization.memory"])),
            "clocks_sm_mhz": ((d.get("clocks") or {}).get("sm_mhz"), num(b["clocks.sm"]), num(a["clocks.sm"])),
            "clocks_memory_mhz": ((d.get("clocks") or {}).get("memory_mhz"), num(b["clocks.mem"]), num(a["clocks.mem"])),
        }
        c.fig("gpu%s" % i, {k: list(v) for k, v in f.items()})
        c.expect(d.get("name") == b["name"], "GPU %s name: gpum %r, nvidia-smi %r" % (i, d.get("name"), b["name"]))
        c.expect((d.get("pci_bus_id") or "").lower() == b["pci.bus_id"].lower(),
                 "GPU %s PCI bus id: gpum %s, nvidia-smi %s" % (i, d.get("pci_bus_id"), b["pci.bus_id"]))
        g, s = f["memory_total_mib"][0], f["memory_total_mib"][1]
        c.expect(s is not None and abs(g - s) <= 1,
                 "GPU %s memory total: gpum %.1f MiB, nvidia-smi %s MiB" % (i, g, s))
        g, s1, s2 = f["memory_used_mib"]
        if not c.expect(within(g, s1, s2, 2),
                        "GPU %s memory used: gpum %.1f MiB, nvidia-smi %s..%s MiB" % (i, g, s1, s2)):
            if f["driver_reserved_mib"][0] and within(g - f["driver_reserved_mib"][0], s1, s2, 2):
                c.note("gpum's used includes the driver's reserved memory, nvidia-smi's does not")
        g, s = f["driver_reserved_mib"]
        if s is not None:
            c.expect(abs(g - s) <= 1, "GPU %s driver reserved: gpum %.1f MiB, nvidia-smi %s MiB" % (i, g, s))
        checks = [("temperature_c", 2), ("utilization_gpu", 10), ("utilization_memory", 10)]
        for key, tol in checks:
            g, s1, s2 = f[key]
            c.expect(within(g, s1, s2, tol), "GPU %s %s: gpum %s, nvidia-smi %s..%s" % (i, key, g, s1, s2))
        for key in ("power_w", "clocks_sm_mhz", "clocks_memory_mhz"):
            g, s1, s2 = f[key]
            tol = 0.15 * max(s1 or 0, s2 or 0) + 5
            c.expect(within(g, s1, s2, tol), "GPU %s %s: gpum %s, nvidia-smi %s..%s" % (i, key, g, s1, s2))
    b = before[0]
    d = devs.get(b["uuid"]) or {}
    return "%d GPU(s): %s, %s MiB, used %s MiB, %s C, %s W: gpum agrees" % (
        len(before), b["name"], b["memory.total"], b["memory.used"], b["temperature.gpu"],
        b["power.draw"]) if not c.fails else "%d mismatches" % len(c.fails)


def cudart_program(c: Ctx) -> str:
    """The CUDA runtime test program: the bundle's, else built here with nvcc."""
    exe = os.path.join(c.bundle, "bin", "enforce_cudart")
    if os.path.exists(exe):
        return exe
    nv = nvcc_path()
    if not nv:
        raise Skip("no nvcc and no enforce_cudart in the bundle")
    exe = os.path.join(c.work, "enforce_cudart")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "enforce_cudart.cu")
    c.run([nv, "-O2", "-o", exe, src], timeout=180)
    return exe


@check("processes", ("gpu", "nvcc"), 90)
def check_processes(c: Ctx) -> str:
    """The per-process memory gpum reports for a process holding 1 GiB, against nvidia-smi."""
    exe = cudart_program(c)
    p = subprocess.Popen([exe, "hold", str(GiB)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 60)
        line = p.stdout.readline() if ready else ""
        if not line.startswith("ready"):
            raise Fail("the holding process did not start: %s %s" % (line, tail(p.stderr.read() if p.poll() is not None else "")))
        pid = p.pid
        smi_mib = gpum_b = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            apps = smi_query(["pid", "used_memory"], "--query-compute-apps")
            smi_mib = next((num(a["used_memory"]) for a in apps if a["pid"] == str(pid)), None)
            st = status_json(c, dict(os.environ, GPUM_BACKEND="nvml"))
            procs = [q for d in st["devices"] for q in (d.get("processes") or [])]
            gpum_b = next((q.get("memory") for q in procs if q.get("pid") == pid), None)
            if smi_mib is not None and gpum_b is not None:
                break
            time.sleep(0.5)
        c.fig("pid", pid)
        c.fig("nvidia_smi_mib", smi_mib)
        c.fig("gpum_bytes", gpum_b)
        if not c.expect(smi_mib is not None, "nvidia-smi does not list pid %d" % pid):
            raise Fail("; ".join(c.fails))
        if not c.expect(gpum_b is not None, "gpum status does not list pid %d (or no memory)" % pid):
            raise Fail("; ".join(c.fails))
        c.expect(abs(gpum_b / MiB - smi_mib) <= 1,
                 "pid %d: gpum %.1f MiB, nvidia-smi %s MiB" % (pid, gpum_b / MiB, smi_mib))
        c.expect(gpum_b >= GiB, "pid %d holds 1 GiB, gpum says %d bytes" % (pid, gpum_b))
        c.fig("context_overhead_mib", gpum_b / MiB - 1024)
        return "a process holding 1 GiB: gpum %.0f MiB, nvidia-smi %.0f MiB (%.0f MiB beside the 1 GiB: the CUDA context)" % (
            gpum_b / MiB, smi_mib, gpum_b / MiB - 1024)
    finally:
        try:
            p.stdin.close()
            p.wait(timeout=20)
        except (subprocess.TimeoutExpired, BrokenPipeError):
            p.kill()


BUSY_TORCH = r"""
import sys, time, torch
x = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
"""

PROCESS_UTIL = r"""
import ctypes as c, json, sys
from gpum._lib import lib
class U(c.Structure):
    _fields_ = [("pid", c.c_uint), ("timestamp_us", c.c_uint64), ("sm_util", c.c_uint),
                ("mem_util", c.c_uint), ("enc_util", c.c_uint), ("dec_util", c.c_uint)]
sess = c.c_void_p()
rc = lib.gpum_device_open(None, c.byref(sess))
if rc != 0:
    print(json.dumps({"rc": rc})); sys.exit(0)
arr = (U * 64)()
n = c.c_size_t()
rc = lib.gpum_device_process_util(sess, 0, c.c_uint64(0), arr, c.c_size_t(64), c.byref(n))
print(json.dumps({"rc": rc, "samples": [{"pid": u.pid, "sm": u.sm_util, "mem": u.mem_util}
                                        for u in arr[:min(n.value, 64)]]}))
lib.gpum_device_close(sess)
"""


@check("process-util", ("gpu", "torch"), 60)
def check_process_util(c: Ctx) -> str:
    """Per-process GPU utilisation (gpum top's GPU% column) on the real driver: a PyTorch
    process multiplying matrices is given a share by gpum_device_process_util
    (nvmlDeviceGetProcessUtilization), beside nvidia-smi pmon's for the same pid."""
    p = subprocess.Popen([sys.executable, "-c", BUSY_TORCH, "30"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 60)
        line = p.stdout.readline() if ready else ""
        if not line.startswith("ready"):
            raise Fail("the busy process did not start: %s" % tail(p.stderr.read() if p.poll() is not None else line))
        env = dict(os.environ, GPUM_BACKEND="nvml")
        gpum_sm = smi_sm = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (gpum_sm is None or smi_sm is None):
            r = c.run([sys.executable, "-c", PROCESS_UTIL], env=env)
            out = json.loads(r.stdout.strip().splitlines()[-1])
            if out["rc"] != 0:
                raise Fail("gpum_device_process_util returned %d" % out["rc"])
            gpum_sm = next((s["sm"] for s in out["samples"] if s["pid"] == p.pid), gpum_sm)
            pm = smi("pmon", "-c", "1", "-s", "u") or ""
            for row in pm.splitlines():
                f = row.split()
                if len(f) > 4 and not row.startswith("#") and f[1] == str(p.pid) and f[3] != "-":
                    smi_sm = float(f[3])
            time.sleep(0.5)
        c.fig("pid", p.pid)
        c.fig("gpum_sm_percent", gpum_sm)
        c.fig("nvidia_smi_pmon_sm_percent", smi_sm)
        c.expect(gpum_sm is not None and gpum_sm > 0,
                 "gpum gave no utilisation sample for the busy pid %d" % p.pid)
        c.expect(smi_sm is None or smi_sm > 0, "nvidia-smi pmon says sm 0 for the busy pid")
        if c.fails:
            raise Fail("; ".join(c.fails))
        return "a PyTorch process multiplying matrices: gpum SM %s%%, nvidia-smi pmon SM %s%%" % (
            gpum_sm, "-" if smi_sm is None else "%.0f" % smi_sm)
    finally:
        p.kill()
        p.wait(timeout=20)


@check("shim-cudart", ("gpu", "nvcc"), 150)
def check_shim_cudart(c: Ctx) -> str:
    """A CUDA runtime program under the shim, fenced at 1 GiB (tests/gpu/enforce_cudart.cu)."""
    exe = cudart_program(c)
    shm_before = set(glob.glob("/dev/shm/gpum*"))
    p = c.run([exe, str(GiB)], env=dict(os.environ, **c.shim_env(GiB)), timeout=120, check=False)
    for line in p.stdout.splitlines():
        k, _, v = line.partition(" ")
        if v.isdigit():
            c.fig(k, int(v))
    c.expect(p.returncode == 0 and p.stdout.strip().endswith("ok"),
             "enforce_cudart exited %d: %s" % (p.returncode, tail(p.stderr, 1500)))
    left = set(glob.glob("/dev/shm/gpum*")) - shm_before
    c.expect(not left, "fence regions left in /dev/shm: %s" % sorted(left))
    return ("cudaMalloc, cudaMallocAsync, cudaMallocManaged and cuMemCreate (entry point, dlsym) "
            "stop at 1 GiB with the runtime's own error")


@check("shim-torch", ("torch",), 150)
def check_shim_torch(c: Ctx) -> str:
    """PyTorch under the shim at 2 GiB: mem_get_info, its OOM error, recovery; also with
    expandable segments (cuMemCreate)."""
    out = []
    for conf in ("", "expandable_segments:True"):
        env = dict(c.shim_env(2 * GiB), PYTORCH_CUDA_ALLOC_CONF=conf)
        r = c.child("shim-torch", env)
        tag = "expandable" if conf else "default"
        c.fig(tag, {k: v for k, v in r.items() if not k.startswith("_")})
        c.expect(r["_rc"] == 0 and not r.get("errors"),
                 "%s allocator: %s %s" % (tag, "; ".join(r.get("errors", [])), r["_stderr"]))
        out.append(tag)
    return "torch.cuda.mem_get_info() says 2 GiB, 3 GiB raises torch.cuda.OutOfMemoryError, 1.5 GiB fits after (%s allocator)" % " and ".join(out)


def child_shim_torch() -> Dict[str, Any]:
    import torch
    errors = []
    free, total = torch.cuda.mem_get_info()
    if total != 2 * GiB:
        errors.append("mem_get_info total %d, not 2 GiB" % total)
    x = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    oom = None
    try:
        torch.empty(3 * GiB, dtype=torch.uint8, device="cuda")
        errors.append("a 3 GiB tensor was allocated past the 2 GiB limit")
    except torch.cuda.OutOfMemoryError as e:
        oom = str(e).splitlines()[0][:300]
    del x
    torch.cuda.empty_cache()
    try:
        z = torch.full((3 * GiB // 2,), 7, dtype=torch.uint8, device="cuda")
        ok = int(z[-1].item()) == 7
        if not ok:
            errors.append("the 1.5 GiB tensor does not hold what was written")
    except torch.cuda.OutOfMemoryError as e:
        errors.append("1.5 GiB did not fit after the OOM: %s" % str(e).splitlines()[0])
    return {"total": total, "free": free, "oom_message": oom, "errors": errors}


@check("torch-allocator", ("torch",), 120)
def check_torch_allocator(c: Ctx) -> str:
    """gpum's pool as PyTorch's allocator (gpum.torch.use_gpum_allocator) within 2 GiB: a
    refusal is RuntimeError("CUDA out of memory..."), as PyTorch lets a pluggable allocator
    report it (never a tensor without memory)."""
    r = c.child("torch-allocator", {"GPUM_MEM_LIMIT": str(2 * GiB)})
    c.fig("result", {k: v for k, v in r.items() if not k.startswith("_")})
    c.expect(r["_rc"] == 0 and not r.get("errors"),
             "; ".join(r.get("errors", [])) + " " + r["_stderr"])
    return ("tensors come from gpum's pool (reserved %s MiB), 3 GiB raises RuntimeError('CUDA out "
            "of memory...'), freed memory is reused, a matmul through it matches the CPU, the "
            "adaptive runner shrinks on its refusals" % (r.get("reserved_after_1gib", 0) // MiB))


def child_torch_allocator() -> Dict[str, Any]:
    import torch
    import gpum.torch as gt
    errors = []
    gt.use_gpum_allocator()

    def stats() -> Any:
        return gt.pool_stats(0)

    x = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    s = stats()
    res1 = s.reserved_bytes
    if s.allocated_bytes < GiB:
        errors.append("the pool's allocated bytes %d after a 1 GiB tensor" % s.allocated_bytes)
    oom = None
    try:
        t3 = torch.empty(3 * GiB, dtype=torch.uint8, device="cuda")
        errors.append("a 3 GiB tensor came from a pool limited to 2 GiB (data_ptr %#x)" % t3.data_ptr())
    except RuntimeError as e:  # a pluggable allocator cannot raise OutOfMemoryError
        oom = str(e).splitlines()[0][:400]
        if not oom.startswith("CUDA out of memory"):
            errors.append("3 GiB raised RuntimeError without CUDA's out-of-memory text: " + oom)
    del x
    z = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    res2 = stats().reserved_bytes
    if res2 > res1:
        errors.append("freed memory was not reused: reserved %d -> %d" % (res1, res2))
    del z
    a = torch.randn(512, 512, device="cuda")
    b = torch.randn(512, 512, device="cuda")
    got = (a @ b).cpu()
    want = a.cpu() @ b.cpu()
    err = float((got - want).abs().max() / want.abs().max())
    if err > 1e-2:  # relative: TF32 may be on
        errors.append("a matmul through the pool differs from the CPU's by %g" % err)
    # The adaptive runner counts the pluggable allocator's refusal as an out-of-memory error.
    import gpum
    seen: List[int] = []

    def step(info: Any) -> None:
        t = torch.empty(info.count * 256 * MiB, dtype=torch.uint8, device="cuda")
        seen.extend(info.indices)
        del t

    st = gpum.adaptive(40, step, batch_size=16)
    if sorted(seen) != list(range(40)) or st.ooms == 0 or st.largest > 7:
        errors.append("adaptive over the pool: %d items run, %d OOMs, largest batch %d" % (
            len(seen), st.ooms, st.largest))
    return {"reserved_after_1gib": res1, "reserved_after_reuse": res2, "matmul_max_error": err,
            "oom_message": oom, "adaptive_ooms": st.ooms, "adaptive_largest": st.largest,
            "errors": errors}


class Driver:
    """The CUDA driver through ctypes: the device's free memory and, on a real GPU, writing and
    reading device memory (the simulated driver has no memory behind its addresses)."""

    def __init__(self, sim: bool, bundle: str) -> None:
        path = os.path.join(bundle, "lib", "libgpum_sim.so") if sim else "libcuda.so.1"
        self.lib = ctypes.CDLL(path)
        self.real = not sim
        L = self.lib
        ok = L.cuInit(0)
        if ok != 0:
            raise Fail("cuInit: CUresult %d" % ok)
        dev = ctypes.c_int()
        ctx = ctypes.c_void_p()
        if L.cuDeviceGet(ctypes.byref(dev), 0) or L.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) \
                or L.cuCtxSetCurrent(ctx):
            raise Fail("cannot make device 0's primary context current")
        self.dev, self.ctx = dev, ctx

    def free(self) -> int:
        f, t = ctypes.c_size_t(), ctypes.c_size_t()
        r = self.lib.cuMemGetInfo_v2(ctypes.byref(f), ctypes.byref(t))
        if r:
            raise Fail("cuMemGetInfo_v2: CUresult %d" % r)
        return f.value

    def fill_and_read(self, ptr: int, n: int, value: int) -> bool:
        """memset [ptr, ptr+n) to value, read back its first, middle and last bytes."""
        if not self.real:
            return True
        L = self.lib
        if L.cuMemsetD8_v2(ctypes.c_uint64(ptr), ctypes.c_ubyte(value), ctypes.c_size_t(n)) or \
                L.cuCtxSynchronize():
            return False
        for off in (0, n // 2, n - 1):
            b = ctypes.c_ubyte()
            if L.cuMemcpyDtoH_v2(ctypes.byref(b), ctypes.c_uint64(ptr + off), ctypes.c_size_t(1)):
                return False
            if b.value != value:
                return False
        return True


@check("pool", ("device",), 120)
def check_pool(c: Ctx) -> str:
    """gpum's pool on the driver's memory: the cuda and cuda-vmm sources allocate, cache, trim
    (the device's free memory follows), grow in place (expandable segments), and report OOM."""
    import gpum
    drv = Driver(c.sim, c.bundle)
    slack = 64 * MiB  # what the driver may take beside an allocation (page tables, rounding)
    for src in ("cuda", "cuda-vmm"):
        free0 = drv.free()
        with gpum.Pool(src, device=0, expandable_segments=(src == "cuda-vmm")) as p:
            a = p.alloc(GiB)
            free1 = drv.free()
            c.fig(src + "_device_bytes_for_1gib", free0 - free1)
            c.expect(GiB <= free0 - free1 <= GiB + slack,
                     "%s: 1 GiB from the pool took %d bytes of the device" % (src, free0 - free1))
            c.expect(drv.fill_and_read(a, GiB, 0x5A), "%s: the 1 GiB block cannot be written and read back" % src)
            p.free(a)
            s = p.stats()
            c.expect(s.allocated_bytes == 0 and s.reserved_bytes >= GiB,
                     "%s: after free, allocated %d reserved %d (expected 0 and cached)" % (src, s.allocated_bytes, s.reserved_bytes))
            c.expect(abs(drv.free() - free1) <= slack, "%s: a cached free changed the device's free memory" % src)
            released = p.trim(0)
            free2 = drv.free()
            c.fig(src + "_trim_released", released)
            c.expect(released >= GiB, "%s: trim released %d bytes" % (src, released))
            c.expect(abs(free2 - free0) <= slack,
                     "%s: after trim the device has %d bytes free, %d before" % (src, free2, free0))
            if src == "cuda-vmm":
                blocks = [p.alloc(256 * MiB) for _ in range(4)]
                s = p.stats()
                c.fig("vmm_segments_after_4x256mib", s.segments)
                c.fig("vmm_reserved_after_4x256mib", s.reserved_bytes)
                c.expect(s.segments == 1, "cuda-vmm expandable: 4 blocks of 256 MiB took %d segments, not 1 grown in place" % s.segments)
                lo = min(blocks)
                contiguous = sorted(blocks) == [lo + i * 256 * MiB for i in range(4)]
                c.fig("vmm_contiguous", contiguous)
                if contiguous:
                    c.expect(drv.fill_and_read(lo, GiB, 0x33),
                             "cuda-vmm: one memset across the segment's growth boundaries failed")
                for b in sorted(blocks)[2:]:
                    p.free(b)
                before = drv.free()
                rel = p.trim(0)
                c.fig("vmm_tail_released", rel)
                c.expect(rel >= 512 * MiB and drv.free() - before >= 512 * MiB - slack,
                         "cuda-vmm: trimming the free tail released %d bytes (%d on the device)" % (rel, drv.free() - before))
                c.expect(drv.fill_and_read(min(blocks), 512 * MiB, 0x44),
                         "cuda-vmm: the blocks kept are not usable after the tail was unmapped")
                for b in sorted(blocks)[:2]:
                    p.free(b)
            try:
                p.alloc(4 * drv.free())
                c.expect(False, "%s: an allocation of 4x the device's free memory succeeded" % src)
            except gpum.OutOfMemory as e:
                c.fig(src + "_oom_message", str(e)[:400])
            b = p.alloc(64 * MiB)
            p.free(b)
        c.expect(abs(drv.free() - free0) <= slack, "%s: closing the pool did not give everything back" % src)
    return "cuda and cuda-vmm: 1 GiB taken from the device and given back by trim; 4x256 MiB grew one segment in place (%s), its tail unmapped; OOM raised, pool usable after" % (
        "one memset across it" if c.figures.get("vmm_contiguous") and drv.real else "addresses only")


TORCH_REPLAY = "torch-replay"


def child_torch_replay(paths: List[str]) -> Dict[str, Any]:
    """Each trace replayed through PyTorch's caching allocator (torch.empty of each size, freed
    by dropping it), its peaks reset and its cache emptied between traces."""
    import torch
    out = {}
    for path in paths:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        live = {}
        ops = 0
        t0 = time.perf_counter_ns()
        with open(path) as f:
            next(f)
            for line in f:
                _, _, action, ptr, size, _ = line.strip().split(",")
                ops += 1
                if action == "allocate":
                    live[ptr] = torch.empty(int(size), dtype=torch.uint8, device="cuda")
                else:
                    live.pop(ptr, None)
        torch.cuda.synchronize()
        ns = (time.perf_counter_ns() - t0) / max(ops, 1)
        out[path] = {"peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                     "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                     "ns_per_op": round(ns, 1), "ops": ops}
        live.clear()
    return {"traces": out}


@check("pool-replay", ("device",), 200)
def check_pool_replay(c: Ctx) -> str:
    """The traces in the bundle replayed on the driver's memory through gpum's pool (cuda, and
    cuda-vmm with expandable segments) beside PyTorch's caching allocator on the same trace."""
    traces = sorted(glob.glob(os.path.join(c.bundle, "traces", "*.csv")))
    if not traces:
        raise Skip("no traces in the bundle")
    torch_rows: Dict[str, Dict[str, Any]] = {}
    if not c.sim and c.facts.get("cuda_available"):
        for label, conf in (("torch", ""), ("torch_expandable", "expandable_segments:True")):
            r = c.child(TORCH_REPLAY, {"PYTORCH_CUDA_ALLOC_CONF": conf}, args=tuple(traces))
            c.expect(r["_rc"] == 0 and "traces" in r, "%s replay failed: %s" % (label, r["_stderr"]))
            for tr, v in r.get("traces", {}).items():
                torch_rows.setdefault(tr, {})[label] = v
    summary = []
    for tr in traces:
        name = os.path.basename(tr)[:-4]
        row: Dict[str, Any] = dict(torch_rows.get(tr, {}))
        for label, extra in (("gpum_cuda", ["--source", "cuda"]),
                             ("gpum_vmm_expandable", ["--source", "cuda-vmm", "--expandable-segments"])):
            p = c.gpum("pool", "replay", tr, "--json", *extra, timeout=120)
            r = json.loads(p.stdout)
            row[label] = {k: r.get(k) for k in ("peak_live_bytes", "peak_allocated_bytes",
                                                 "peak_reserved_bytes", "ooms", "segments_peak",
                                                 "ns_per_op")}
            c.expect(r.get("ooms") == 0, "%s %s: %s OOMs" % (name, label, r.get("ooms")))
        c.fig(name, row)
        g = row["gpum_cuda"]["peak_reserved_bytes"] or 0
        t = (row.get("torch") or {}).get("peak_reserved_bytes")
        summary.append("%s %.0f MiB%s" % (name, g / MiB, " (torch %.0f MiB)" % (t / MiB) if t else ""))
    return "peak reserved, gpum cuda: " + ", ".join(summary)


def estimator_case(name: str, b: int) -> Dict[str, Any]:
    """One model at batch b: each component measured through PyTorch's allocator during two
    training steps (the first creates the optimizer's state, the second is the steady state
    whose peak counts), beside gpum's estimate of the same model, batch and precision."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import gpum
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import estimate_models as em

    dev = torch.device("cuda")
    torch.cuda.empty_cache()
    base0 = torch.cuda.memory_allocated()
    src = "estimate_models"
    if name == "resnet50":
        try:
            import torchvision
            model, src = torchvision.models.resnet50(weights=None), "torchvision"
        except ImportError:
            model = em.preset("resnet50", "cpu")
        model = model.to(dev)
        x = torch.randn(b, 3, 224, 224, device=dev)
        y = torch.randint(0, 1000, (b,), device=dev)
        loss_fn = lambda: F.cross_entropy(model(x), y)  # noqa: E731
    elif name == "gpt2":
        model = em.preset("gpt2", dev)
        ids = torch.randint(0, 50257, (b, 1024), device=dev)
        loss_fn = lambda: em.loss_of(model, model.cfg, ids)  # noqa: E731
    else:
        model = nn.LSTM(1024, 1024, 2, device=dev)
        x = torch.randn(128, b, 1024, device=dev)
        loss_fn = lambda: model(x)[0].sum()  # noqa: E731
    model.train()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters())
    base = torch.cuda.memory_allocated()
    loss = loss_fn()
    acts = torch.cuda.memory_allocated() - base
    loss.backward()
    del loss
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters()
                if p.grad is not None)
    opt.step()
    state = sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
                if torch.is_tensor(v) and v.is_cuda)
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    loss = loss_fn()
    loss.backward()
    del loss
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base0
    reserved_peak = torch.cuda.max_memory_reserved()
    proc = process_memory(os.getpid())
    context = proc - torch.cuda.memory_reserved() if proc else None
    e = gpum.estimate(name, mode="training", batch=b, precision="fp32", optimizer="adamw")
    measured = {"weights": weights, "gradients": grads, "optimizer": state, "activations": acts,
                "peak_allocated": peak, "peak_reserved": reserved_peak, "context": context,
                "process_peak": (reserved_peak + context) if context else None}
    estimated = {"weights": e.weights, "gradients": e.gradients, "optimizer": e.optimizer,
                 "activations": e.activations, "workspace": e.workspace, "context": e.context,
                 "allocator": e.allocator, "total": e.total,
                 "peak_allocated": e.weights + e.gradients + e.optimizer + e.activations +
                 e.workspace}
    err = {}
    for k in ("weights", "gradients", "optimizer", "activations", "peak_allocated", "context"):
        if measured.get(k):
            err[k] = round(100.0 * (estimated[k] - measured[k]) / measured[k], 1)
    if measured["process_peak"]:
        err["total"] = round(100.0 * (e.total - measured["process_peak"]) /
                             measured["process_peak"], 1)
    return {"measured": measured, "estimated": estimated, "error_pct": err, "model_from": src}


def child_estimator() -> Dict[str, Any]:
    import gc
    import torch
    out = {}
    for name, batches in (("resnet50", (32, 64)), ("gpt2", (4, 8)), ("lstm-2x1024", (32, 64))):
        for b in batches:
            key = "%s b=%d" % (name, b)
            try:
                out[key] = estimator_case(name, b)
            except Exception as e:  # one model that breaks does not hide the others
                out[key] = {"error": "%s: %s" % (type(e).__name__, str(e)[:400])}
            gc.collect()
            torch.cuda.empty_cache()
    return {"cases": out}


def process_memory(pid: int) -> Optional[int]:
    """What the driver says pid holds on the GPU, bytes (nvidia-smi's MiB)."""
    for a in smi_query(["pid", "used_memory"], "--query-compute-apps"):
        if a["pid"] == str(pid):
            v = num(a["used_memory"])
            return int(v * MiB) if v is not None else None
    return None


@check("estimator", ("torch",), 240)
def check_estimator(c: Ctx) -> str:
    """The estimator against one training step of resnet50, a GPT-2-small decoder and an LSTM,
    two batch sizes each: each component and the total beside what PyTorch measured."""
    r = c.child("estimator", {}, timeout=220)
    if r["_rc"] != 0 or "cases" not in r:
        raise Fail("the estimator child failed: " + r["_stderr"])
    worst = []
    for k, v in r["cases"].items():
        c.fig(k, v)
        if not c.expect("error" not in v, "%s: %s" % (k, v.get("error"))):
            continue
        e = v["error_pct"]
        # The estimate must cover what the process used (else a reservation of it OOMs) and
        # not waste more than half again as much.
        tot = e.get("total")
        c.expect(tot is None or 0 <= tot <= 50,
                 "%s: the estimate's total is %+.1f%% of the process's peak (want 0..+50%%)" % (k, tot))
        pk = e.get("peak_allocated")
        c.expect(pk is None or pk >= -5,
                 "%s: weights+gradients+optimizer+activations+workspace is %+.1f%% of PyTorch's peak allocated" % (k, pk))
        worst.append("%s %+.0f%%" % (k, tot if tot is not None else float("nan")))
    return "total vs the process's peak: " + ", ".join(worst)


def child_adaptive(limit: int) -> Dict[str, Any]:
    import torch
    import torch.nn.functional as F
    import gpum
    import gpum.torch as gt
    try:
        import torchvision
        model = torchvision.models.resnet50(weights=None).cuda()
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import estimate_models as em
        model = em.preset("resnet50", "cpu").cuda()
    img, n, start = 160, 1536, 512
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def train(k: int) -> None:
        x = torch.randn(k, 3, img, img, device="cuda")
        y = torch.randint(0, 1000, (k,), device="cuda")
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    seen: List[int] = []

    def step(info: Any) -> None:
        opt.zero_grad(set_to_none=True)
        train(info.count)
        seen.extend(info.indices)

    t0 = time.monotonic()
    stats = gpum.adaptive(n, step, batch_size=start, max_batch=start, memory=gt.cuda_memory())
    run_s = time.monotonic() - t0
    counts: Dict[int, int] = {}
    for i in seen:
        counts[i] = counts.get(i, 0) + 1
    missing = [i for i in range(n) if i not in counts]
    repeated = [i for i, k in counts.items() if k > 1]
    # The largest batch that fits, found by bisection in the same state (model, optimizer).
    lo, hi = 1, start + 1
    probes = 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probes += 1
        try:
            train(mid)
            lo = mid
        except torch.cuda.OutOfMemoryError:
            hi = mid
        opt.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
    return {"items": n, "start_batch": start, "missing": len(missing), "repeated": len(repeated),
            "final_batch": stats.batch_size, "largest_run": stats.largest,
            "smallest_run": stats.smallest, "ooms": stats.ooms, "retries": stats.retries,
            "steps": stats.steps, "trajectory": [list(t) for t in stats.trajectory][:40],
            "largest_fit": lo, "probes": probes, "run_seconds": round(run_s, 2),
            "limit": limit, "mem_get_info_total": torch.cuda.mem_get_info()[1]}


@check("adaptive", ("torch",), 240)
def check_adaptive(c: Ctx) -> str:
    """The adaptive runner with real OOMs: resnet50 at batch 512 under a 4 GiB fence; every item
    once; the batch it settles on beside the largest that fits (bisection)."""
    limit = 4 * GiB
    r = c.child("adaptive", c.shim_env(limit), timeout=220, args=(str(limit),))
    if r["_rc"] != 0 or "items" not in r:
        raise Fail("the adaptive child failed: " + r["_stderr"])
    for k, v in r.items():
        if not k.startswith("_"):
            c.fig(k, v)
    c.expect(r["mem_get_info_total"] == limit, "under the fence mem_get_info says %d" % r["mem_get_info_total"])
    c.expect(r["missing"] == 0 and r["repeated"] == 0,
             "%d items never run, %d run twice" % (r["missing"], r["repeated"]))
    c.expect(r["ooms"] > 0, "no OOM happened: batch %d fit in 4 GiB" % r["start_batch"])
    settled = settled_batch(r["trajectory"], r["items"])
    c.fig("settled_batch", settled)
    ratio = settled / max(r["largest_fit"], 1)
    c.fig("settled_over_largest_fit", round(ratio, 3))
    c.expect(settled <= r["largest_fit"] and ratio >= 0.5,
             "settled on batch %d, the largest that fits is %d" % (settled, r["largest_fit"]))
    return "%d items once each; %d OOMs; settled on batch %d, the largest that fits is %d (%.0f%%)" % (
        r["items"], r["ooms"], settled, r["largest_fit"], 100 * ratio)


def settled_batch(trajectory: List[List[int]], items: int) -> int:
    """The batch size the runner ran the most items at (from its trajectory of (first item,
    size) changes; the last change may be only the short tail of the run)."""
    best, best_items = 0, -1
    for i, (first, size) in enumerate(trajectory):
        end = trajectory[i + 1][0] if i + 1 < len(trajectory) else items
        if end - first > best_items:
            best, best_items = size, end - first
    return best


# ---- gpumd ---------------------------------------------------------------------------------


class Gpumd:
    def __init__(self, c: Ctx) -> None:
        self.c = c
        self.sock = os.path.join(c.work, "gpumd.sock")
        self.state = os.path.join(c.work, "state")
        self.env = dict(os.environ, GPUM_SOCKET=self.sock, GPUM_STATE_DIR=self.state)
        if not c.sim:
            self.env["GPUM_BACKEND"] = "nvml"
        self.p: Optional[subprocess.Popen] = None
        self.http = ""

    def start(self) -> None:
        self.err = open(os.path.join(self.c.work, "gpumd.err"), "a")
        self.p = subprocess.Popen([self.c.gpumd_bin, "--http-listen", "127.0.0.1:0",
                                   "--log-level", "info"], stdout=subprocess.PIPE,
                                  stderr=self.err, env=self.env, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.p.stdout], [], [], 1)
            if r:
                line = self.p.stdout.readline()
                if line.startswith("gpumd ready"):
                    m = re.search(r"http=(\S+)", line)
                    self.http = m.group(1) if m else ""
                    print(line.strip(), flush=True)
                    return
                if not line and self.p.poll() is not None:
                    break
        self.err.flush()
        with open(self.err.name) as f:
            raise Fail("gpumd did not get ready: " + tail(f.read(), 1500))

    def stop(self, sig: int) -> int:
        if not self.p:
            return 0
        self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        self.p = None
        return rc

    def get(self, path: str) -> Tuple[int, str]:
        try:
            with urllib.request.urlopen("http://%s%s" % (self.http, path), timeout=20) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")


@check("gpumd", ("device",), 150)
def check_gpumd(c: Ctx) -> str:
    """gpumd on the GPU: start, reserve, status and jobs, /metrics (promtool when carried),
    SIGKILL and restart with the reservation kept, gpum run --enforce with PyTorch."""
    d = Gpumd(c)
    d.start()
    try:
        st = c.gpum_json("status", "--json", env=d.env)
        g = st.get("gpumd")
        if not g:
            raise Fail("gpum status shows no gpumd")
        for dev in g["devices"]:
            m = dev["memory"]
            c.fig("gpu%d" % dev["index"], {"total": m.get("total"), "driver_reserved": m.get("driver_reserved"),
                                          "capacity": dev.get("capacity"), "used": m.get("used")})
            room = (m.get("total") or 0) - (m.get("driver_reserved") or 0)
            if dev.get("capacity", 0) > room:
                c.note("GPU %d: capacity %d is above total - driver reserved %d (issue 21)" % (dev["index"], dev["capacity"], room))
        p = c.gpum("reserve", "--mem", "4GiB", "--ttl", "10m", "-q", env=d.env)
        rid = p.stdout.strip()
        c.fig("reservation", rid)
        jobs = c.gpum_json("jobs", "--json", env=d.env)["reservations"]
        mine = [j for j in jobs if j["id"] == rid]
        c.expect(mine and mine[0]["state"] == "GRANTED" and mine[0]["bytes_per_gpu"] == 4 * GiB,
                 "gpum jobs does not show %s granted with 4 GiB: %s" % (rid, mine))
        uuid = mine[0]["devices"][0]["uuid"] if mine else ""
        code, metrics = d.get("/metrics")
        c.expect(code == 200, "GET /metrics: %d" % code)
        c.fig("metrics_bytes", len(metrics))
        c.expect('uuid="%s"' % uuid in metrics and 'reservation="%s"' % rid in metrics or rid in metrics,
                 "/metrics names neither the GPU %s nor the reservation %s" % (uuid, rid))
        mpath = os.path.join(c.work, "metrics.txt")
        with open(mpath, "w") as f:
            f.write(metrics)
        pt = promtool(c)
        if pt:
            r = c.run([pt, "check", "metrics"], input=metrics, check=False)
            c.fig("promtool", (r.stdout + r.stderr).strip()[:2000] or "clean")
            c.expect(r.returncode == 0, "promtool check metrics: %s" % tail(r.stdout + r.stderr))
        else:
            c.fig("promtool", "not carried")
        code, body = d.get("/api/v1/reservations")
        c.expect(code == 200 and rid in body, "GET /api/v1/reservations: %d" % code)
        rc = d.stop(signal.SIGKILL)
        c.expect(rc == -signal.SIGKILL, "gpumd did not die of SIGKILL (%s)" % rc)
        d.start()
        jobs = c.gpum_json("jobs", "--json", env=d.env)["reservations"]
        kept = [j for j in jobs if j["id"] == rid]
        c.expect(kept and kept[0]["state"] == "GRANTED" and kept[0]["bytes_per_gpu"] == 4 * GiB
                 and kept[0]["devices"][0]["uuid"] == uuid,
                 "after SIGKILL and restart %s is %s" % (rid, kept))
        ran = ""
        if not c.sim and c.facts.get("cuda_available"):
            snippet = ("import json, os, torch\n"
                       "free, total = torch.cuda.mem_get_info()\n"
                       "try:\n"
                       "    torch.empty(3 << 30, dtype=torch.uint8, device='cuda'); oom = False\n"
                       "except torch.cuda.OutOfMemoryError:\n"
                       "    oom = True\n"
                       "print(json.dumps({'total': total, 'oom': oom, 'cvd': os.environ.get('CUDA_VISIBLE_DEVICES'),"
                       " 'limit': os.environ.get('GPUM_MEM_LIMIT'), 'name': torch.cuda.get_device_name(0)}))\n")
            p = c.gpum("run", "--mem", "2GiB", "--enforce", "--", sys.executable, "-c", snippet,
                       env=d.env, timeout=120, check=False)
            line = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if c.expect(p.returncode == 0 and line, "gpum run --enforce python: exit %d %s" % (p.returncode, tail(p.stderr))):
                r = json.loads(line[-1])
                c.fig("run_enforce", r)
                c.expect(r["total"] == 2 * GiB and r["oom"] and (r["cvd"] or "").startswith("GPU-"),
                         "gpum run --enforce: torch saw %s" % r)
                ran = "; gpum run --mem 2GiB --enforce: PyTorch sees 2 GiB on %s and gets its OOM error past it" % r["cvd"]
        c.gpum("release", rid, env=d.env)
        over = overcommit_part(c, d)
        jobs = c.gpum_json("jobs", "--json", env=d.env)["reservations"]
        c.expect(not [j for j in jobs if j["id"] == rid and j["state"] == "GRANTED"],
                 "%s still granted after release" % rid)
        rc = d.stop(signal.SIGTERM)
        c.expect(rc == 0, "gpumd exited %d on SIGTERM" % rc)
        return "reserve 4 GiB, jobs, status, /metrics (%s), SIGKILL + restart kept %s%s; %s" % (
            "promtool clean" if pt and not [f for f in c.fails if "promtool" in f] else ("promtool: see figures" if pt else "no promtool"),
            rid, ran, over)
    finally:
        d.stop(signal.SIGKILL)


class Holder:
    """Memory held outside gpumd's reservations on every device: the CUDA program's hold mode
    on a GPU (one process per device), gpum sim hold on a simulated node."""

    def __init__(self, c: Ctx, ndev: int, nbytes: int) -> None:
        self.procs: List[subprocess.Popen] = []
        self.pids: List[int] = []
        for i in range(ndev):
            if c.sim:
                p = c.gpum("sim", "hold", os.environ["GPUM_SIM_NODE"], "--device", str(i),
                           "--bytes", str(nbytes))
                self.pids.append(int(p.stdout.strip()))
                continue
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(i))
            q = subprocess.Popen([cudart_program(c), "hold", str(nbytes)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env)
            self.procs.append(q)
            ready, _, _ = select.select([q.stdout], [], [], 60)
            if not ready or not q.stdout.readline().startswith("ready"):
                self.release()
                raise Fail("an outside process could not hold %d bytes on GPU %d" % (nbytes, i))

    def release(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for q in self.procs:
            try:
                q.stdin.close()
                q.wait(timeout=20)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                q.kill()
        # Until the driver no longer counts them: what gpumd reads next.
        deadline = time.monotonic() + 20
        for pid in self.pids:
            while os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        self.pids, self.procs = [], []


def overcommit_part(c: Ctx, d: "Gpumd") -> str:
    """Admission on memory held outside (issue 21): with 8 GiB held outside on every GPU, a
    request for all but 4 GiB of the capacity is refused (gpumd reads the devices afresh); once
    the holders are gone it is granted; held again after the grant, the device is OVERCOMMITTED
    in gpumd's documents and /metrics, with an alert."""
    g = c.gpum_json("status", "--json", env=d.env)["gpumd"]
    devs = g["devices"]
    cap = min(x["capacity"] for x in devs)
    ask = cap - 4 * GiB
    hold = 8 * GiB
    h = Holder(c, len(devs), hold)
    try:
        p = c.gpum("reserve", "--mem", str(ask), "--no-wait", "--ttl", "5m", "-q", env=d.env,
                   check=False)
        c.expect(p.returncode == 1, "%d bytes granted beside %d held outside on every GPU "
                 "(capacity %d): %s" % (ask, hold, cap, p.stdout.strip()))
        if p.returncode == 0:
            c.gpum("release", p.stdout.strip(), env=d.env, check=False)
    finally:
        h.release()
    p = c.gpum("reserve", "--mem", str(ask), "--no-wait", "--ttl", "5m", "-q", env=d.env,
               check=False)
    if not c.expect(p.returncode == 0, "%d bytes refused with nothing held outside: %s" % (
            ask, tail(p.stderr))):
        return "admission: refused beside outside memory, not granted without it"
    rid = p.stdout.strip()
    h = Holder(c, len(devs), hold)
    try:
        # A request makes gpumd read the devices (refused: no room left).
        c.gpum("reserve", "--mem", "1", "--no-wait", "--ttl", "1m", "-q", env=d.env, check=False)
        g = c.gpum_json("status", "--json", env=d.env)["gpumd"]
        mine = [x for x in g["devices"] if rid in x.get("reservations", [])]
        st = mine[0] if mine else {}
        c.fig("overcommitted_device", {k: st.get(k) for k in ("state", "reason", "capacity",
                                                              "committed", "overcommit",
                                                              "pressure", "unmanaged")})
        c.expect(st.get("state") == "OVERCOMMITTED" and st.get("overcommit", 0) > 0 and
                 st.get("pressure") in ("high", "critical"),
                 "8 GiB held after the grant: the device is %s" % st)
        code, metrics = d.get("/metrics")
        c.expect(code == 200 and re.search(r'^gpum_device_overcommitted\{[^}]*\} 1$', metrics,
                                           re.M), "/metrics has no gpum_device_overcommitted 1")
        al = c.gpum_json("alerts", "--json", env=d.env)
        act = [a for a in al.get("active", []) if a.get("metric") == "overcommitted"]
        c.fig("overcommit_alert", act[0]["message"] if act else None)
        c.expect(act, "no overcommitted alert: %s" % al.get("active"))
    finally:
        h.release()
        c.gpum("release", rid, env=d.env, check=False)
    return ("admission: all but 4 GiB of the capacity refused beside 8 GiB held outside, granted "
            "without; held after the grant: OVERCOMMITTED, alerted")


def promtool(c: Ctx) -> Optional[str]:
    exe = shutil.which("promtool")
    if exe:
        return exe
    gz = os.path.join(c.bundle, "tools", "promtool.gz")
    if not os.path.exists(gz):
        return None
    exe = os.path.join(c.work, "promtool")
    with gzip.open(gz) as src, open(exe, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.chmod(exe, 0o755)
    return exe


@check("shim-overhead", ("gpu", "nvcc"), 120)
def check_shim_overhead(c: Ctx) -> str:
    """What the shim adds to a real cudaMalloc + cudaFree pair (2 MiB), beside the same program
    without it, alternating, three runs each."""
    exe = cudart_program(c)
    pairs, size = 2000, 2 * MiB
    runs: Dict[str, List[float]] = {"plain": [], "shim": []}
    for _ in range(3):
        for label, env in (("plain", {}), ("shim", c.shim_env(8 * GiB))):
            p = c.run([exe, "bench", str(pairs), str(size)], env=dict(os.environ, **env), timeout=60)
            runs[label].append(float(p.stdout.split()[-1]))
    plain, shim = statistics.median(runs["plain"]), statistics.median(runs["shim"])
    c.fig("runs_ns_per_pair", runs)
    c.fig("plain_ns", plain)
    c.fig("shim_ns", shim)
    c.fig("ratio", round(shim / plain, 3))
    return "cudaMalloc+cudaFree of 2 MiB: %.0f ns plain, %.0f ns under the shim (x%.3f, +%.0f ns)" % (
        plain, shim, shim / plain, shim - plain)


class CkptLib:
    """libgpum's gpum/checkpoint.h through ctypes: each step's code, detail and seconds."""

    def __init__(self, bundle: str) -> None:
        self.lib = ctypes.CDLL(os.path.join(bundle, "lib", "libgpum.so.0"))
        self.lib.gpum_last_error.restype = ctypes.c_char_p
        self.lib.gpum_err_name.restype = ctypes.c_char_p
        self.lib.gpum_ckpt_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        for fn in ("gpum_ckpt_lock", "gpum_ckpt_checkpoint", "gpum_ckpt_unlock",
                   "gpum_ckpt_state", "gpum_ckpt_restore"):
            getattr(self.lib, fn).restype = ctypes.c_int
        self.h = ctypes.c_void_p()
        rc = self.lib.gpum_ckpt_open(None, ctypes.byref(self.h))
        if rc:
            raise Fail("gpum_ckpt_open: %s: %s" % (self.name(rc), self.detail()))

    def name(self, rc: int) -> str:
        return (self.lib.gpum_err_name(rc) or b"?").decode()

    def detail(self) -> str:
        return (self.lib.gpum_last_error() or b"").decode(errors="replace")

    def step(self, what: str, pid: int, *args: Any) -> Tuple[str, str, float]:
        """Runs gpum_ckpt_WHAT(h, pid, args...): ("OK" or the code's name, detail, seconds)."""
        t0 = time.monotonic()
        rc = getattr(self.lib, "gpum_ckpt_" + what)(self.h, ctypes.c_int(pid), *args)
        dt = time.monotonic() - t0
        out = (self.name(rc), self.detail() if rc else "", dt)
        print("gpum_ckpt_%s(%d): %s %s (%.3f s)" % (what, pid, out[0], out[1], dt), flush=True)
        return out

    def restore(self, pid: int, pairs: List[Tuple[str, str]]) -> Tuple[str, str, float]:
        arr = ctypes.c_char_p * max(1, len(pairs))
        old = arr(*[a.encode() for a, _ in pairs]) if pairs else None
        new = arr(*[b.encode() for _, b in pairs]) if pairs else None
        return self.step("restore", pid, old, new, ctypes.c_size_t(len(pairs)))

    def state(self, pid: int) -> str:
        st = ctypes.c_int(-1)
        rc = self.lib.gpum_ckpt_state(self.h, ctypes.c_int(pid), ctypes.byref(st))
        return ["running", "locked", "checkpointed", "failed"][st.value] if rc == 0 and \
            0 <= st.value <= 3 else "error %s: %s" % (self.name(rc), self.detail())


def pattern_target(exe: str, size: int) -> subprocess.Popen:
    p = subprocess.Popen([exe, "pattern", str(size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 120)
    line = p.stdout.readline() if ready else ""
    if not line.startswith("ready"):
        p.kill()
        raise Fail("the pattern process (%d bytes) did not start: %r %s" % (
            size, line, tail(p.stderr.read() if p.poll() is not None else "")))
    return p


def pattern_step(p: subprocess.Popen, timeout: float = 120) -> str:
    p.stdin.write("step\n")
    p.stdin.flush()
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    return p.stdout.readline().strip() if ready else "no answer within %g s" % timeout


def gpu_used_mib() -> Optional[float]:
    rows = smi_query(["memory.used"])
    return num(rows[0]["memory.used"]) if rows else None


@check("checkpoint", ("gpu", "nvcc"), 300)
def check_checkpoint(c: Ctx) -> str:
    """The CUDA driver's process checkpoint through libgpum's gpum/checkpoint.h (issue 28): a
    process whose device memory holds a known pattern is locked, checkpointed (its GPU memory
    must be free at once), restored (by UUID pair, onto the same GPU: this machine has one) and
    unlocked, and its next step finds the pattern and goes on; at 1, 8 and 32 GiB (where the GPU
    and host memory have room), timed beside the PCIe bandwidth of plain copies measured in the
    same run. Also the real driver's answers to illegal steps and an unknown pid, which the
    simulator's must equal (docs/sim.md)."""
    exe = cudart_program(c)
    bw = c.run([exe, "bw", str(4 * GiB)], timeout=120)
    bws = {k: float(v) for k, v in (l.split() for l in bw.stdout.splitlines() if "_gbs " in l)}
    c.fig("bandwidth_gbs", bws)
    lib = CkptLib(c.bundle)
    uuid = (smi_query(["uuid"]) or [{"uuid": ""}])[0]["uuid"]
    mem_total = num((smi_query(["memory.total"]) or [{"memory.total": "0"}])[0]["memory.total"]) or 0
    host_avail = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                host_avail = int(line.split()[1]) * 1024
    runs = []
    for gib in (1, 8, 32):
        size = gib * GiB
        if size + 4 * GiB > mem_total * MiB or 2 * size + 4 * GiB > host_avail:
            c.note("%d GiB skipped: GPU %.0f MiB, host available %.1f GiB" % (gib, mem_total, host_avail / GiB))
            continue
        p = pattern_target(exe, size)
        try:
            pid = p.pid
            first = pattern_step(p)
            c.expect(first == "ok 0", "%d GiB: the first step said %r" % (gib, first))
            if gib == 1:
                # Illegal steps and an unknown pid: the real driver's codes, which the simulator
                # and gpum's mapping must match.
                c.fig("checkpoint_while_running", lib.step("checkpoint", pid)[:2])
                c.fig("restore_while_running", lib.restore(pid, [])[:2])
                c.fig("unlock_while_running", lib.step("unlock", pid)[:2])
                other = subprocess.Popen(["sleep", "60"])  # a process that never loaded CUDA
                try:
                    c.fig("lock_non_cuda_pid", lib.step("lock", other.pid, ctypes.c_uint(1000))[:2])
                    c.fig("state_non_cuda_pid", lib.state(other.pid))
                finally:
                    other.kill()
                    other.wait()
                c.expect(c.figures["checkpoint_while_running"][0] == "ESTATE",
                         "checkpoint of a running process: %s" % (c.figures["checkpoint_while_running"],))
            used0 = gpu_used_mib()
            lock = lib.step("lock", pid, ctypes.c_uint(10000))
            ck = lib.step("checkpoint", pid)
            st_ck = lib.state(pid)
            used1 = gpu_used_mib()
            if gib == 1:
                c.fig("lock_while_checkpointed", lib.step("lock", pid, ctypes.c_uint(1000))[:2])
                c.fig("checkpoint_while_checkpointed", lib.step("checkpoint", pid)[:2])
            pairs = [(uuid, uuid.lower())] if gib == 1 and uuid else []
            rs = lib.restore(pid, pairs)
            st_rs = lib.state(pid)
            used2 = gpu_used_mib()
            un = lib.step("unlock", pid)
            st_un = lib.state(pid)
            after = pattern_step(p)
            run = {"gib": gib, "lock": lock, "checkpoint": ck, "restore": rs, "unlock": un,
                   "states": [st_ck, st_rs, st_un], "used_mib": [used0, used1, used2],
                   "step_after": after, "restore_pairs": len(pairs)}
            runs.append(run)
            ok = all(s[0] == "OK" for s in (lock, ck, rs, un))
            c.expect(ok, "%d GiB: %s" % (gib, "; ".join("%s %s %s" % (n, s[0], s[1]) for n, s in
                                                       (("lock", lock), ("checkpoint", ck), ("restore", rs), ("unlock", un)) if s[0] != "OK")))
            if ok:
                c.expect(st_ck == "checkpointed" and st_rs == "locked" and st_un == "running",
                         "%d GiB: states %s" % (gib, run["states"]))
                c.expect(used0 is not None and used1 is not None and used0 - used1 >= gib * 1024 * 0.95,
                         "%d GiB: GPU used %s MiB before, %s MiB checkpointed" % (gib, used0, used1))
                c.expect(after == "ok 1", "%d GiB: the step after the restore said %r" % (gib, after))
                run["suspend_gbs"] = round(size / 1e9 / (lock[2] + ck[2]), 2)
                run["resume_gbs"] = round(size / 1e9 / (rs[2] + un[2]), 2)
        finally:
            try:
                p.stdin.close()
                p.wait(timeout=60)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                p.kill()
    c.fig("runs", runs)
    if not runs:
        raise Skip("no size fits this machine")
    return "; ".join("%d GiB: suspend %.2f s, resume %.2f s (%s)" % (
        r["gib"], r["lock"][2] + r["checkpoint"][2], r["restore"][2] + r["unlock"][2],
        r["step_after"]) for r in runs) + "; copies d2h %.1f / h2d %.1f GB/s pinned, %.1f / %.1f pageable" % (
        bws.get("d2h_pinned_gbs", 0), bws.get("h2d_pinned_gbs", 0), bws.get("d2h_pageable_gbs", 0),
        bws.get("h2d_pageable_gbs", 0))


@check("gpumd-suspend", ("gpu", "nvcc"), 300)
def check_gpumd_suspend(c: Ctx) -> str:
    """Issue 28 on a real GPU: a job holding 4 GiB with a pattern under `gpum run
    --preemptible` is suspended by `gpum suspend` (the GPU's memory must drop by it), resumed by
    `gpum resume` (reserved first, restored, its pattern intact, it goes on), then preempted by
    gpumd for a request of higher priority that fits only in its room, and resumed by gpumd when
    that request is released; times of each beside the size."""
    exe = cudart_program(c)
    d = Gpumd(c)
    d.env["GPUM_PREEMPT_MIN_RUN_TIME"] = "0"
    d.start()
    job = None
    high = None
    try:
        job = subprocess.Popen([c.gpum_bin, "run", "--mem", "8GiB", "--preemptible", "-q",
                                "--label", "low", "--", exe, "pattern", str(4 * GiB)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=d.env)
        ready, _, _ = select.select([job.stdout], [], [], 120)
        line = job.stdout.readline() if ready else ""
        if not line.startswith("ready"):
            raise Fail("the job did not start: %r %s" % (line, tail(job.stderr.read() if job.poll() is not None else "")))
        c.expect(pattern_step(job) == "ok 0", "the first step failed")

        def low() -> Dict[str, Any]:
            rs = c.gpum_json("jobs", "--json", "--all", env=d.env)
            rs = rs["reservations"] if isinstance(rs, dict) else rs
            return next((r for r in rs if r.get("label") == "low"), {})

        rid = low().get("id", "")
        used0 = gpu_used_mib()
        t0 = time.monotonic()
        p = c.gpum("suspend", rid, env=d.env, timeout=200, check=False)
        c.fig("suspend_s", round(time.monotonic() - t0, 2))
        used1 = gpu_used_mib()
        r = low()
        c.fig("suspended", {"state": r.get("state"), "host_bytes": r.get("host_bytes"),
                            "reason": r.get("reason"), "used_mib": [used0, used1]})
        if not c.expect(p.returncode == 0 and r.get("state") == "SUSPENDED",
                        "gpum suspend: rc %d %s %s" % (p.returncode, tail(p.stdout), tail(p.stderr))):
            raise Fail("; ".join(c.fails))
        c.expect(used0 is not None and used1 is not None and used0 - used1 >= 4096,
                 "GPU used %s -> %s MiB: the job's 4 GiB is not free" % (used0, used1))
        t0 = time.monotonic()
        p = c.gpum("resume", rid, env=d.env, timeout=200, check=False)
        c.fig("resume_s", round(time.monotonic() - t0, 2))
        c.expect(p.returncode == 0 and low().get("state") == "GRANTED",
                 "gpum resume: rc %d %s %s" % (p.returncode, tail(p.stdout), tail(p.stderr)))
        after = pattern_step(job)
        c.expect(after == "ok 1", "the step after gpum resume said %r" % after)

        # The policy: a request of priority 10 that fits only in the job's room.
        st = c.gpum_json("status", "--json", env=d.env)
        cap = st["gpumd"]["devices"][0]["capacity"] if st.get("gpumd") else 0
        want = cap - 6 * GiB  # more than the room left beside the job's 8 GiB
        t0 = time.monotonic()
        high = subprocess.Popen([c.gpum_bin, "reserve", "--mem", str(want), "--priority", "10",
                                 "-q", "--label", "high"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=d.env)
        granted = False
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline and not granted:
            rs = c.gpum_json("jobs", "--json", "--all", env=d.env)
            rs = rs["reservations"] if isinstance(rs, dict) else rs
            granted = any(x.get("label") == "high" and x.get("state") == "GRANTED" for x in rs)
            time.sleep(0.2)
        c.fig("preempt_s", round(time.monotonic() - t0, 2))
        r = low()
        c.fig("preempted", {"state": r.get("state"), "reason": r.get("reason")})
        c.expect(granted and r.get("state") == "SUSPENDED" and "preempted" in (r.get("reason") or ""),
                 "the request of priority 10 was not granted by preempting the job: %s" % r)
        high.send_signal(signal.SIGTERM)
        high.wait(timeout=30)
        high = None
        t0 = time.monotonic()
        back = False
        while time.monotonic() < t0 + 200 and not back:
            r = low()
            back = r.get("state") == "GRANTED" and not r.get("moving")
            time.sleep(0.2)
        c.fig("auto_resume_s", round(time.monotonic() - t0, 2))
        c.expect(back, "the job was not resumed after the request ended: %s" % r)
        after = pattern_step(job)
        c.expect(after == "ok 2", "the step after gpumd's resume said %r" % after)
        return "4 GiB job: gpum suspend %.1f s (GPU %s -> %s MiB), gpum resume %.1f s, pattern intact; preempted for priority 10 and granted in %.1f s, resumed by gpumd in %.1f s" % (
            c.figures.get("suspend_s", 0), used0, used1, c.figures.get("resume_s", 0),
            c.figures.get("preempt_s", 0), c.figures.get("auto_resume_s", 0))
    finally:
        if high:
            high.kill()
        if job:
            try:
                job.stdin.close()
                job.wait(timeout=60)
            except (subprocess.TimeoutExpired, BrokenPipeError):
                job.kill()
        d.stop(signal.SIGTERM)


# ---- running them --------------------------------------------------------------------------------

CHILDREN = {
    "shim-torch": lambda args: child_shim_torch(),
    "torch-allocator": lambda args: child_torch_allocator(),
    TORCH_REPLAY: lambda args: child_torch_replay(list(args)),
    "estimator": lambda args: child_estimator(),
    "adaptive": lambda args: child_adaptive(int(args[0])),
}


def run_one(name: str, bundle: str, work: str, sim: bool, facts: Dict[str, Any],
            result: str) -> None:
    fn = next(f for n, _, _, f in CHECKS if n == name)
    c = Ctx(bundle, work, sim, facts)
    t0 = time.monotonic()
    try:
        detail = fn(c)
        res = "FAIL" if c.fails else "ok"
        if c.fails:
            detail = "; ".join(c.fails)
    except Skip as e:
        res, detail = "SKIP", str(e)
    except Fail as e:
        res, detail = "FAIL", "; ".join(c.fails + [str(e)])
    except Exception as e:  # a check that breaks is a failure, with where it broke
        import traceback
        traceback.print_exc()
        res, detail = "FAIL", "; ".join(c.fails + ["%s: %s" % (type(e).__name__, e)])
    if c.notes:
        detail += " (" + "; ".join(c.notes) + ")"
    with open(result, "w") as f:
        json.dump({"name": name, "result": res, "detail": detail,
                   "seconds": round(time.monotonic() - t0, 2), "figures": c.figures}, f,
                  indent=1, default=str)


def orchestrate(bundle: str, out: str, sim: bool, only: Optional[List[str]], budget: float) -> int:
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="gpum-device-check.")
    env_base = dict(os.environ)
    env_base["PATH"] = os.path.join(bundle, "bin") + os.pathsep + os.path.join(bundle, "sbin") + \
        os.pathsep + env_base.get("PATH", "")
    env_base["GPUM_LIBRARY"] = os.path.join(bundle, "lib", "libgpum.so.0")
    here = os.path.dirname(os.path.abspath(__file__))
    env_base["PYTHONPATH"] = os.pathsep.join([os.path.join(bundle, "python"), here] +
                                             ([env_base["PYTHONPATH"]] if env_base.get("PYTHONPATH") else []))
    env_base["PYTHONUNBUFFERED"] = "1"
    env_base["GPUM_CONFIG"] = os.path.join(work, "gpum.yaml")  # the defaults, not /etc's
    with open(env_base["GPUM_CONFIG"], "w") as f:
        f.write("# the device check runs on gpum's defaults\n")
    for k in ("GPUM_SIM_NODE", "GPUM_CUDA_LIBRARY", "GPUM_NVML_LIBRARY", "GPUM_FENCE",
              "GPUM_MEM_LIMIT", "LD_PRELOAD", "GPUM_SOCKET", "GPUM_STATE_DIR", "GPUM_BACKEND",
              "PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES", "GPUM_RESERVATION_ID"):
        env_base.pop(k, None)
    node = None
    os.environ.clear()
    os.environ.update(env_base)
    log = open(os.path.join(out, "device-check.log"), "w")
    results: List[Dict[str, Any]] = []
    try:
        if sim:
            node = "devcheck%d" % os.getpid()
            spec = os.path.join(bundle, "examples", "h100x2.yaml")
            p = subprocess.run([os.path.join(bundle, "bin", "gpum"), "sim", "start", spec, "--name", node],
                               capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                print("device-check: gpum sim start failed: " + p.stderr, file=sys.stderr)
                return 1
            os.environ["GPUM_SIM_NODE"] = node
        facts = machine_facts(bundle, sim)
        facts_path = os.path.join(work, "facts.json")
        with open(facts_path, "w") as f:
            json.dump(facts, f)
        print(header(facts), flush=True)
        for name, needs, timeout, _ in CHECKS:
            if only and name not in only:
                continue
            why = unmet(needs, facts, bundle)
            left = budget - (time.monotonic() - t_start)
            if why is None and left < 20:
                why = "out of time: %.0f s of the %g s budget left" % (left, budget)
            if why:
                r = {"name": name, "result": "SKIP", "detail": why, "seconds": 0, "figures": {}}
            else:
                r = run_child(name, bundle, work, sim, facts_path, min(timeout, left - 10), log)
            results.append(r)
            print("%-5s %-16s %6.1f s  %s" % (r["result"], r["name"], r["seconds"], r["detail"]),
                  flush=True)
    finally:
        if node:
            subprocess.run([os.path.join(bundle, "bin", "gpum"), "sim", "stop", node],
                           capture_output=True, timeout=60)
        log.close()
    elapsed = time.monotonic() - t_start
    counts = {k: sum(1 for r in results if r["result"] == k) for k in ("ok", "FAIL", "SKIP")}
    doc = {"schema": 1, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "mode": "sim" if sim else ("gpu" if facts.get("gpu") else "none"),
           "machine": facts, "checks": results, "summary": counts,
           "elapsed_s": round(elapsed, 1), "budget_s": budget}
    with open(os.path.join(out, "device-check.json"), "w") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")
    with open(os.path.join(out, "device-check.txt"), "w") as f:
        f.write(header(facts) + "\n")
        for r in results:
            f.write("%-5s %-16s %6.1f s  %s\n" % (r["result"], r["name"], r["seconds"], r["detail"]))
        f.write("%d ok, %d FAIL, %d SKIP in %.0f s\n" % (counts["ok"], counts["FAIL"], counts["SKIP"], elapsed))
    print("%d ok, %d FAIL, %d SKIP in %.0f s" % (counts["ok"], counts["FAIL"], counts["SKIP"], elapsed))
    shutil.rmtree(work, ignore_errors=True)
    return 1 if counts["FAIL"] else 0


def header(f: Dict[str, Any]) -> str:
    gpu = "simulated node (--sim)" if f.get("sim") else (
        "%s, driver %s, CUDA %s" % (f["gpu"][0]["name"], f.get("driver"), f.get("cuda_driver_version"))
        if f.get("gpu") else "no GPU (%s)" % f.get("gpu_absent"))
    b = f.get("bundle") or {}
    torch = ("torch %s (CUDA %s%s), torchvision %s" % (
        f.get("torch"), f.get("torch_cuda"), "" if f.get("cuda_available") else ", no GPU",
        f.get("torchvision")) if f.get("torch") else "torch not probed")
    return ("gpum device check: %s\nbundle %s (%s); %s %s, %s; python %s, %s; nvcc %s" % (
        gpu, b.get("version"), b.get("commit"), f.get("hostname"), f.get("kernel"), f.get("libc"),
        f.get("python"), torch, f.get("nvcc")))


def run_child(name: str, bundle: str, work: str, sim: bool, facts_path: str, timeout: float,
              log: Any) -> Dict[str, Any]:
    cwork = os.path.join(work, name)
    os.makedirs(cwork, exist_ok=True)
    result = os.path.join(work, name + ".json")
    cmd = [sys.executable, os.path.abspath(__file__), "--bundle", bundle, "--work", cwork,
           "--facts", facts_path, "--result", result] + (["--sim"] if sim else []) + ["one", name]
    t0 = time.monotonic()
    logf = os.path.join(work, name + ".log")
    with open(logf, "w") as lf:
        p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = None
    # Whatever the check started in its session goes with it.
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
    secs = round(time.monotonic() - t0, 2)
    with open(logf, errors="replace") as lf:
        text = lf.read()
    log.write("==== %s (%.1f s) ====\n%s\n" % (name, secs, text[-200000:]))
    log.flush()
    if rc is None:
        return {"name": name, "result": "FAIL", "seconds": secs, "figures": {},
                "detail": "did not finish within %.0f s: %s" % (timeout, tail(text, 600))}
    try:
        with open(result) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {"name": name, "result": "FAIL", "seconds": secs, "figures": {},
                "detail": "exited %d without a result: %s" % (rc, tail(text, 600))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out")
    ap.add_argument("--work")
    ap.add_argument("--facts")
    ap.add_argument("--result")
    ap.add_argument("--sim", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--budget", type=float, default=450)
    ap.add_argument("cmd", nargs="*")
    a = ap.parse_args()
    if not a.cmd:
        if not a.out:
            ap.error("--out is needed")
        names = [n for n, _, _, _ in CHECKS]
        only = a.only.split(",") if a.only else None
        bad = [n for n in (only or []) if n not in names]
        if bad:
            ap.error("no check %s (checks: %s)" % (", ".join(bad), ", ".join(names)))
        return orchestrate(os.path.abspath(a.bundle), os.path.abspath(a.out), a.sim, only, a.budget)
    if a.cmd[0] == "one":
        with open(a.facts) as f:
            facts = json.load(f)
        run_one(a.cmd[1], a.bundle, a.work, a.sim, facts, a.result)
        return 0
    if a.cmd[0] == "child":
        print(json.dumps(CHILDREN[a.cmd[1]](a.cmd[2:]), default=str), flush=True)
        return 0
    ap.error("unknown command %s" % a.cmd[0])
    return 2


if __name__ == "__main__":
    sys.exit(main())
