# syntax=docker/dockerfile:1
#
# One image holding all three personhub binaries:
#
#   /usr/local/bin/api        HTTP API            (api run | api admin ...)
#   /usr/local/bin/ingester   JetStream consumer  (ingester run | migrate | publish)
#   /usr/local/bin/deleter    queued event deletions (deleter run | run-now)
#
# Build:  docker build -t personhub .
# Run:    docker run --rm personhub ingester migrate   (the default is `api run`)
#
# The runtime image is distroless: no shell, no package manager, runs as
# the unprivileged "nonroot" user (uid 65532).

# Major.minor of the go directive in go.mod. The official images set
# GOTOOLCHAIN=local, so the image's Go must be at least the patch release
# go.mod names; pass e.g. --build-arg GO_VERSION=1.26.8 to pin it.
ARG GO_VERSION=1.26

# ---- build ------------------------------------------------------------------
# Runs on the build host's platform and cross-compiles for the target, so
# multi-platform builds (docker buildx build --platform ...) need no emulation.
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build

# The cache mounts below are at these paths (the image's GOPATH is /go, so
# the module cache is pointed at /root/go explicitly).
ENV GOMODCACHE=/root/go/pkg/mod \
    GOCACHE=/root/.cache/go-build \
    CGO_ENABLED=0

WORKDIR /src

# Download modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod \
    go mod download

COPY . .

ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/root/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags='-s -w' -o /out/ \
        ./cmd/api ./cmd/ingester ./cmd/deleter

# ---- runtime ----------------------------------------------------------------
FROM gcr.io/distroless/static-debian12:nonroot

COPY --from=build /out/api /out/ingester /out/deleter /usr/local/bin/

# The binaries listen on 127.0.0.1 by default; in a container they must
# listen on all interfaces to be reachable through published ports.
ENV API_ADDR=0.0.0.0:8000 \
    INGESTER_METRICS_ADDR=0.0.0.0:9101

# 8000: api (HTTP API, /healthz, /readyz, /metrics)
# 9101: ingester (/metrics, /healthz, /readyz)
EXPOSE 8000 9101

USER nonroot:nonroot

# No ENTRYPOINT, so the command names the binary (found on PATH):
# `docker run IMAGE ingester migrate`. docker-compose.yml sets an
# entrypoint per service instead, so there `command:` is the subcommand.
CMD ["/usr/local/bin/api", "run"]
