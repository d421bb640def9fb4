// Package e2e holds end-to-end tests that run dcontroller against a real
// kube-apiserver and etcd (started with controller-runtime's envtest from the
// binaries `make kube-binaries` builds into bin/k8s), with a
// kube-controller-manager beside them (garbage collector, namespace
// lifecycle: the controllers of hack/local-cluster.sh), and drive it with
// the built kubectl.
package e2e
