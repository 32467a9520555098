#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kwok), helm, Kueue's controller, Karpenter's kwok provider, krew and the gang
# PodGroup CRDs from Go modules into a cache outside the
# repository, keyed by version.
#
# Usage: tests/cluster/build.sh            # prints the bin directory on the last line
# Env:   MIGPLAN_CACHE (default ~/.cache/migplan), MIGPLAN_BUILD_JOBS (go build -p)
# A component is rebuilt only when its pinned version (versions.env) changes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache_root=${MIGPLAN_CACHE:-$HOME/.cache/migplan}/k8s
jobs=${MIGPLAN_BUILD_JOBS:-$(nproc)}
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
bin_dir="$cache_root/bin-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}_promop-${PROMETHEUS_OPERATOR_VERSION}_kueue-${KUEUE_VERSION}"

log() { printf '[cluster-build %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

command -v go >/dev/null || { log "error: the Go toolchain is required (go not found on PATH)"; exit 1; }

# build_component NAME VERSION SETUP_FUNCTION BINARY=PACKAGE... : builds into
# $cache_root/NAME-VERSION unless its stamp file says it is complete.
build_component() {
  local name=$1 version=$2 setup=$3; shift 3
  local dir="$cache_root/$name-$version"
  if [[ -f "$dir/.complete" ]]; then
    log "$name $version: cached in $dir"
    return
  fi
  rm -rf "$dir"; mkdir -p "$dir/src" "$dir/bin"
  log "$name $version: preparing wrapper module"
  (cd "$dir/src" && "$setup" "$version")
  local entry binary pkg start
  for entry in "$@"; do
    binary=${entry%%=*} pkg=${entry#*=} start=$SECONDS
    log "$name $version: building $binary (the slow part on a cold cache)"
    (cd "$dir/src" && go build -mod=mod -p "$jobs" -trimpath -ldflags "$(ldflags_$name "$version")" \
        -o "$dir/bin/$binary" "$pkg")
    log "$name $version: $binary built in $((SECONDS - start))s"
  done
  touch "$dir/.complete"
}

# go_minor: the toolchain's Go version as a go.mod's `go` line wants it (1.26).
go_minor() { go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/'; }

# wrapper_module NAME MODULE VERSION: a go.mod here that requires MODULE at VERSION, from which
# the module's commands are built.
wrapper_module() {
  printf 'module migplan.local/%sbuild\ngo %s\nrequire %s %s\n' "$1" "$(go_minor)" "$2" "$3" > go.mod
}

setup_kubernetes() {
  local version=$1 minor=${1#v1.}
  local staging_version="v0.${minor}"
  local upstream_mod
  upstream_mod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
  {
    echo "module migplan.local/k8sbuild"
    echo "go $(go_minor)"
    echo "require k8s.io/kubernetes $version"
    echo "replace ("
    # k8s.io/kubernetes replaces each staging module with a local path; point them at the
    # published v0.X.Y modules of the same release instead.
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\t\1 => \1 '"$staging_version"'#p' "$upstream_mod"
    echo ")"
  } > go.mod
}
ldflags_kubernetes() {
  local version=$1 minor=${1#v1.}; minor=${minor%%.*}
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local f="" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    f+=" -X $p.gitTreeState=clean -X $p.buildDate=$date -X $p.gitCommit=module-$version"
  done
  echo "-s -w$f"
}

setup_etcd() { wrapper_module etcd go.etcd.io/etcd/server/v3 "$1"; }
ldflags_etcd() { echo "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$1"; }

setup_kwok() { wrapper_module kwok sigs.k8s.io/kwok "$1"; }
ldflags_kwok() { echo "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$1"; }

setup_helm() { wrapper_module helm helm.sh/helm/v4 "$1"; }
ldflags_helm() { echo "-s -w -X helm.sh/helm/v4/internal/version.version=$1"; }

setup_kueue() { wrapper_module kueue sigs.k8s.io/kueue "$1"; }
ldflags_kueue() { echo "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$1"; }

setup_krew() { wrapper_module krew sigs.k8s.io/krew "$1"; }
ldflags_krew() { echo "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$1"; }

setup_karpenter() { wrapper_module karpenter sigs.k8s.io/karpenter "$1"; }
ldflags_karpenter() { echo "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$1"; }

total_start=$SECONDS
build_component etcd "$ETCD_VERSION" setup_etcd etcd=go.etcd.io/etcd/server/v3
build_component kwok "$KWOK_VERSION" setup_kwok kwok=sigs.k8s.io/kwok/cmd/kwok
build_component helm "$HELM_VERSION" setup_helm helm=helm.sh/helm/v4/cmd/helm
build_component kueue "$KUEUE_VERSION" setup_kueue kueue=sigs.k8s.io/kueue/cmd/kueue
build_component karpenter "$KARPENTER_VERSION" setup_karpenter \
  karpenter-kwok=sigs.k8s.io/karpenter/kwok
build_component krew "$KREW_VERSION" setup_krew kubectl-krew=sigs.k8s.io/krew/cmd/krew \
  validate-krew-manifest=sigs.k8s.io/krew/cmd/validate-krew-manifest
build_component kubernetes "$KUBERNETES_VERSION" setup_kubernetes \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl=k8s.io/kubernetes/cmd/kubectl

# kwok needs stage definitions (how fake nodes and pods move through their lifecycle); use
# the ones shipped in the same kwok module version: fast node start, status heartbeats, fast
# pod start/completion/deletion.
copy_kwok_stages() {
  local src dest="$cache_root/kwok-$KWOK_VERSION/stages" f
  src="$(go env GOMODCACHE)/sigs.k8s.io/kwok@$KWOK_VERSION/kustomize/stage"
  [[ -d "$src" ]] || (cd "$cache_root/kwok-$KWOK_VERSION/src" && go mod download "sigs.k8s.io/kwok@$KWOK_VERSION")
  mkdir -p "$dest"
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    cp "$src/$f" "$dest/"
  done
  # Kubelet-style heartbeats (a Lease renewed, node status posted seldom), for benches of
  # thousands of nodes: the harness swaps it in for node-heartbeat.yaml when asked.
  mkdir -p "$dest-lease"
  cp "$src/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" "$dest-lease/"
}
copy_kwok_stages

# The ServiceMonitor CRD, from the pinned prometheus-operator module (the chart's optional
# ServiceMonitor is dry-run against it).
copy_servicemonitor_crd() {
  local dest="$cache_root/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION" dir
  [[ -f "$dest/servicemonitors.yaml" ]] && return
  dir=$(cd /tmp && go mod download -json \
    "github.com/prometheus-operator/prometheus-operator@$PROMETHEUS_OPERATOR_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  mkdir -p "$dest"
  cp "$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" \
    "$dest/servicemonitors.yaml"
}
copy_servicemonitor_crd

# Kueue's CRDs, from the module its controller was built from.
copy_kueue_crds() {
  local dest="$cache_root/kueue-$KUEUE_VERSION/crds" dir
  [[ -f "$dest/kueue.x-k8s.io_workloads.yaml" ]] && return
  dir=$(cd "$cache_root/kueue-$KUEUE_VERSION/src" && go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  mkdir -p "$dest"
  cp "$dir"/config/components/crd/bases/*.yaml "$dest/"
}
copy_kueue_crds

# The gang PodGroup CRDs: Volcano's generated from volcano.sh/apis with controller-gen, the
# coscheduling one copied from the scheduler-plugins module.
gang_crds() {
  local dest="$cache_root/gang-crds-volcano-${VOLCANO_APIS_VERSION}_cosched-${SCHEDULER_PLUGINS_VERSION}"
  local gen="$cache_root/controller-gen-$CONTROLLER_TOOLS_VERSION" dir start=$SECONDS
  [[ -f "$dest/.complete" ]] && { echo "$dest"; return; }
  rm -rf "$dest" "$gen"; mkdir -p "$dest" "$gen/src"
  log "gang CRDs: building controller-gen $CONTROLLER_TOOLS_VERSION"
  (cd "$gen/src" &&
    printf 'module migplan.local/crdgen\ngo %s\nrequire (\n\tsigs.k8s.io/controller-tools %s\n\tvolcano.sh/apis %s\n)\n' \
      "$(go_minor)" "$CONTROLLER_TOOLS_VERSION" "$VOLCANO_APIS_VERSION" >go.mod &&
    printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "sigs.k8s.io/controller-tools/cmd/controller-gen"\n\t_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"\n)\n' >tools.go &&
    go mod tidy >&2 &&
    go build -p "$jobs" -trimpath -o "$gen/controller-gen" sigs.k8s.io/controller-tools/cmd/controller-gen &&
    "$gen/controller-gen" crd:crdVersions=v1 paths=volcano.sh/apis/pkg/apis/scheduling/v1beta1 \
      output:crd:dir="$dest")
  rm -f "$dest/scheduling.volcano.sh_queues.yaml"
  dir=$(cd "$gen/src" && go mod download -json "sigs.k8s.io/scheduler-plugins@$SCHEDULER_PLUGINS_VERSION" |
    sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  cp "$dir/config/crd/bases/scheduling.x-k8s.io_podgroups.yaml" "$dest/"
  touch "$dest/.complete"
  log "gang CRDs: ready in $((SECONDS - start))s"
  echo "$dest"
}
gang_crds_dir=$(gang_crds)

# Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay) and its kwok provider's KWOKNodeClass,
# from the module its controller was built from.
copy_karpenter_crds() {
  local dest="$cache_root/karpenter-$KARPENTER_VERSION/crds" dir
  [[ -f "$dest/karpenter.sh_nodepools.yaml" ]] && return
  dir=$(cd "$cache_root/karpenter-$KARPENTER_VERSION/src" &&
    go mod download -json "sigs.k8s.io/karpenter@$KARPENTER_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
  mkdir -p "$dest"
  cp "$dir"/kwok/charts/crds/*.yaml "$dir"/kwok/apis/crds/*.yaml "$dest/"
}
copy_karpenter_crds

# One directory with every binary under its usual name.
mkdir -p "$bin_dir"
ln -sf "$cache_root/etcd-$ETCD_VERSION/bin/etcd" "$bin_dir/etcd"
ln -sf "$cache_root/kwok-$KWOK_VERSION/bin/kwok" "$bin_dir/kwok"
ln -sf "$cache_root/helm-$HELM_VERSION/bin/helm" "$bin_dir/helm"
ln -sf "$cache_root/prometheus-operator-$PROMETHEUS_OPERATOR_VERSION/servicemonitors.yaml" \
  "$bin_dir/servicemonitor-crd.yaml"
ln -sfn "$cache_root/kwok-$KWOK_VERSION/stages" "$bin_dir/kwok-stages"
ln -sfn "$cache_root/kwok-$KWOK_VERSION/stages-lease" "$bin_dir/kwok-stages-lease"
ln -sf "$cache_root/kueue-$KUEUE_VERSION/bin/kueue" "$bin_dir/kueue"
ln -sfn "$cache_root/kueue-$KUEUE_VERSION/crds" "$bin_dir/kueue-crds"
ln -sfn "$gang_crds_dir" "$bin_dir/gang-crds"
ln -sf "$cache_root/karpenter-$KARPENTER_VERSION/bin/karpenter-kwok" "$bin_dir/karpenter-kwok"
ln -sfn "$cache_root/karpenter-$KARPENTER_VERSION/crds" "$bin_dir/karpenter-crds"
ln -sf "$cache_root/krew-$KREW_VERSION/bin/kubectl-krew" "$bin_dir/kubectl-krew"
ln -sf "$cache_root/krew-$KREW_VERSION/bin/validate-krew-manifest" "$bin_dir/validate-krew-manifest"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  ln -sf "$cache_root/kubernetes-$KUBERNETES_VERSION/bin/$b" "$bin_dir/$b"
done
log "control plane ready in $((SECONDS - total_start))s: $bin_dir"
echo "$bin_dir"
