#!/usr/bin/env bash
# Build the binaries of the end-to-end test control plane (kube-apiserver,
# kube-controller-manager, etcd, kwok), and helm for the chart tests, from Go
# modules into a cache directory outside the repository:
#
#     ${KOORDPY_CACHE_DIR:-$HOME/.cache/koordpy}/bin
#
# Idempotent: a binary is rebuilt only when it is missing or when its stamp
# file (bin/.<name>.stamp) does not match the wanted version (the version plus
# a hash of the pinning go.mod/go.sum), so bumping a version rebuilds it.
#
# Usage: hack/controlplane/build.sh [--force] [--check] [--with-kube-scheduler]
#   --force   rebuild everything
#   --check   build nothing; exit 0 if everything is up to date, 1 otherwise
#   --with-kube-scheduler
#             also build kube-scheduler (for benchmarks/bench_cluster.py; the
#             tests do not need it); with --check, count it in
#
# Environment:
#   KOORDPY_CACHE_DIR     cache root (default: $HOME/.cache/koordpy)
#   KOORDPY_BUILD_JOBS    go build -p value (default: 2)
#   KOORDPY_BUILD_KUBE_SCHEDULER=1   same as --with-kube-scheduler
#
# Versions are stated once: Kubernetes and etcd by the require line of
# kube/go.mod and etcd/go.mod, KWOK and helm below. The Go toolchain each build
# needs is the `go` line of its go.mod (for KWOK and helm, the go.mod of that
# release); the local toolchain is checked against every one of them before
# anything is built, and is never swapped for a downloaded one
# (GOTOOLCHAIN=local). Needs access to a Go module proxy. GOMODCACHE and
# GOCACHE keep their default locations (outside the repository).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_DIR="${KOORDPY_CACHE_DIR:-$HOME/.cache/koordpy}"
BIN_DIR="$CACHE_DIR/bin"
JOBS="${KOORDPY_BUILD_JOBS:-2}"

# Kubernetes components to build from ./kube (each must be imported by
# kube/tools.go). Built in one `go build`, so the packages the components
# share are compiled once. kube-scheduler is added on request only (the
# benchmarks use it), so the default build, which `make test` runs, does not
# pay for it.
K8S_COMPONENTS=(kube-apiserver kube-controller-manager)
WITH_KUBE_SCHEDULER="${KOORDPY_BUILD_KUBE_SCHEDULER:-0}"

KWOK_VERSION="v0.7.0"
# helm renders and lints charts/koordpy in tests/e2e/test_chart.py. A release
# whose go.mod has no replace directives, so `go install pkg@version` works.
HELM_VERSION="v3.22.0"

FORCE=0
CHECK=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        --check) CHECK=1 ;;
        --with-kube-scheduler) WITH_KUBE_SCHEDULER=1 ;;
        -h|--help) sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build.sh: unknown argument: $arg" >&2; exit 2 ;;
    esac
done
if [[ "$WITH_KUBE_SCHEDULER" == 1 ]]; then K8S_COMPONENTS+=(kube-scheduler); fi

log() { printf '[controlplane-build] %s\n' "$*"; }
die() { printf '[controlplane-build] ERROR: %s\n' "$*" >&2; exit 1; }

# Version of a module required by one of the local go.mod files.
required_version() { # <go.mod> <module path>
    awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) {print $NF; exit}' "$1"
}

