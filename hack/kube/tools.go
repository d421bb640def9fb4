//go:build tools

// Package kube records the control-plane commands this module builds
// (kube-apiserver, kube-controller-manager, kubectl, etcd), so that
// `go mod tidy` keeps their dependencies.
package kube

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
