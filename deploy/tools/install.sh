#!/usr/bin/env bash
# Install the tools that check the Kubernetes manifests (helm, kube-score) into a cache outside the checkout,
# once per machine: ${ASSENT_TOOLS:-~/.cache/assent/tools}/bin; then the control plane the tests run the chart on
# (deploy/tools/kube/build.sh: about 25 minutes the first time). They are built from the Go module proxy with the
# machine's Go (no download site is needed); the first build takes a few minutes, later runs find them.
set -euo pipefail

TOOLS="${ASSENT_TOOLS:-$HOME/.cache/assent/tools}"
mkdir -p "$TOOLS/bin"
export GOBIN="$TOOLS/bin" GOFLAGS="-trimpath"

want() {  # want <binary> <module path>@<version>
    local binary="$1" package="$2" stamp="$TOOLS/bin/.$1.version"
    if [[ -x "$TOOLS/bin/$binary" && "$(cat "$stamp" 2>/dev/null)" == "$package" ]]; then
        return
    fi
    if ! command -v go >/dev/null; then
        echo "install Go (https://go.dev/doc/install) to build $binary, or put $binary on PATH" >&2
        exit 1
    fi
    echo "building $binary from $package (once per machine)" >&2
    go install "$package"
    echo "$package" >"$stamp"
}

want helm helm.sh/helm/v3/cmd/helm@v3.17.3
want kube-score github.com/zegl/kube-score/cmd/kube-score@v1.20.0

bash "$(dirname "$0")/kube/build.sh" >/dev/null
