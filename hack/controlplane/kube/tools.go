//go:build tools

// Package tools pins the main packages that ../build.sh may build, so that
// their dependencies are recorded in go.mod and go.sum. build.sh decides which
// of them are actually compiled (see K8S_COMPONENTS there).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
