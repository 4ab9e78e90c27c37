#!/usr/bin/env bash
# Build a real Kubernetes control plane for the tests, once per machine, into a cache outside the checkout
# (${ASSENT_TOOLS:-~/.cache/assent/tools}/kube-<version>/bin): kube-apiserver, kube-controller-manager and
# kube-scheduler from the Go module proxy (k8s.io/kubernetes, its ./staging modules replaced by their published
# versions), kwok (fake nodes and pods) and etcd (Debian's etcd-server package, unpacked; a static binary).
# About 25 minutes on 2 cores the first time; later runs find the binaries and return at once.
set -euo pipefail

VERSION="${KUBE_VERSION:-1.32.4}"
KWOK_VERSION="${KWOK_VERSION:-v0.6.1}"
TOOLS="${ASSENT_TOOLS:-$HOME/.cache/assent/tools}"
OUT="$TOOLS/kube-$VERSION"
BIN="$OUT/bin"
mkdir -p "$BIN"

built() { [[ -x "$BIN/$1" ]]; }

if ! built kube-apiserver || ! built kube-controller-manager || ! built kube-scheduler; then
    command -v go >/dev/null || { echo "Go is needed to build the Kubernetes control plane" >&2; exit 1; }
    work="$OUT/src"
    rm -rf "$work" && mkdir -p "$work" && cd "$work"
    go mod init assent.local/kube >/dev/null 2>&1
    go mod download -json "k8s.io/kubernetes@v$VERSION" >module.json
    gomod="$(python3 -c 'import json; print(json.load(open("module.json"))["GoMod"])')"
    # Each staging module (k8s.io/api, k8s.io/apimachinery, ...) at the published version of this release.
    staging="0.${VERSION#1.}"
    {
        echo "require k8s.io/kubernetes v$VERSION"
        sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#replace \1 => \1 v'"$staging"'#p' "$gomod"
    } >>go.mod
    cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
GO
    go mod tidy
    for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
        built "$cmd" || go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v$VERSION" \
            -o "$BIN/$cmd" "k8s.io/kubernetes/cmd/$cmd"
    done
    cd "$OUT" && rm -rf "$work"
fi

if ! built kwok; then
    GOBIN="$BIN" GOFLAGS=-trimpath go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
fi

if ! built etcd; then
    scratch="$(mktemp -d)"
    (cd "$scratch" && apt-get download etcd-server >/dev/null && dpkg -x etcd-server_*.deb root)
    cp "$scratch/root/usr/bin/etcd" "$BIN/etcd"
    rm -rf "$scratch"
fi

echo "$BIN"
