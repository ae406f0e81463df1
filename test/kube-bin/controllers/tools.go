//go:build tools

// Package tools pins the kube-controller-manager and kube-scheduler main packages so that
// `go mod tidy` keeps every dependency needed to build both binaries.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
