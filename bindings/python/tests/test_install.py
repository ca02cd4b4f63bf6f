# SPDX-License-Identifier: Apache-2.0
"""`pip install bindings/python` works offline (no download: setuptools from Debian), installs the
typed package, and the installed package finds libgpum through GPUM_LIBRARY or beside itself."""
import os
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
