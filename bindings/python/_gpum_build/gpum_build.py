# SPDX-License-Identifier: Apache-2.0
"""gpum's PEP 517 build backend: builds the wheel and the sdist with the standard library only.

``pip install bindings/python`` needs nothing from an index: pyproject.toml names this module
(``build-backend = "gpum_build"``, ``backend-path = ["_gpum_build"]``) and requires nothing, so
pip's isolated build environment has nothing to fetch (with setuptools it fetched setuptools,
and failed on a machine without an index).

The package is pure Python (ctypes over libgpum, no compiled extension), so the wheel is the
``gpum`` directory as it is, plus a ``libgpum.so*`` placed beside it before the build (a wheel
that ships the library: its tag is then the platform's instead of ``py3-none-any``). The
metadata comes from pyproject.toml's ``[project]`` table (PEP 621), read with tomllib where
Python has it (3.11), else with a reader of the few TOML forms that table uses.

The wheel is PEP 427's: ``NAME-VERSION.dist-info/`` with METADATA (core metadata 2.1), WHEEL
and RECORD (each file's sha256, urlsafe base64 without padding, and size; RECORD's own line
empty). ``build_editable`` (PEP 660) makes a wheel whose ``gpum.pth`` puts this source
directory on ``sys.path``, so ``pip install -e`` runs the tree's files as they are edited.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import sys
import sysconfig
import tarfile
import time
import zipfile
from typing import Any, Dict, List, Mapping, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "gpum"
# What an sdist carries besides the package: enough to build the wheel from it again.
SDIST_FILES = ["pyproject.toml", "README.md", "_gpum_build/gpum_build.py"]

ConfigSettings = Optional[Mapping[str, Any]]

__all__ = ["build_wheel", "build_sdist", "build_editable", "get_requires_for_build_wheel",
           "get_requires_for_build_sdist", "get_requires_for_build_editable",
           "prepare_metadata_for_build_wheel", "prepare_metadata_for_build_editable"]


# ---- pyproject.toml ---------------------------------------------------------------------------

def _toml_value(text: str) -> Any:
    """A TOML value of the forms [project] uses: a string, an array of strings, an inline
    table of strings ({text = "Apache-2.0"}), a boolean or an integer."""
    import ast
    text = text.strip()
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("{"):
        body = text.strip("{} ")
        return {k.strip(): _toml_value(v) for k, v in
                (item.split("=", 1) for item in re.split(r",\s*(?=\w+\s*=)", body) if item)}
    return ast.literal_eval(text)


def _read_project() -> Dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        raw = f.read()
    if sys.version_info >= (3, 11):
        import tomllib
        return dict(tomllib.loads(raw.decode())["project"])
    project: Dict[str, Any] = {}
    table = None
    sub: Dict[str, Any] = project
    for line in raw.decode().splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^\[\[?([^\]]+)\]\]?$", line)
        if m:
            table = m.group(1)
            if table.startswith("project."):
                sub = project.setdefault(table[len("project."):], {})
            else:
                sub = project
            continue
        if table is not None and (table == "project" or table.startswith("project.")):
            key, value = line.split("=", 1)
            sub[key.strip().strip('"')] = _toml_value(value)
    return project


def _name_version() -> Tuple[str, str]:
    p = _read_project()
    return re.sub(r"[-_.]+", "_", p["name"]).lower(), str(p["version"])


def _metadata() -> str:
    p = _read_project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    lic = p.get("license")
    if isinstance(lic, dict) and lic.get("text"):
        lines.append(f"License: {lic['text']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            lines.append(f'Requires-Dist: {dep}; extra == "{extra}"')
    readme = p.get("readme")
    body = ""
    if isinstance(readme, str) and os.path.exists(os.path.join(ROOT, readme)):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


# ---- the wheel --------------------------------------------------------------------------------

def _package_files() -> List[str]:
    """The package's files, relative to ROOT: its modules, py.typed and a libgpum placed there."""
    out = []
    pkg = os.path.join(ROOT, PACKAGE)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py") or name == "py.typed" or name.startswith("libgpum.so"):
            if os.path.isfile(os.path.join(pkg, name)):
                out.append(f"{PACKAGE}/{name}")
    return out


def _tag(files: List[str]) -> str:
    if any(os.path.basename(f).startswith("libgpum.so") for f in files):
        plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
        return f"py3-none-{plat}"
    return "py3-none-any"


def _wheel_text(tag: str) -> str:
    return (f"Wheel-Version: 1.0\nGenerator: gpum_build\nRoot-Is-Purelib: "
            f"{'true' if tag.endswith('-any') else 'false'}\nTag: {tag}\n")


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _zip_info(path: str, mode: int = 0o644) -> zipfile.ZipInfo:
    # A fixed time (the zip format's earliest) makes the wheel reproducible.
    info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _write_wheel(wheel_directory: str, contents: List[Tuple[str, bytes, int]], tag: str) -> str:
    name, version = _name_version()
    dist_info = f"{name}-{version}.dist-info"
    contents = contents + [(f"{dist_info}/METADATA", _metadata().encode(), 0o644),
                           (f"{dist_info}/WHEEL", _wheel_text(tag).encode(), 0o644)]
    record = [_record_line(p, data) for p, data, _ in contents]
    record.append(f"{dist_info}/RECORD,,")
    contents.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    filename = f"{name}-{version}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as z:
        for path, data, mode in contents:
            z.writestr(_zip_info(path, mode), data)
    return filename


def _read(rel: str) -> Tuple[str, bytes, int]:
    full = os.path.join(ROOT, rel)
    with open(full, "rb") as f:
        data = f.read()
    return rel, data, 0o755 if os.access(full, os.X_OK) else 0o644


def build_wheel(wheel_directory: str, config_settings: ConfigSettings = None,
                metadata_directory: Optional[str] = None) -> str:
    files = _package_files()
    return _write_wheel(wheel_directory, [_read(f) for f in files], _tag(files))


def build_editable(wheel_directory: str, config_settings: ConfigSettings = None,
                   metadata_directory: Optional[str] = None) -> str:
    pth = (ROOT + "\n").encode()
    return _write_wheel(wheel_directory, [(f"{PACKAGE}.pth", pth, 0o644)], "py3-none-any")


def _prepare_metadata(metadata_directory: str) -> str:
    name, version = _name_version()
    dist_info = f"{name}-{version}.dist-info"
    path = os.path.join(metadata_directory, dist_info)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(path, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_text(_tag(_package_files())))
    return dist_info


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: ConfigSettings = None) -> str:
    return _prepare_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory: str,
                                        config_settings: ConfigSettings = None) -> str:
    return _prepare_metadata(metadata_directory)


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> List[str]:
    return []


# ---- the sdist --------------------------------------------------------------------------------

def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    name, version = _name_version()
    base = f"{name}-{version}"
    filename = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    files = [f for f in _package_files() if not os.path.basename(f).startswith("libgpum.so")]
    members = [_read(f) for f in SDIST_FILES + files]
    members.append(("PKG-INFO", _metadata().encode(), 0o644))
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", time.time()))
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz",
                      format=tarfile.PAX_FORMAT) as tar:
        for path, data, mode in members:
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size, info.mode, info.mtime = len(data), mode, mtime
            tar.addfile(info, io.BytesIO(data))
    return filename


if __name__ == "__main__":  # python3 _gpum_build/gpum_build.py [wheel|sdist] DIR
    kind, out = sys.argv[1], sys.argv[2]
    print(build_wheel(out) if kind == "wheel" else build_sdist(out))
