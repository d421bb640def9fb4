# dcontroller build, test and demo.
GO        ?= go
BIN       := $(CURDIR)/bin
DCTL      := $(BIN)/dctl
K8S_BIN   := $(BIN)/k8s
GOFILES   := $(shell find . -name '*.go' -not -path './bin/*' -not -path './hack/kube/*')

.PHONY: all build test unit vet fmt-check demo eval-demo kube-binaries generate clean help

all: build

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

build: ## Build bin/dctl
	$(GO) build -o $(DCTL) ./cmd/dctl

generate: ## Regenerate deepcopy code and CRDs with controller-gen
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd

vet: ## go vet
	$(GO) vet ./...

fmt-check: ## Fail when a Go file is not gofmt-formatted
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit: ## Unit, property, golden, fuzz-seed and end-to-end tests
	$(GO) test -count=1 -timeout 30m ./...

test: fmt-check vet kube-binaries unit ## Everything CI runs (builds the control plane once)

demo: build kube-binaries ## Getting started on a local control plane: dctl start, the pod annotator, kubectl
	hack/demo.sh

eval-demo: build ## Run the pod annotator offline with dctl eval (no cluster)
	$(DCTL) eval -f examples/pod-container-num-annotator/operator.yaml \
		-i examples/pod-container-num-annotator/input.yaml

kube-binaries: $(K8S_BIN)/kube-apiserver $(K8S_BIN)/etcd $(K8S_BIN)/kubectl ## Build kube-apiserver, etcd and kubectl into bin/k8s

$(K8S_BIN)/kube-apiserver: hack/kube/go.mod hack/kube/go.sum
	cd hack/kube && $(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver
$(K8S_BIN)/kubectl: hack/kube/go.mod hack/kube/go.sum
	cd hack/kube && $(GO) build -o $@ k8s.io/kubernetes/cmd/kubectl
$(K8S_BIN)/etcd: hack/kube/go.mod hack/kube/go.sum
	cd hack/kube && $(GO) build -o $@ go.etcd.io/etcd/server/v3

clean: ## Remove build output
	rm -rf $(BIN)
