//go:build tools

// Package tools pins the etcd server main package (go.etcd.io/etcd/server/v3)
// so that `go mod tidy` keeps every dependency needed to build the etcd binary.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