K8S_VERSION="$(required_version "$HERE/kube/go.mod" k8s.io/kubernetes)"
ETCD_VERSION="$(required_version "$HERE/etcd/go.mod" go.etcd.io/etcd/server/v3)"
[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "cannot read k8s.io/kubernetes version from kube/go.mod"
K8S_MINOR="${BASH_REMATCH[1]}"
[[ -n "$ETCD_VERSION" ]] || die "cannot read go.etcd.io/etcd/server/v3 version from etcd/go.mod"

hash_files() { cat "$@" 2>/dev/null | sha256sum | cut -c1-16; }
KUBE_STAMP="k8s.io/kubernetes $K8S_VERSION $(hash_files "$HERE/kube/go.mod" "$HERE/kube/go.sum")"
ETCD_STAMP="go.etcd.io/etcd/server/v3 $ETCD_VERSION $(hash_files "$HERE/etcd/go.mod" "$HERE/etcd/go.sum")"
KWOK_STAMP="sigs.k8s.io/kwok $KWOK_VERSION"
HELM_STAMP="helm.sh/helm/v3 $HELM_VERSION, Kubernetes version of its client-go"

stamp_file() { echo "$BIN_DIR/.$1.stamp"; }

up_to_date() { # <binary name> <wanted stamp>
    [[ $FORCE -eq 0 && -x "$BIN_DIR/$1" && -f "$(stamp_file "$1")" ]] &&
        [[ "$(cat "$(stamp_file "$1")")" == "$2" ]]
}

# --check: report and exit without touching anything.
if [[ $CHECK -eq 1 ]]; then
    missing=0
    for c in "${K8S_COMPONENTS[@]}"; do up_to_date "$c" "$KUBE_STAMP" || { log "out of date: $c"; missing=1; }; done
    up_to_date etcd "$ETCD_STAMP" || { log "out of date: etcd"; missing=1; }
    up_to_date kwok "$KWOK_STAMP" || { log "out of date: kwok"; missing=1; }
    up_to_date helm "$HELM_STAMP" || { log "out of date: helm"; missing=1; }
    [[ $missing -eq 0 ]] && log "all binaries up to date in $BIN_DIR"
    exit $missing
fi

# The Go version a module needs: the `go` line of its go.mod.
go_directive() { # <go.mod>
    awk '$1 == "go" {print $2; exit}' "$1"
}
# The go.mod of a module release, from the module cache (downloaded if missing).
release_gomod() { # <module@version>
    env -C "$STAGE" GOFLAGS= go mod download -json "$1" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p'
}
# Fails unless the local Go is at least the one <go.mod> names.
check_go_for() { # <what> <go.mod>
    local wanted
    wanted="$(go_directive "$2")"
    [[ -n "$wanted" ]] || die "no go line in $2 (the Go version $1 needs)"
    if [[ "$(printf '%s\n%s\n' "$wanted" "$GO_HAVE" | sort -V | head -n1)" != "$wanted" ]]; then
        die "$1 needs Go >= $wanted (the go line of $2); this machine has go$GO_HAVE"
    fi
}

GO_MIN="$(printf '%s\n' "$(go_directive "$HERE/kube/go.mod")" "$(go_directive "$HERE/etcd/go.mod")" | sort -V | tail -n1)"
command -v go >/dev/null 2>&1 || die "no 'go' on PATH; Go >= $GO_MIN is needed to build the control plane"
export GOTOOLCHAIN=local CGO_ENABLED=0
GO_VERSION="$(go env GOVERSION)"
[[ "$GO_VERSION" =~ ^go([0-9]+\.[0-9]+(\.[0-9]+)?) ]] || die "cannot parse Go version: $GO_VERSION"
GO_HAVE="${BASH_REMATCH[1]}"
check_go_for "k8s.io/kubernetes $K8S_VERSION" "$HERE/kube/go.mod"
check_go_for "go.etcd.io/etcd/server/v3 $ETCD_VERSION" "$HERE/etcd/go.mod"

mkdir -p "$BIN_DIR"

# Serialise concurrent runs (e.g. several test sessions starting at once).
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE_DIR/.build.lock"
    flock 9
fi

STAGE="$(mktemp -d "$BIN_DIR/.build.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

# Move a freshly built binary from the staging dir into place, then stamp it.
install_bin() { # <name> <stamp>
    [[ -x "$STAGE/$1" ]] || die "build produced no $1 binary"
    mv -f "$STAGE/$1" "$BIN_DIR/$1"
    printf '%s\n' "$2" > "$(stamp_file "$1")"
}

run_step() { # <description> <command...>
    local desc="$1"; shift
    local start=$SECONDS
    log "$desc ..."
    if ! ( "$@" ); then
        die "$desc failed after $((SECONDS - start))s"
    fi
    log "$desc: done in $((SECONDS - start))s"
}

log "Go: $GO_VERSION; cache: $BIN_DIR; -p $JOBS"
TOTAL_START=$SECONDS
built=0

# --- Kubernetes (kube-apiserver, kube-controller-manager, optionally more) ---
kube_todo=()
for c in "${K8S_COMPONENTS[@]}"; do
    if up_to_date "$c" "$KUBE_STAMP"; then
        log "$c $K8S_VERSION: up to date"
    else
        kube_todo+=("$c")
    fi
done
if (( ${#kube_todo[@]} > 0 )); then
    build_date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    ldflags="-s -w"
    for kv in "gitVersion=$K8S_VERSION" gitMajor=1 "gitMinor=$K8S_MINOR" gitTreeState=clean "buildDate=$build_date"; do
        ldflags+=" -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
    done
    pkgs=()
    for c in "${kube_todo[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    build_kube() {
        cd "$HERE/kube" &&
            GOFLAGS=-mod=mod go build -p "$JOBS" -trimpath -buildvcs=false -ldflags "$ldflags" \
                -o "$STAGE/" "${pkgs[@]}"
    }
    log "  (in $HERE/kube) go build -p $JOBS -trimpath -ldflags '<version ldflags>' ${pkgs[*]}"
    run_step "building ${kube_todo[*]} $K8S_VERSION" build_kube
    for c in "${kube_todo[@]}"; do install_bin "$c" "$KUBE_STAMP"; done
    built=1
fi

# --- etcd --------------------------------------------------------------------
if up_to_date etcd "$ETCD_STAMP"; then
    log "etcd $ETCD_VERSION: up to date"
else
    build_etcd() {
        cd "$HERE/etcd" &&
            GOFLAGS=-mod=mod go build -p "$JOBS" -trimpath -buildvcs=false -ldflags "-s -w" \
                -o "$STAGE/etcd" go.etcd.io/etcd/server/v3
    }
    log "  (in $HERE/etcd) go build -p $JOBS -trimpath -o etcd go.etcd.io/etcd/server/v3"
    run_step "building etcd $ETCD_VERSION" build_etcd
    install_bin etcd "$ETCD_STAMP"
    built=1
fi

# --- KWOK ----------------------------------------------------------------------
if up_to_date kwok "$KWOK_STAMP"; then
    log "kwok $KWOK_VERSION: up to date"
else
    # `go install pkg@version` ignores any local go.mod; -mod must not be set.
    build_kwok() {
        cd "$STAGE" &&
            GOFLAGS= GOBIN="$STAGE" go install -p "$JOBS" -trimpath -ldflags "-s -w" \
                "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    }
    check_go_for "sigs.k8s.io/kwok $KWOK_VERSION" "$(release_gomod "sigs.k8s.io/kwok@$KWOK_VERSION")"
    log "  GOBIN=<cache> go install -p $JOBS -trimpath sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    run_step "building kwok $KWOK_VERSION" build_kwok
    install_bin kwok "$KWOK_STAMP"
    built=1
fi

# --- helm ----------------------------------------------------------------------
if up_to_date helm "$HELM_STAMP"; then
    log "helm $HELM_VERSION: up to date"
else
    # As helm's own release build does, stamp in the version and the Kubernetes
    # version of its client-go (1.<minor of client-go>), the default of
    # .Capabilities.KubeVersion; without it helm reports v1.20.0.
    helm_gomod="$(release_gomod "helm.sh/helm/v3@$HELM_VERSION")"
    check_go_for "helm.sh/helm/v3 $HELM_VERSION" "$helm_gomod"
    client_go="$(required_version "$helm_gomod" k8s.io/client-go)"
    [[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || die "cannot read helm's k8s.io/client-go version from $helm_gomod"
    helm_kube_minor="${BASH_REMATCH[1]}"
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
    for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
        ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$helm_kube_minor"
    done
    run_step "building helm $HELM_VERSION" \
        env -C "$STAGE" GOFLAGS= GOBIN="$STAGE" \
        go install -p "$JOBS" -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    install_bin helm "$HELM_STAMP"
    built=1
fi

if [[ $built -eq 1 ]]; then
    log "all done in $((SECONDS - TOTAL_START))s; binaries in $BIN_DIR"
else
    log "nothing to do; binaries in $BIN_DIR"
fi
