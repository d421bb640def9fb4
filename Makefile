# dcontroller build, test and demo.
GO        ?= go
BIN       := $(CURDIR)/bin
DCTL      := $(BIN)/dctl
K8S_BIN   := $(BIN)/k8s
HELM      := $(BIN)/helm
GOFILES   := $(shell find . -name '*.go' -not -path './bin/*' -not -path './hack/kube/*' -not -path './hack/tools/*')

TIMED     := $(CURDIR)/hack/timed.sh

.PHONY: all build test unit vet fmt-check demo eval-demo kube-binaries tools chart-lint manifests docs-picture generate clean help prereqs bench-scale bench-scale-composite

all: build

help: ## Show the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

prereqs: ## Check that Go (go.mod's version or newer), make, curl, openssl and python3 are installed
	@GO=$(GO) hack/prereqs.sh

build: prereqs ## Build bin/dctl
	@$(TIMED) "building bin/dctl" "under a minute; 2-3 minutes the first time, while Go modules download" \
		$(GO) build -o $(DCTL) ./cmd/dctl

generate: ## Regenerate deepcopy code and CRDs with controller-gen
	$(GO) tool controller-gen object paths=./api/...
	$(GO) tool controller-gen crd paths=./api/... output:crd:artifacts:config=config/crd
	cp config/crd/*_*.yaml charts/dcontroller/crds/

vet: ## go vet
	$(GO) vet ./...

fmt-check: ## Fail when a Go file is not gofmt-formatted
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit: ## Unit, property, golden, fuzz-seed and end-to-end tests (whole output in bin/test.log; on a failure, a summary of it at the end)
	GO=$(GO) GOTEST_LOG=$(BIN)/test.log hack/gotest.sh -count=1 -timeout 30m ./...

test: prereqs fmt-check vet kube-binaries tools unit ## Everything CI runs (builds the control plane once)

# N pods for bench-scale, N parents for bench-scale-composite (the benchmarks' DCTL_SCALE_N).
N ?= 10000

bench-scale: prereqs kube-binaries ## Memory per pod, sync time and change latency of dctl start next to a bare informer at N pods (N=10000 by default, at least 200; e.g. N=100000)
	DCTL_SCALE_N=$(N) $(GO) test ./test/e2e -run '^$$' -bench '^BenchmarkScale$$' -benchtime=1x -timeout 180m -v

bench-scale-composite: prereqs kube-binaries ## Memory per cached object of a CompositeController (N parents x 3 ConfigMaps) next to a bare informer (N=10000)
	DCTL_SCALE_N=$(N) $(GO) test ./test/e2e -run '^$$' -bench '^BenchmarkScaleComposite$$' -benchtime=1x -timeout 180m -v

demo: build kube-binaries ## Getting started on a local control plane: dctl start, the pod annotator, kubectl
	hack/demo.sh

eval-demo: build ## Run the pod annotator offline with dctl eval (no cluster)
	$(DCTL) eval -f examples/pod-container-num-annotator/operator.yaml \
		-i examples/pod-container-num-annotator/input.yaml

kube-binaries: $(K8S_BIN)/kube-apiserver $(K8S_BIN)/etcd $(K8S_BIN)/kubectl $(K8S_BIN)/kube-controller-manager ## Build kube-apiserver, etcd, kubectl and kube-controller-manager into bin/k8s

# Built from source through the Go module proxy, once: later runs reuse bin/k8s.
$(K8S_BIN)/kube-apiserver: hack/kube/go.mod hack/kube/go.sum | prereqs
	@cd hack/kube && $(TIMED) "building kube-apiserver from source into bin/k8s, only the first time" "about 5 minutes on 2 cores, longer while modules download" \
		$(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver
$(K8S_BIN)/kubectl: hack/kube/go.mod hack/kube/go.sum | prereqs
	@cd hack/kube && $(TIMED) "building kubectl from source into bin/k8s, only the first time" "about 2 minutes on 2 cores" \
		$(GO) build -o $@ k8s.io/kubernetes/cmd/kubectl
$(K8S_BIN)/kube-controller-manager: hack/kube/go.mod hack/kube/go.sum | prereqs
	@cd hack/kube && $(TIMED) "building kube-controller-manager from source into bin/k8s, only the first time" "about 3 minutes on 2 cores" \
		$(GO) build -o $@ k8s.io/kubernetes/cmd/kube-controller-manager
$(K8S_BIN)/etcd: hack/kube/go.mod hack/kube/go.sum | prereqs
	@cd hack/kube && $(TIMED) "building etcd from source into bin/k8s, only the first time" "about 30 seconds on 2 cores" \
		$(GO) build -o $@ go.etcd.io/etcd/server/v3

tools: $(HELM) ## Build helm into bin/ (from hack/tools, a separate Go module)

# The -X flags are those of helm's own release build: its version, and the
# Kubernetes version `helm template` assumes (helm v3.22 is built on k8s.io v0.37).
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=v3.22.0 \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37 \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37
$(HELM): hack/tools/go.mod hack/tools/go.sum | prereqs
	@cd hack/tools && $(TIMED) "building helm into bin/, only the first time" "about 2 minutes on 2 cores" \
		$(GO) build -ldflags '$(HELM_LDFLAGS)' -o $@ helm.sh/helm/v3/cmd/helm

.PHONY: image crane FORCE

# The dctl image, FROM scratch and without a container engine: static dctl
# binaries (cgo off) for IMAGE_PLATFORMS, assembled by hack/tools/imagebuild
# into an OCI image layout (bin/image/oci, an index over the platforms) and a
# `docker save` archive per platform (bin/image/dctl-linux-ARCH.tar). The tag
# is dctl's version (cmd/dctl/version.go), which is also the chart's appVersion.
VERSION         := $(shell sed -n 's/^var version = "\(.*\)"$$/\1/p' cmd/dctl/version.go)
IMAGE_REPO      ?= ghcr.io/dcontroller/dctl
IMAGE_PLATFORMS := linux/amd64 linux/arm64
IMAGE_DIR       := $(BIN)/image
CRANE           := $(BIN)/crane

image: $(IMAGE_DIR)/oci/index.json ## Build the dctl image into bin/image (OCI layout oci/, per-platform archives), no Docker needed

# $(IMAGE_DIR)/.name holds the image's name and changes only when
# IMAGE_REPO or the version does, so that a new name rebuilds the image.
$(IMAGE_DIR)/.name: FORCE
	@mkdir -p $(@D); echo '$(IMAGE_REPO):$(VERSION)' | cmp -s - $@ || echo '$(IMAGE_REPO):$(VERSION)' > $@

$(IMAGE_DIR)/oci/index.json: $(GOFILES) go.mod go.sum hack/tools/go.mod hack/tools/go.sum $(wildcard hack/tools/imagebuild/*.go hack/tools/imagebuild/rootfs/*/*) $(IMAGE_DIR)/.name | prereqs
	@set -e; for p in $(IMAGE_PLATFORMS); do \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(TIMED) "building the static dctl for $$p" "under a minute; 3-5 minutes the first time for another architecture" \
			$(GO) build -trimpath -o $(IMAGE_DIR)/$$p/dctl ./cmd/dctl; \
	done
	@cd hack/tools && $(TIMED) "assembling the dctl image $(IMAGE_REPO):$(VERSION)" "seconds; a minute the first time" \
		$(GO) run ./imagebuild -version $(VERSION) -repository $(IMAGE_REPO) \
			$(foreach p,$(IMAGE_PLATFORMS),-binary $(p)=$(IMAGE_DIR)/$(p)/dctl) -out $(IMAGE_DIR)

crane: $(CRANE) ## Build crane into bin/ (bin/crane push bin/image/oci REGISTRY/dctl:TAG)

$(CRANE): hack/tools/go.mod hack/tools/go.sum | prereqs
	@cd hack/tools && $(TIMED) "building crane into bin/" "about a minute" \
		$(GO) build -o $@ github.com/google/go-containerregistry/cmd/crane

chart-lint: tools ## helm lint and helm template the chart (the tests also apply it to a control plane)
	$(HELM) lint --strict charts/dcontroller
	$(HELM) template dcontroller charts/dcontroller --namespace dcontroller-system >/dev/null

manifests: kube-binaries ## Print the kustomize manifests (config/default) as kubectl renders them
	$(K8S_BIN)/kubectl kustomize config/default

docs-picture: build ## Regenerate the README's dataflow picture with dctl visualize
	$(DCTL) visualize -f examples/unready-pod-report/operator.yaml --format mermaid --output docs/images/unready-pod-report.mmd
	$(DCTL) visualize -f examples/unready-pod-report/operator.yaml --format svg --output docs/images/unready-pod-report.svg

clean: ## Remove build output
	rm -rf $(BIN)
