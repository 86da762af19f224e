"""Writes a wheel (PEP 427) from a list of files, for accelkit's in-tree build backends.

pip installs the repository offline, so the backends cannot ask for setuptools or wheel:
this is the part of them they would have provided. A wheel is a zip of the files plus a
NAME-VERSION.dist-info folder: METADATA, WHEEL, entry_points.txt and RECORD (the sha256
and size of every file).
"""
import base64
import hashlib
import os
import zipfile


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _metadata(name, version, summary, requires, extras):
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             f"Summary: {summary}", "Requires-Python: >=3.9"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    for extra, reqs in extras.items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    return "\n".join(lines) + "\n"


def write_wheel(directory, name, version, tag, files, summary, requires=(), extras=None,
                console_scripts=None):
    """files: (path in the wheel, path on disk) pairs; executables keep their mode.
    Returns the wheel's file name (what the PEP 517 build_wheel hook returns)."""
    dist = name.replace("-", "_")
    wheel_name = f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    generated = {
        f"{info}/METADATA": _metadata(name, version, summary, requires, extras or {}),
        f"{info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: accelkit build_backend\n"
                          f"Root-Is-Purelib: {'true' if tag.endswith('-any') else 'false'}\n"
                          f"Tag: {tag}\n"),
    }
    if console_scripts:
        generated[f"{info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{cmd} = {target}\n" for cmd, target in console_scripts.items())
    record = []
    with zipfile.ZipFile(os.path.join(directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, path in sorted(files):
            with open(path, "rb") as f:
                data = f.read()
            entry = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type = zipfile.ZIP_DEFLATED
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            entry.external_attr = (0o100000 | mode) << 16  # a regular file and its mode
            z.writestr(entry, data)
            record.append(f"{arcname},{_record_hash(data)},{len(data)}")
        for arcname, text in generated.items():
            data = text.encode()
            z.writestr(zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0)), data)
            record.append(f"{arcname},{_record_hash(data)},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)),
                   "\n".join(record) + "\n")
    return wheel_name


def python_files(package_dir, prefix):
    """(wheel path, disk path) of every .py file under package_dir, below prefix/."""
    found = []
    for folder, dirs, names in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = os.path.relpath(folder, package_dir)
        for n in sorted(names):
            if n.endswith(".py"):
                arc = prefix if rel == "." else f"{prefix}/{rel}"
                found.append((f"{arc}/{n}", os.path.join(folder, n)))
    return found
