//go:build tools

// Package tools pins the etcd server main package (go.etcd.io/etcd/server/v3)
// that ../build.sh compiles into a binary named "etcd".
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
