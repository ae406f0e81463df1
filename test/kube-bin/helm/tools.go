//go:build tools

// Package tools pins the helm CLI main package so that `go mod tidy` keeps
// every dependency needed to build helm.sh/helm/v3/cmd/helm.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
