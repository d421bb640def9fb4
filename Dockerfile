# syntax=docker/dockerfile:1
#
# The dctl image: `docker build -t dctl .` The build stage runs the same
# `make build` (go build -o bin/dctl ./cmd/dctl) as a developer does, with cgo
# off for a static binary; the final stage is distroless, runs as the
# unprivileged user 65532 and holds nothing but dctl and CA certificates.
# The Helm chart and config/ run it as `dctl start`.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
# Dependencies first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY pkg/ pkg/
COPY Makefile ./
RUN make build BIN=/out

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dctl /usr/local/bin/dctl
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/dctl"]
CMD ["start"]
