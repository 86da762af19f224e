#!/bin/sh
# The pip package as a user gets it: a fresh venv (--system-site-packages, for Debian's
# torch, numpy and onnx), `pip install --no-index` of the repository and of the Horovod
# shim (python/horovod-shim), the library taken from BUILD_DIR (AK_BUILD_DIR) so that
# nothing is compiled twice; then, from a folder outside the repository and with a clean
# environment (no PYTHONPATH, no AK_LIBRARY): the `ak` entry point, a Horovod script on 2
# ranks through the installed horovodrun, an InferenceSession script. Last, the shim's
# build must refuse where another Horovod is installed.
#   python_package.sh PYTHON REPO BUILD_DIR WITH_ONNX(0|1)
set -eu
python=$1
repo=$(cd "$2" && pwd)
build=$(cd "$3" && pwd)
with_onnx=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
venv=$tmp/venv

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
# what the user's shell would have: the venv's commands first, nothing of accelkit's
clean() { env -i PATH="$venv/bin:/usr/bin:/bin" HOME="$tmp" LANG=C.UTF-8 "$@"; }

step "venv + pip install --no-index $repo $repo/python/horovod-shim"
"$python" -m venv --system-site-packages "$venv"
env -u PYTHONPATH -u AK_LIBRARY AK_BUILD_DIR="$build" "$venv/bin/pip" install --no-index \
    --no-cache-dir --disable-pip-version-check -q "$repo" "$repo/python/horovod-shim" ||
    fail "pip install"

mkdir "$tmp/work"
cd "$tmp/work"
step "ak (entry point)"
clean ak version | grep -q "^accelkit " || fail "ak version through the entry point"
clean ak sysinfo --quick >/dev/null || fail "ak sysinfo through the entry point"

step "horovodrun -np 2 python hvd_allreduce.py"
clean horovodrun -np 2 python "$here/hvd_allreduce.py" || fail "Horovod script on 2 ranks"

step "InferenceSession"
if [ "$with_onnx" = 1 ]; then
    clean python "$here/onnx_session.py" || fail "InferenceSession script"
else
    clean python "$here/onnx_session.py" --without-onnx || fail "InferenceSession refusal"
fi

step "the shim refuses to install over another Horovod"
site=$(clean python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
mkdir "$site/horovod-0.28.1.dist-info"
printf 'Metadata-Version: 2.1\nName: horovod\nVersion: 0.28.1\n' >"$site/horovod-0.28.1.dist-info/METADATA"
if clean pip install --no-index --no-cache-dir --disable-pip-version-check --force-reinstall \
        --no-deps "$repo/python/horovod-shim" >"$tmp/refuse.log" 2>&1; then
    fail "the shim installed over horovod 0.28.1"
fi
grep -q "a real Horovod is installed (horovod 0.28.1" "$tmp/refuse.log" ||
    { cat "$tmp/refuse.log"; fail "the refusal does not name the installed Horovod"; }
echo "PASS"
