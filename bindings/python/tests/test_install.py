# SPDX-License-Identifier: Apache-2.0
"""`pip install bindings/python` works offline (no download: gpum's own build backend), installs the
typed package, and the installed package finds libgpum through GPUM_LIBRARY or beside itself."""
import os
import re
import shutil
import subprocess
import sys

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def test_pip_install_and_library_lookup(tmp_path):
    pkg = tmp_path / "src"
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                            "__pycache__"))
    target = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                        "--no-build-isolation", "--target", str(target), str(pkg)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (target / "gpum" / "py.typed").exists()
    code = "import gpum; print(gpum.library_path); print(gpum.estimate('gpt2').params)"
    env = dict(os.environ, PYTHONPATH=str(target))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stdout.split()[1] == "124439808", p.stdout + p.stderr
    # Without GPUM_LIBRARY: libgpum beside the package is found.
    shutil.copy(os.environ["GPUM_LIBRARY"], target / "gpum" / "libgpum.so.0")
    env.pop("GPUM_LIBRARY")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[0] == str(target / "gpum" / "libgpum.so.0")
    # Nowhere to be found: a clear ImportError.
    os.remove(target / "gpum" / "libgpum.so.0")
    env["LD_LIBRARY_PATH"] = ""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path)
    if p.returncode != 0:  # (a libgpum installed system-wide would be found instead)
        assert "cannot load libgpum" in p.stderr and "GPUM_LIBRARY" in p.stderr


def _offline(cmd):
    """cmd run without a network where user namespaces allow it (unshare -rn), else with
    proxies that lead nowhere: either way a download fails instead of passing unnoticed."""
    if shutil.which("unshare") and subprocess.run(["unshare", "-rn", "true"],
                                                  capture_output=True).returncode == 0:
        return ["unshare", "-rn", *cmd]
    return cmd


def _venv(path):
    """A fresh venv of Debian's python: with its own pip where ensurepip is installed, else
    seeing the system's pip (--system-site-packages). pip's build environment is isolated
    from site-packages either way: a backend that needs setuptools would have to fetch it."""
    py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    if subprocess.run([py, "-m", "venv", str(path)], capture_output=True).returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([py, "-m", "venv", "--system-site-packages", "--without-pip", str(path)],
                       check=True, capture_output=True)
    return str(path / "bin" / "python")


def test_pip_install_in_a_fresh_venv_without_an_index(tmp_path):
    """`pip install bindings/python` as docs/python.md says, in a fresh venv, with no index and
    no network: the in-tree backend (_gpum_build) needs nothing from an index. Then the sdist
    it builds installs the same way, `pip install -e` runs the tree's files, and the wheel's
    RECORD holds each file's hash and size."""
    pkg = tmp_path / "src"
    shutil.copytree(SRC, pkg, ignore=shutil.ignore_patterns("tests", "*.egg-info", "__pycache__"))
    py = _venv(tmp_path / "venv")
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_CACHE_DIR="1", http_proxy="http://127.0.0.1:9",
               https_proxy="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9",
               HTTPS_PROXY="http://127.0.0.1:9")
    env.pop("PYTHONPATH", None)

    def pip(*args):
        p = subprocess.run(_offline([py, "-m", "pip", *args]), capture_output=True, text=True,
                           env=env, timeout=300, cwd=tmp_path)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    def where():
        code = "import gpum; print(gpum.__version__); print(gpum.__file__)"
        p = subprocess.run([py, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        version, path = p.stdout.split()
        assert re.match(r"^\d+\.\d+\.\d+", version), version  # libgpum's version
        return path

    pip("install", "--no-index", str(pkg))
    installed = where()
    assert installed.startswith(str(tmp_path / "venv")) and os.path.exists(
        os.path.join(os.path.dirname(installed), "py.typed")), installed
    assert "Version: 0.1.0" in pip("show", "gpum")

    # The sdist, built by the backend alone, installs with the same backend.
    dist = tmp_path / "dist"
    p = subprocess.run([py, str(pkg / "_gpum_build" / "gpum_build.py"), "sdist", str(dist)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    pip("uninstall", "-y", "gpum")
    pip("install", "--no-index", str(dist / p.stdout.strip()))
    assert where().startswith(str(tmp_path / "venv"))

    # Editable: the tree's own files.
    pip("uninstall", "-y", "gpum")
    pip("install", "--no-index", "-e", str(pkg))
    assert where() == str(pkg / "gpum" / "__init__.py")

    # The wheel's RECORD: every file with its sha256 and size, RECORD itself without.
    import base64
    import hashlib
    import zipfile
    p = subprocess.run([py, str(pkg / "_gpum_build" / "gpum_build.py"), "wheel", str(dist)],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 0 and p.stdout.strip() == "gpum-0.1.0-py3-none-any.whl", p.stderr
    with zipfile.ZipFile(dist / p.stdout.strip()) as z:
        names = set(z.namelist())
        rows = [r.rsplit(",", 2) for r in z.read("gpum-0.1.0.dist-info/RECORD").decode().split()]
        assert {r[0] for r in rows} == names and "gpum/__init__.py" in names
        for path, digest, size in rows:
            if path.endswith("RECORD"):
                assert digest == size == "", (path, digest)
                continue
            data = z.read(path)
            b64 = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == "sha256=" + b64 and int(size) == len(data), path
        assert "Root-Is-Purelib: true" in z.read("gpum-0.1.0.dist-info/WHEEL").decode()
