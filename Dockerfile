# tickwheel server image: a static binary on distroless, run as non-root.
#
#   docker build -t tickwheel .
#   docker run -d --name tickwheel -p 7420:7420 -p 127.0.0.1:7421:7421 \
#     -v tickwheel-data:/var/lib/tickwheel tickwheel
#   docker cp tickwheel:/var/lib/tickwheel/tickwheel-data/client.token .
#
# The server listens on every interface inside the container, so protected
# mode wants a client token. With none given, -client-token-auto makes one
# at first start in the data volume (tickwheel-data/client.token, mode
# 0600; the log names it) and keeps it across restarts: give its content to
# your clients. Your own token (-e TICKWHEEL_CLIENT_TOKEN=..., or
# client_token_file pointing at a mounted secret) wins over it; see
# docs/OPERATIONS.md, "Containers".
# The build steps are those .ci/run checks on every commit ("static build").

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/tickwheel ./cmd/tickwheel \
 && /out/tickwheel -config-check -config configs/tickwheel.yaml \
 && mkdir -p /out/data

# distroless/static: no shell, no libc, CA certificates and /etc/passwd
# with the nonroot user (65532).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/tickwheel /usr/local/bin/tickwheel
COPY --from=build --chown=65532:65532 /out/data /var/lib/tickwheel
COPY configs/tickwheel.yaml /etc/tickwheel/tickwheel.yaml
USER 65532:65532
WORKDIR /var/lib/tickwheel
# The data directory is /var/lib/tickwheel/tickwheel-data, the server's
# default (./tickwheel-data) from this working directory: the write-ahead
# log, snapshots and admin.token, so `docker exec NAME tickwheel stats`
# finds the admin token with no flag.
VOLUME ["/var/lib/tickwheel"]
# 7420: the timer protocol; 7421: the operator HTTP listener (/metrics,
# /healthz, /readyz, the status page).
EXPOSE 7420 7421
# /healthz answers while the process serves; recovery of a large state at
# start-up can take a while, hence the start period.
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
  CMD ["/usr/local/bin/tickwheel", "health", "-http-addr", "127.0.0.1:7421"]
# SIGTERM stops it gracefully, with a last snapshot (up to a minute for a
# very large state: docker stop -t 70).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/tickwheel"]
# cmd/tickwheel's TestDockerfileStarts runs the binary with this ENTRYPOINT
# and CMD (no Docker engine in CI).
CMD ["serve", "-config", "/etc/tickwheel/tickwheel.yaml", "-addr", "0.0.0.0:7420", "-http-addr", "0.0.0.0:7421", \
     "-data-dir", "/var/lib/tickwheel/tickwheel-data", "-client-token-auto"]
