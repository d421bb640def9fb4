# syntax=docker/dockerfile:1
#
# The dctl image for those who build with a container engine:
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t ghcr.io/dcontroller/dctl:0.1.0 .
#
# It describes the image that `make image` assembles without one
# (hack/tools/imagebuild, see docs/install.md): FROM scratch, holding only the
# static dctl binary (cgo off, -trimpath), the link /usr/bin/metacontroller to
# it, and the /etc/passwd and /etc/group
# of hack/tools/imagebuild/rootfs; CA certificates are embedded in dctl
# (golang.org/x/crypto/x509roots/fallback). It runs as the unprivileged user
# 65532 and starts `dctl start`, as the Helm chart and config/ run it.
# test/image checks that both describe the same image and that the version
# label is dctl's version.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -o /out/dctl ./cmd/dctl
# Metacontroller's Deployments run /usr/bin/metacontroller: dctl started under
# that name runs `dctl start`.
RUN mkdir -p /out/links/usr/bin && ln -s /usr/local/bin/dctl /out/links/usr/bin/metacontroller

FROM scratch
COPY hack/tools/imagebuild/rootfs/ /
COPY --from=build /out/dctl /usr/local/bin/dctl
COPY --from=build /out/links/ /
ENV PATH=/usr/local/bin:/usr/bin:/bin
WORKDIR /
USER 65532:65532
LABEL org.opencontainers.image.title="dctl" \
      org.opencontainers.image.source="https://github.com/dcontroller/dcontroller" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/dctl"]
CMD ["start"]
