# syntax=docker/dockerfile:1
# The dfs coordinator: a static binary on distroless, run as an unprivileged
# user. Build from the repository root:
#   docker build -f deploy/docker/coordinator.Dockerfile -t dfs-coordinator .
# The image also carries the dfs CLI (`docker exec dfs-coordinator /usr/local/bin/dfs nodes`)
# and healthprobe, the health check: distroless has no shell and no curl.

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/coordinator ./cmd/dfs ./cmd/healthprobe
# An empty data directory owned by the runtime user: a fresh named volume is
# seeded from it, ownership included, so the coordinator can write there.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coordinator /out/dfs /out/healthprobe /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /data
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
ENV SERVER_PORT=8080 \
    DATA_DIRECTORY=/data
EXPOSE 8080
# The embedded metadata store (when DATABASE_URL is unset) and the upload spool.
VOLUME ["/data"]
# healthprobe expands ${SERVER_PORT} itself: exec-form checks get no shell.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/usr/local/bin/healthprobe", "-timeout", "4s", "http://127.0.0.1:${SERVER_PORT}/health/ready"]
ENTRYPOINT ["/usr/local/bin/coordinator"]
