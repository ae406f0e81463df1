//go:build tools

// Package tools pins the kubelet main package so that `go mod tidy` keeps every dependency
// needed to build it. kubelet has a wrapper module of its own (not test/kube-bin/controllers):
// its extra dependencies (armon/circbuf, otelrestful, ...) would otherwise rewrite that module's
// go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubelet"
)
