"""The PEP 517 build backend of the mmtune Python package, kept in the source tree
(pyproject.toml's backend-path), so `pip install ./python` needs nothing but pip: no
setuptools, no wheel package, no network.  (A fresh venv's setuptools cannot build a wheel
without the `wheel` package, and Python 3.12's venvs have no setuptools at all.)

The package is pure Python, so a wheel is a zip of mmtune/*.py and its .dist-info (METADATA,
WHEEL, RECORD), tagged py3-none-any.  The metadata is here; the version is mmtune.__version__.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
NAME = "mmtune"
SUMMARY = "Tuned GPU matrix multiplication (libmmtune) on CUDA arrays: torch, CuPy, CAI, DLPack"
REQUIRES_PYTHON = ">=3.8"
CLASSIFIERS = ["Programming Language :: Python :: 3", "Operating System :: POSIX :: Linux",
               "Environment :: GPU :: NVIDIA CUDA"]
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed: the same sources give the same wheel


def _read(rel):
    with open(os.path.join(ROOT, rel), "rb") as f:
        return f.read()


def _version():
    m = re.search(rb'^__version__ = "([^"]+)"', _read("mmtune/__init__.py"), re.M)
    if not m:
        raise RuntimeError("mmtune/__init__.py has no __version__")
    return m.group(1).decode()


def _package_files():
    """Relative paths of the package's modules."""
    names = sorted(n for n in os.listdir(os.path.join(ROOT, NAME)) if n.endswith(".py"))
    return [f"{NAME}/{n}" for n in names]


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {_version()}",
             f"Summary: {SUMMARY}", f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Classifier: {c}" for c in CLASSIFIERS]
    lines += ["Description-Content-Type: text/markdown", "", ""]
    return "\n".join(lines).encode() + _read("README.md")


def _wheel_file():
    return (b"Wheel-Version: 1.0\nGenerator: mmtune_backend\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n")


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _write_wheel(directory, files):
    """Writes files ({archive name: bytes}) and the dist-info as a wheel; returns its name."""
    info = _dist_info()
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata()
    files[f"{info}/WHEEL"] = _wheel_file()
    files[f"{info}/top_level.txt"] = f"{NAME}\n".encode()
    record = []
    for arc, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{NAME}-{_version()}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            zi = zipfile.ZipInfo(arc, ZIP_DATE)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    path = os.path.join(metadata_directory, _dist_info())
    os.makedirs(path, exist_ok=True)
    for name, data in (("METADATA", _metadata()), ("WHEEL", _wheel_file())):
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, {rel: _read(rel) for rel in _package_files()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # PEP 660: a .pth file that puts this source folder on sys.path.
    return _write_wheel(wheel_directory, {f"_{NAME}_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    rels = ["pyproject.toml", "README.md", "_backend/mmtune_backend.py"] + _package_files()
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        pkg_info = _metadata()
        for rel, data in [("PKG-INFO", pkg_info)] + [(r, _read(r)) for r in rels]:
            ti = tarfile.TarInfo(f"{base}/{rel}")
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 315532800
            t.addfile(ti, io.BytesIO(data))
    return name
